#include "pool/segment_place.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/owned_directory.h"

namespace hurray::daemon {
namespace {

constexpr std::size_t kExcerptBytes = 120;
// ShmSegment names carry 32; more than this is no name of ours.
constexpr std::size_t kMaxHexDigits = 64;

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Whether `path` is "<directory>/<prefix>-<hex>".
bool IsSegmentOf(std::string_view path, std::string_view directory, std::string_view prefix) {
  while (directory.size() > 1 && directory.ends_with('/')) directory.remove_suffix(1);
  if (directory.empty() || !path.starts_with(directory)) return false;
  path.remove_prefix(directory.size());
  if (directory != "/") {
    if (!path.starts_with('/')) return false;
    path.remove_prefix(1);
  }
  if (!path.starts_with(prefix)) return false;
  path.remove_prefix(prefix.size());
  if (!path.starts_with('-')) return false;
  path.remove_prefix(1);
  if (path.empty() || path.size() > kMaxHexDigits) return false;
  for (const char c : path) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

}  // namespace

std::string BoundedExcerpt(std::string_view text) {
  std::string excerpt;
  for (const char c : text.substr(0, kExcerptBytes)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '\\') {
      excerpt += c;
    } else {
      excerpt += fmt::format("\\x{:02x}", byte);
    }
  }
  if (text.size() > kExcerptBytes) excerpt += fmt::format("... ({} bytes)", text.size());
  return excerpt;
}

Status SegmentPlace::Check(std::string_view path) const {
  if (!shm_prefix.empty() &&
      (IsSegmentOf(path, kShmDirectory, shm_prefix) ||
       (!hugetlbfs_directory.empty() && IsSegmentOf(path, hugetlbfs_directory, shm_prefix)))) {
    return {};
  }
  return FailedPreconditionError(
      fmt::format("\"{}\" is not a segment file of this daemon: those are {}/{}-<hex>{}",
                  BoundedExcerpt(path), kShmDirectory, shm_prefix,
                  hugetlbfs_directory.empty()
                      ? std::string()
                      : fmt::format(" or {}/{}-<hex>", hugetlbfs_directory, shm_prefix)));
}

Status SegmentPlace::Remove(std::string_view path) const {
  HURRAY_RETURN_IF_ERROR(Check(path));
  const std::string file(path);
  struct stat info{};
  if (::lstat(file.c_str(), &info) != 0) {
    if (errno == ENOENT) return {};
    return ErrnoFailure("lstat", file, errno);
  }
  if (!S_ISREG(info.st_mode) || info.st_uid != ::geteuid()) {
    return FailedPreconditionError(fmt::format(
        "{} is a {} of uid {} (mode {:04o}), not a segment file of this daemon's user (uid {})",
        file, FileKindName(info.st_mode), info.st_uid, info.st_mode & 07777, ::geteuid()));
  }
  if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
    return ErrnoFailure("unlink", file, errno);
  }
  return {};
}

}  // namespace hurray::daemon
