#include "hurray/ipc/owned_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "hurray/ipc/errno_error.h"

namespace hurray {
namespace {

// Write permission for anyone but the owner.
constexpr mode_t kWritableByOthers = S_IWGRP | S_IWOTH;

// Refuses a name that is not one component of a path.
Status CheckName(std::string_view directory, std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos) {
    return InvalidArgumentError(
        fmt::format("\"{}\" is not the name of a file in {}", name.substr(0, 64), directory));
  }
  return {};
}

// open(2) flags that never follow a link nor leak into a child.
constexpr int kSafeFlags = O_NOFOLLOW | O_CLOEXEC;

// `path` without trailing slashes (a trailing slash makes open follow a link, O_NOFOLLOW or
// not); "/" stays.
std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.ends_with('/')) path.pop_back();
  return path;
}

// Refuses what is not a regular file (a link, a FIFO, a directory) where one is read.
Status RequireRegularFile(std::string_view path, const struct stat& info) {
  if (S_ISREG(info.st_mode)) return {};
  return FailedPreconditionError(
      fmt::format("{} is a {} (owned by uid {}), not a file this "
                  "process wrote; it is left alone",
                  path, FileKindName(info.st_mode), info.st_uid));
}

}  // namespace

std::string_view FileKindName(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR:
      return "directory";
    case S_IFLNK:
      return "symbolic link";
    case S_IFREG:
      return "regular file";
    case S_IFSOCK:
      return "socket";
    case S_IFIFO:
      return "FIFO";
    case S_IFCHR:
    case S_IFBLK:
      return "device";
    default:
      return "file of an unknown kind";
  }
}

Status CheckOwnedDirectory(std::string_view what, std::string_view path, const struct stat& info,
                           uid_t euid) {
  if (!S_ISDIR(info.st_mode)) {
    return FailedPreconditionError(fmt::format("{} {} is a {} (owned by uid {}), not a directory",
                                               what, path, FileKindName(info.st_mode),
                                               info.st_uid));
  }
  const bool owner_trusted = info.st_uid == euid || info.st_uid == 0;
  if (owner_trusted && (info.st_mode & kWritableByOthers) == 0) return {};
  return FailedPreconditionError(fmt::format(
      "{} {} is owned by uid {} with mode {:04o}; it must be owned by uid {} (this process's "
      "user) or root and writable only by its owner, so that nobody else can replace what is "
      "in it",
      what, path, info.st_uid, info.st_mode & 07777, euid));
}

Result<OwnedDirectory> OwnedDirectory::Open(std::string path, std::string_view what) {
  if (path.empty()) return InvalidArgumentError(fmt::format("{}: the path is empty", what));
  path = WithoutTrailingSlashes(std::move(path));
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | kSafeFlags));
  if (!fd) {
    const int error = errno;
    struct stat info{};
    // ENOTDIR: a link (O_NOFOLLOW) or a file of another kind; say which.
    if ((error == ENOTDIR || error == ELOOP) && ::lstat(path.c_str(), &info) == 0) {
      HURRAY_RETURN_IF_ERROR(CheckOwnedDirectory(what, path, info, ::geteuid()));
    }
    return ErrnoFailure("open(O_DIRECTORY | O_NOFOLLOW)", path, error);
  }
  struct stat info{};
  if (::fstat(fd.get(), &info) != 0) return ErrnoFailure("fstat", path, errno);
  HURRAY_RETURN_IF_ERROR(CheckOwnedDirectory(what, path, info, ::geteuid()));
  return OwnedDirectory(std::move(path), std::move(fd));
}

Result<OwnedDirectory> OwnedDirectory::Create(std::string path, mode_t mode,
                                              std::string_view what) {
  if ((mode & kWritableByOthers) != 0) {
    return InvalidArgumentError(fmt::format(
        "{} {}: mode {:04o} lets group or others write it, so that they could replace what "
        "is in it; give it write permission for its owner only (0755, 0750 or 0700)",
        what, path, mode & 07777));
  }
  if (path.empty()) return InvalidArgumentError(fmt::format("{}: the path is empty", what));
  path = WithoutTrailingSlashes(std::move(path));
  const bool made = ::mkdir(path.c_str(), mode) == 0;
  if (!made && errno != EEXIST) return ErrnoFailure("mkdir", path, errno);
  if (!made) return Open(std::move(path), what);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | kSafeFlags));
  if (!fd) return ErrnoFailure("open(O_DIRECTORY | O_NOFOLLOW)", path, errno);
  // The umask may have narrowed the mode.
  if (::fchmod(fd.get(), mode) != 0) return ErrnoFailure("fchmod", path, errno);
  struct stat info{};
  if (::fstat(fd.get(), &info) != 0) return ErrnoFailure("fstat", path, errno);
  HURRAY_RETURN_IF_ERROR(CheckOwnedDirectory(what, path, info, ::geteuid()));
  return OwnedDirectory(std::move(path), std::move(fd));
}

std::string OwnedDirectory::PathOf(std::string_view name) const {
  return path_ == "/" ? fmt::format("/{}", name) : fmt::format("{}/{}", path_, name);
}

