#include "journal/journal_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <type_traits>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon {
namespace {

constexpr std::array<char, 8> kMagic = {'H', 'R', 'R', 'Y', 'J', 'R', 'N', 'L'};
constexpr std::uint32_t kFormatVersion = 1;

struct FileHeader {
  std::array<char, 8> magic = kMagic;
  std::uint32_t format_version = kFormatVersion;
  std::uint32_t reserved = 0;
};
static_assert(std::is_trivially_copyable_v<FileHeader> && sizeof(FileHeader) == 16);

struct RecordFrame {
  std::uint32_t payload_bytes = 0;
  std::uint32_t reserved = 0;
  std::uint64_t checksum = 0;
};
static_assert(std::is_trivially_copyable_v<RecordFrame> && sizeof(RecordFrame) == 16);

std::uint64_t Checksum(std::string_view payload) {
  return XXH64(payload.data(), payload.size(), 0);
}

// The frame and payload of one record.
std::string Framed(std::string_view payload) {
  const RecordFrame frame{.payload_bytes = static_cast<std::uint32_t>(payload.size()),
                          .checksum = Checksum(payload)};
  std::string bytes(reinterpret_cast<const char*>(&frame), sizeof(frame));
  bytes += payload;
  return bytes;
}

// Writes all of `bytes` at the file's offset, retrying short writes and EINTR; 0 or errno.
int WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (written == 0) return ENOSPC;
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
  return 0;
}

Result<std::string> ReadWhole(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return std::unexpected(ErrnoError("open(O_RDONLY)", path, errno));
  std::string bytes;
  std::array<char, 1 << 16> chunk{};
  while (true) {
    const ssize_t got = ::read(fd.get(), chunk.data(), chunk.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(ErrnoError("read", path, errno));
    }
    if (got == 0) return bytes;
    bytes.append(chunk.data(), static_cast<std::size_t>(got));
  }
}

// fsync of the directory that holds `path`, so that a rename in it is durable.
Status SyncDirectoryOf(const std::string& path) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  const UniqueFd fd(
      ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return std::unexpected(ErrnoError("open(O_DIRECTORY)", directory, errno));
  if (::fsync(fd.get()) != 0) return std::unexpected(ErrnoError("fsync", directory, errno));
  return {};
}

// Writes header and records to a new file `path` and syncs it; the caller removes it on
// failure.
Result<UniqueFd> WriteNewFile(const std::string& path, const std::vector<std::string>& records,
                              std::uint64_t& size) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return std::unexpected(ErrnoError("open(O_CREAT)", path, errno));
  const FileHeader header;
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof(header));
  for (const std::string& record : records) bytes += Framed(record);
  if (const int error = WriteAll(fd.get(), bytes); error != 0) {
    return std::unexpected(ErrnoError("write", path, error));
  }
  if (::fdatasync(fd.get()) != 0) return std::unexpected(ErrnoError("fdatasync", path, errno));
  size = bytes.size();
  return fd;
}

}  // namespace

Result<JournalFile::Contents> JournalFile::Read(const std::string& path) {
  HURRAY_ASSIGN_OR_RETURN(const std::string bytes, ReadWhole(path));
  FileHeader header;
  if (bytes.size() < sizeof(header)) {
    return DataLossError(
        fmt::format("journal {}: {} bytes, shorter than its header", path, bytes.size()));
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.magic != kMagic || header.format_version != kFormatVersion) {
    return DataLossError(fmt::format(
        "journal {}: not a hurray journal of format version {} (magic or version differ)", path,
        kFormatVersion));
  }
  Contents contents;
  std::size_t offset = sizeof(header);
  while (bytes.size() - offset >= sizeof(RecordFrame)) {
    RecordFrame frame;
    std::memcpy(&frame, bytes.data() + offset, sizeof(frame));
    const std::size_t left = bytes.size() - offset - sizeof(frame);
    if (frame.payload_bytes > kMaxPayloadBytes || frame.payload_bytes > left) break;
    const std::string_view payload(bytes.data() + offset + sizeof(frame), frame.payload_bytes);
    if (frame.reserved != 0 || Checksum(payload) != frame.checksum) break;
    contents.records.emplace_back(payload);
    offset += sizeof(frame) + frame.payload_bytes;
  }
  contents.valid_bytes = offset;
  contents.ignored_bytes = bytes.size() - offset;
  return contents;
}

Result<JournalFile> JournalFile::Replace(const std::string& path,
                                         const std::vector<std::string>& records) {
  const std::string new_path = path + ".new";
  std::uint64_t size = 0;
  Result<UniqueFd> fd = WriteNewFile(new_path, records, size);
  if (fd && ::rename(new_path.c_str(), path.c_str()) != 0) {
    fd = std::unexpected(ErrnoError("rename", new_path, errno));
  }
  if (!fd) {
    (void)::unlink(new_path.c_str());
    return std::unexpected(fd.error());
  }
  HURRAY_RETURN_IF_ERROR(SyncDirectoryOf(path));
  // Appends go to the end: the descriptor was opened O_WRONLY and has written the whole file.
  return JournalFile(path, std::move(*fd), size);
}

Status JournalFile::Append(std::string_view payload) {
  if (broken_) {
    return FailedPreconditionError(fmt::format(
        "journal {}: an earlier failed write could not be cut off; it takes no more records",
        path_));
  }
  if (payload.size() > kMaxPayloadBytes) {
    return InvalidArgumentError(fmt::format("journal {}: a record of {} bytes is above {}", path_,
                                            payload.size(), kMaxPayloadBytes));
  }
  if (const int error = WriteAll(fd_.get(), Framed(payload)); error != 0) {
    // Part of the record may be in the file: cut it off, so that the next one follows the
    // last whole record.
    if (::ftruncate(fd_.get(), static_cast<off_t>(size_)) != 0 ||
        ::lseek(fd_.get(), static_cast<off_t>(size_), SEEK_SET) < 0) {
      broken_ = true;
    }
    return std::unexpected(ErrnoError("write", path_, error));
  }
  size_ += sizeof(RecordFrame) + payload.size();
  return {};
}

Status JournalFile::Sync() {
  if (::fdatasync(fd_.get()) != 0) return std::unexpected(ErrnoError("fdatasync", path_, errno));
  return {};
}

}  // namespace hurray::daemon
