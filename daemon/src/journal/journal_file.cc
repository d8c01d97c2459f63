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
#include <optional>
#include <string_view>
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

// The payload of the record at `offset`, when a whole one (frame and payload, checksum
// matching) is there.
std::optional<std::string_view> WholeRecordAt(std::string_view bytes, std::size_t offset) {
  RecordFrame frame;
  if (bytes.size() - offset < sizeof(frame)) return std::nullopt;
  std::memcpy(&frame, bytes.data() + offset, sizeof(frame));
  const std::size_t left = bytes.size() - offset - sizeof(frame);
  if (frame.reserved != 0 || frame.payload_bytes > JournalFile::kMaxPayloadBytes ||
      frame.payload_bytes > left) {
    return std::nullopt;
  }
  const std::string_view payload = bytes.substr(offset + sizeof(frame), frame.payload_bytes);
  if (Checksum(payload) != frame.checksum) return std::nullopt;
  return payload;
}

// Why the record at `offset` is not whole, for messages.
std::string WhatIsWrongAt(std::string_view bytes, std::size_t offset) {
  RecordFrame frame;
  if (bytes.size() - offset < sizeof(frame)) {
    return fmt::format("its frame has {} of its 16 bytes", bytes.size() - offset);
  }
  std::memcpy(&frame, bytes.data() + offset, sizeof(frame));
  if (frame.reserved != 0) return fmt::format("reserved field {:#x}, not 0", frame.reserved);
  if (frame.payload_bytes > JournalFile::kMaxPayloadBytes) {
    return fmt::format("length {} above the maximum {}", frame.payload_bytes,
                       JournalFile::kMaxPayloadBytes);
  }
  const std::size_t left = bytes.size() - offset - sizeof(frame);
  if (frame.payload_bytes > left) {
    return fmt::format("length {}, with {} bytes left in the file", frame.payload_bytes, left);
  }
  return "checksum mismatch";
}

// The offset of a whole record after the one at `damaged`, which is not whole: where its
// length says the next starts if a whole record is there, else the first offset after
// `damaged` where one is (the length may be what was damaged). nullopt when there is none:
// the damaged record is a torn last write.
std::optional<std::size_t> NextWholeRecord(std::string_view bytes, std::size_t damaged) {
  RecordFrame frame;
  if (bytes.size() - damaged >= sizeof(frame)) {
    std::memcpy(&frame, bytes.data() + damaged, sizeof(frame));
    const std::uint64_t next = std::uint64_t{damaged} + sizeof(frame) + frame.payload_bytes;
    if (next < bytes.size() && WholeRecordAt(bytes, next)) return next;
  }
  for (std::size_t offset = damaged + 1; bytes.size() - offset >= sizeof(frame); ++offset) {
    if (WholeRecordAt(bytes, offset)) return offset;
  }
  return std::nullopt;
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
  if (!fd) return ErrnoFailure("open(O_RDONLY)", path, errno);
  std::string bytes;
  std::array<char, 1 << 16> chunk{};
  while (true) {
    const ssize_t got = ::read(fd.get(), chunk.data(), chunk.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoFailure("read", path, errno);
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
  if (!fd) return ErrnoFailure("open(O_DIRECTORY)", directory, errno);
  if (::fsync(fd.get()) != 0) return ErrnoFailure("fsync", directory, errno);
  return {};
}

// Writes header and records to a new file `path` and syncs it; the caller removes it on
// failure.
Result<UniqueFd> WriteNewFile(const std::string& path, const std::vector<std::string>& records,
                              std::uint64_t& size) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return ErrnoFailure("open(O_CREAT)", path, errno);
  const FileHeader header;
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof(header));
  for (const std::string& record : records) bytes += Framed(record);
  if (const int error = WriteAll(fd.get(), bytes); error != 0) {
    return ErrnoFailure("write", path, error);
  }
  if (::fdatasync(fd.get()) != 0) return ErrnoFailure("fdatasync", path, errno);
  size = bytes.size();
  return fd;
}

}  // namespace

Result<JournalFile::Contents> JournalFile::Read(const std::string& path, Damage damage) {
  HURRAY_ASSIGN_OR_RETURN(const std::string bytes, ReadWhole(path));
  return Parse(bytes, path, damage);
}

Result<JournalFile::Contents> JournalFile::Parse(std::string_view bytes, std::string_view path,
                                                 Damage damage) {
  Contents contents;
  FileHeader header;
  if (bytes.size() < sizeof(header)) {
    if (damage == Damage::kSkip) return Contents{.ignored_bytes = bytes.size()};
    return DataLossError(
        fmt::format("journal {}: {} bytes, shorter than its header", path, bytes.size()));
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.magic == kMagic && header.format_version == kFormatVersion) {
    contents.valid_bytes = sizeof(header);
  } else if (damage == Damage::kRefuse) {
    return DataLossError(fmt::format(
        "journal {}: not a hurray journal of format version {} (magic or version differ)", path,
        kFormatVersion));
  }
  std::size_t offset = sizeof(header);
  while (offset < bytes.size()) {
    if (const std::optional<std::string_view> payload = WholeRecordAt(bytes, offset)) {
      contents.records.emplace_back(*payload);
      offset += sizeof(RecordFrame) + payload->size();
      contents.valid_bytes += sizeof(RecordFrame) + payload->size();
      continue;
    }
    const std::optional<std::size_t> next = NextWholeRecord(bytes, offset);
    if (!next) break;  // A torn last write.
    if (damage == Damage::kRefuse) {
      return DataLossError(fmt::format(
          "journal {}: record {} (counted from 0) at offset {} is damaged ({}), and a whole "
          "record follows it at offset {}, so the damage is not a torn last write",
          path, contents.records.size(), offset, WhatIsWrongAt(bytes, offset), *next));
    }
    offset = *next;
  }
  contents.ignored_bytes = bytes.size() - contents.valid_bytes;
  return contents;
}

Result<JournalFile> JournalFile::Replace(const std::string& path,
                                         const std::vector<std::string>& records) {
  const std::string new_path = path + ".new";
  std::uint64_t size = 0;
  Result<UniqueFd> fd = WriteNewFile(new_path, records, size);
  if (fd && ::rename(new_path.c_str(), path.c_str()) != 0) {
    fd = ErrnoFailure("rename", new_path, errno);
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
    return ErrnoFailure("write", path_, error);
  }
  size_ += sizeof(RecordFrame) + payload.size();
  return {};
}

Status JournalFile::Sync() {
  if (::fdatasync(fd_.get()) != 0) return ErrnoFailure("fdatasync", path_, errno);
  return {};
}

}  // namespace hurray::daemon