Result<UniqueFd> OwnedDirectory::OpenFile(std::string_view name, int flags, mode_t mode) const {
  HURRAY_RETURN_IF_ERROR(CheckName(path_, name));
  const std::string file(name);
  UniqueFd fd(::openat(fd_.get(), file.c_str(), flags | kSafeFlags, mode));
  if (!fd) return ErrnoFailure("openat(O_NOFOLLOW)", PathOf(name), errno);
  return fd;
}

Result<std::optional<struct stat>> OwnedDirectory::StatFile(std::string_view name) const {
  HURRAY_RETURN_IF_ERROR(CheckName(path_, name));
  const std::string file(name);
  struct stat info{};
  if (::fstatat(fd_.get(), file.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::optional<struct stat>();
    return ErrnoFailure("fstatat", PathOf(name), errno);
  }
  return std::optional<struct stat>(info);
}

Result<std::optional<std::string>> OwnedDirectory::ReadFile(std::string_view name,
                                                            std::size_t max_bytes) const {
  HURRAY_ASSIGN_OR_RETURN(const std::optional<struct stat> found, StatFile(name));
  if (!found) return std::optional<std::string>();
  HURRAY_RETURN_IF_ERROR(RequireRegularFile(PathOf(name), *found));
  // O_NONBLOCK: a FIFO put there since must not hang the open; the fstat refuses it.
  HURRAY_ASSIGN_OR_RETURN(const UniqueFd fd, OpenFile(name, O_RDONLY | O_NONBLOCK));
  struct stat info{};
  if (::fstat(fd.get(), &info) != 0) {
    return ErrnoFailure("fstat", PathOf(name), errno);
  }
  HURRAY_RETURN_IF_ERROR(RequireRegularFile(PathOf(name), info));
  std::string text(max_bytes, '\0');
  std::size_t filled = 0;
  while (filled < text.size()) {
    const ssize_t got = ::read(fd.get(), text.data() + filled, text.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoFailure("read", PathOf(name), errno);
    if (got == 0) break;
    filled += static_cast<std::size_t>(got);
  }
  text.resize(filled);
  return std::optional<std::string>(std::move(text));
}

Status OwnedDirectory::ReplaceFile(std::string_view name, std::string_view text) const {
  HURRAY_RETURN_IF_ERROR(CheckName(path_, name));
  const std::string temporary = fmt::format("{}.new", name);
  HURRAY_ASSIGN_OR_RETURN(const std::optional<struct stat> stale, StatFile(temporary));
  if (stale) {
    if (!S_ISREG(stale->st_mode)) {
      return FailedPreconditionError(fmt::format(
          "{} is a {} (owned by uid {}) where this process keeps a temporary file; it is left "
          "alone: remove it",
          PathOf(temporary), FileKindName(stale->st_mode), stale->st_uid));
    }
    HURRAY_RETURN_IF_ERROR(RemoveFile(temporary));  // Left by a process that died.
  }
  {
    HURRAY_ASSIGN_OR_RETURN(const UniqueFd fd,
                            OpenFile(temporary, O_WRONLY | O_CREAT | O_EXCL, 0600));
    for (std::size_t written = 0; written < text.size();) {
      const ssize_t put = ::write(fd.get(), text.data() + written, text.size() - written);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) {
        const Error error = ErrnoError("write", PathOf(temporary), put < 0 ? errno : EIO);
        (void)RemoveFile(temporary);
        return std::unexpected(error);
      }
      written += static_cast<std::size_t>(put);
    }
  }
  const std::string file(name);
  if (::renameat(fd_.get(), temporary.c_str(), fd_.get(), file.c_str()) != 0) {
    const Error error = ErrnoError("renameat", PathOf(name), errno);
    (void)RemoveFile(temporary);
    return std::unexpected(error);
  }
  return {};
}

Status OwnedDirectory::RemoveFile(std::string_view name) const {
  HURRAY_RETURN_IF_ERROR(CheckName(path_, name));
  const std::string file(name);
  if (::unlinkat(fd_.get(), file.c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoFailure("unlinkat", PathOf(name), errno);
  }
  return {};
}

Result<std::vector<std::string>> OwnedDirectory::ListNames(std::string_view prefix) const {
  // A description of its own: readdir's position is not shared with fd_.
  UniqueFd listing(::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!listing) return ErrnoFailure("openat", path_, errno);
  DIR* directory = ::fdopendir(listing.get());
  if (directory == nullptr) return ErrnoFailure("fdopendir", path_, errno);
  (void)listing.Release();  // closedir closes it.
  std::vector<std::string> names;
  errno = 0;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the stream is this call's own.
  while (const dirent* entry = ::readdir(directory)) {
    const std::string_view name(entry->d_name);
    if (name != "." && name != ".." && name.starts_with(prefix)) names.emplace_back(name);
  }
  const int failed = errno;
  ::closedir(directory);
  if (failed != 0) return ErrnoFailure("readdir", path_, failed);
  return names;
}

}  // namespace hurray
