#include "hurray/file_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <unordered_set>
#include <utility>

#include "file_format.h"
#include "hurray/checked_math.h"
#include "hurray/descriptor_codec.h"
#include "hurray/errno_error.h"
#include "hurray/v1/file.pb.h"

namespace hurray {
namespace {

using internal::FileChecksum;
using internal::kFileHeaderBytes;

// Reads exactly `destination.size()` bytes at `offset`.
Status ReadAt(int fd, const std::string& path, std::uint64_t offset,
              std::span<std::byte> destination) {
  const FileRange range{.file_offset = offset, .destination = destination};
  return ReadFileRanges(fd, path, std::span(&range, 1), {.parallelism = 1});
}

struct IndexRead {
  v1::FileIndex message;
  std::uint64_t offset = 0;  // Where the index starts: the end of the data.
};

// The index message of the file, its checksum checked against the header's.
Result<IndexRead> ReadIndex(int fd, const std::string& path, std::uint64_t file_size) {
  if (file_size < kFileHeaderBytes) {
    return InvalidArgumentError(
        fmt::format("{}: the file's {} bytes are fewer than the {}-byte "
                    "header (truncated, or not a .hrry file)",
                    path, file_size, kFileHeaderBytes));
  }
  std::array<std::byte, kFileHeaderBytes> header_bytes{};
  HURRAY_RETURN_IF_ERROR(ReadAt(fd, path, 0, header_bytes));
  auto header = internal::DecodeFileHeader(header_bytes, file_size);
  if (!header) return std::unexpected(header.error().WithContext(path));
  std::string index(static_cast<std::size_t>(header->index_size), '\0');
  HURRAY_RETURN_IF_ERROR(
      ReadAt(fd, path, header->index_offset, std::as_writable_bytes(std::span(index))));
  const std::uint64_t checksum = FileChecksum(std::as_bytes(std::span(index)));
  if (checksum != header->index_checksum) {
    return DataLossError(
        fmt::format("{}: index checksum 0x{:016X} does not match the header's "
                    "index_checksum 0x{:016X}",
                    path, checksum, header->index_checksum));
  }
  IndexRead read{.message = {}, .offset = header->index_offset};
  if (!read.message.ParseFromString(index)) {
    return InvalidArgumentError(
        fmt::format("{}: the {}-byte index is not a hurray.v1.FileIndex", path, index.size()));
  }
  return read;
}

// One buffer's placement: its size as the descriptor's table says, an aligned offset, inside
// the data region [kFileBufferAlignment, data_end).
Status CheckBuffer(const v1::FileBuffer& buffer, std::uint64_t table_byte_size,
                   std::uint64_t data_end) {
  if (buffer.byte_size() != table_byte_size) {
    return InvalidArgumentError(fmt::format("byte_size {} differs from the descriptor's {}",
                                            buffer.byte_size(), table_byte_size));
  }
  if (buffer.byte_size() == 0) {
    if (buffer.offset() != 0) {
      return InvalidArgumentError(
          fmt::format("offset {} of an empty buffer is not 0", buffer.offset()));
    }
    if (buffer.xxh3_64() != FileChecksum({})) {
      return DataLossError(fmt::format("xxh3_64 0x{:016X} of an empty buffer is not 0x{:016X}",
                                       buffer.xxh3_64(), FileChecksum({})));
    }
    return {};
  }
  if (buffer.offset() == 0 || buffer.offset() % kFileBufferAlignment != 0) {
    return InvalidArgumentError(fmt::format("offset {} is not a non-zero multiple of {}",
                                            buffer.offset(), kFileBufferAlignment));
  }
  auto end = internal::CheckedAdd(buffer.offset(), buffer.byte_size());
  if (!end || *end > data_end) {
    return InvalidArgumentError(fmt::format(
        "offset {} + byte_size {} runs past the data, which ends at the index (byte {})",
        buffer.offset(), buffer.byte_size(), data_end));
  }
  return {};
}

Result<FileTensorEntry> TensorFromProto(const v1::FileTensor& message, std::uint64_t data_end) {
  HURRAY_RETURN_IF_ERROR(internal::CheckFileTensorName(message.name()));
  if (!message.has_tensor_descriptor()) return InvalidArgumentError("descriptor is missing");
  auto descriptor = DescriptorFromProto(message.tensor_descriptor());
  if (!descriptor) return std::unexpected(descriptor.error().WithContext("descriptor"));
  const auto& table = descriptor->buffers();
  if (static_cast<std::size_t>(message.buffers_size()) != table.size()) {
    return InvalidArgumentError(
        fmt::format("{} buffers saved, but the descriptor's buffer table has {}",
                    message.buffers_size(), table.size()));
  }
  std::vector<FileBufferEntry> buffers;
  buffers.reserve(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const v1::FileBuffer& buffer = message.buffers(static_cast<int>(i));
    auto status = CheckBuffer(buffer, table[i].byte_size(), data_end);
    if (!status) return std::unexpected(status.error().WithContext(fmt::format("buffers[{}]", i)));
    buffers.push_back({.file_offset = buffer.offset(),
                       .byte_size = buffer.byte_size(),
                       .checksum = buffer.xxh3_64()});
  }
  return FileTensorEntry{
      .name = message.name(), .descriptor = *std::move(descriptor), .buffers = std::move(buffers)};
}

std::string TensorContext(const std::string& path, std::size_t index, std::string_view name) {
  return fmt::format("{}: tensors[{}] ({})", path, index, name);
}

// No two non-empty buffers share a byte.
Status CheckNoOverlap(const std::string& path, std::span<const FileTensorEntry> tensors) {
  struct Placed {
    std::uint64_t offset;
    std::uint64_t end;
    std::size_t tensor;
    std::size_t buffer;
  };
  std::vector<Placed> placed;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    for (std::size_t b = 0; b < tensors[t].buffers.size(); ++b) {
      const FileBufferEntry& buffer = tensors[t].buffers[b];
      if (buffer.byte_size == 0) continue;
      placed.push_back({buffer.file_offset, buffer.file_offset + buffer.byte_size, t, b});
    }
  }
  std::ranges::sort(placed, {}, &Placed::offset);
  for (std::size_t i = 1; i < placed.size(); ++i) {
    const Placed& before = placed[i - 1];
    const Placed& after = placed[i];
    if (after.offset < before.end) {
      return InvalidArgumentError(fmt::format(
          "{}: buffers[{}] (offset {}) overlaps tensors[{}] ({}) buffers[{}] (bytes {}-{})",
          TensorContext(path, after.tensor, tensors[after.tensor].name), after.buffer, after.offset,
          before.tensor, tensors[before.tensor].name, before.buffer, before.offset, before.end));
    }
  }
  return {};
}

Result<std::vector<FileTensorEntry>> TensorsFromIndex(const std::string& path,
                                                      const v1::FileIndex& index,
                                                      std::uint64_t data_end) {
  std::vector<FileTensorEntry> tensors;
  tensors.reserve(static_cast<std::size_t>(index.tensors_size()));
  std::unordered_set<std::string_view> names;
  for (int i = 0; i < index.tensors_size(); ++i) {
    const v1::FileTensor& message = index.tensors(i);
    const auto position = static_cast<std::size_t>(i);
    auto entry = TensorFromProto(message, data_end);
    if (!entry) {
      return std::unexpected(
          entry.error().WithContext(TensorContext(path, position, message.name())));
    }
    if (!names.insert(message.name()).second) {
      return InvalidArgumentError(fmt::format("{}: name is already used by an earlier tensor",
                                              TensorContext(path, position, message.name())));
    }
    tensors.push_back(*std::move(entry));
  }
  HURRAY_RETURN_IF_ERROR(CheckNoOverlap(path, tensors));
  return tensors;
}

}  // namespace

FileReader::FileReader(std::string path, int fd, std::uint64_t file_size,
                       std::vector<FileTensorEntry> tensors)
    : path_(std::move(path)), fd_(fd), file_size_(file_size), tensors_(std::move(tensors)) {}

FileReader::FileReader(FileReader&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      file_size_(other.file_size_),
      tensors_(std::move(other.tensors_)) {}

FileReader& FileReader::operator=(FileReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    file_size_ = other.file_size_;
    tensors_ = std::move(other.tensors_);
  }
  return *this;
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

Result<FileReader> FileReader::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoFailure("open", path, errno);
  FileReader reader(path, fd, 0, {});  // Owns the descriptor from here on.
  struct stat status{};
  if (::fstat(fd, &status) != 0) return ErrnoFailure("fstat", path, errno);
  if (!S_ISREG(status.st_mode)) {
    return InvalidArgumentError(fmt::format("{}: not a regular file", path));
  }
  reader.file_size_ = static_cast<std::uint64_t>(status.st_size);
  HURRAY_ASSIGN_OR_RETURN(const IndexRead index, ReadIndex(fd, path, reader.file_size_));
  HURRAY_ASSIGN_OR_RETURN(reader.tensors_, TensorsFromIndex(path, index.message, index.offset));
  return reader;
}

Status FileReader::ReadBuffers(std::span<const BufferDestination> buffers,
                               const FileReadOptions& options) const {
  std::vector<FileRange> ranges;
  ranges.reserve(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const BufferDestination& wanted = buffers[i];
    if (wanted.tensor >= tensors_.size()) {
      return OutOfRangeError(fmt::format("buffers[{}]: tensor {} is past the file's {} tensors", i,
                                         wanted.tensor, tensors_.size()));
    }
    const FileTensorEntry& tensor = tensors_[wanted.tensor];
    if (wanted.buffer >= tensor.buffers.size()) {
      return OutOfRangeError(
          fmt::format("buffers[{}]: buffer {} is past tensor {} ({})'s {} buffers", i,
                      wanted.buffer, wanted.tensor, tensor.name, tensor.buffers.size()));
    }
    const FileBufferEntry& entry = tensor.buffers[wanted.buffer];
    if (wanted.destination.size() != entry.byte_size) {
      return InvalidArgumentError(fmt::format(
          "buffers[{}]: destination of {} bytes for tensor {} ({}) buffer {} of {} bytes", i,
          wanted.destination.size(), wanted.tensor, tensor.name, wanted.buffer, entry.byte_size));
    }
    if (entry.byte_size != 0) ranges.push_back({entry.file_offset, wanted.destination});
  }
  HURRAY_RETURN_IF_ERROR(ReadFileRanges(fd_, path_, ranges, options));
  for (const BufferDestination& wanted : buffers) {
    const FileTensorEntry& tensor = tensors_[wanted.tensor];
    const FileBufferEntry& entry = tensor.buffers[wanted.buffer];
    const std::uint64_t checksum = FileChecksum(wanted.destination);
    if (checksum != entry.checksum) {
      return DataLossError(
          fmt::format("{}: buffers[{}]: checksum 0x{:016X} of the bytes read does not match the "
                      "index's xxh3_64 0x{:016X}",
                      TensorContext(path_, wanted.tensor, tensor.name), wanted.buffer, checksum,
                      entry.checksum));
    }
  }
  return {};
}

}  // namespace hurray
