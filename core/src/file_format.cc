#include "file_format.h"

#include <fmt/format.h>

#include <algorithm>

// Header-only: the functions are compiled in here, so no library links libxxhash.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace hurray::internal {
namespace {

// Byte offsets of the header's fields (docs/file-format.md).
constexpr std::size_t kVersionOffset = 8;
constexpr std::size_t kFlagsOffset = 12;
constexpr std::size_t kIndexOffsetOffset = 16;
constexpr std::size_t kIndexSizeOffset = 24;
constexpr std::size_t kIndexChecksumOffset = 32;
constexpr std::size_t kReservedOffset = 40;

template <typename T>
void StoreLittleEndian(std::span<std::byte, kFileHeaderBytes> bytes, std::size_t offset, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    bytes[offset + i] = static_cast<std::byte>((value >> (8 * i)) & 0xFF);
  }
}

template <typename T>
T LoadLittleEndian(std::span<const std::byte, kFileHeaderBytes> bytes, std::size_t offset) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<T>(bytes[offset + i]) << (8 * i));
  }
  return value;
}

}  // namespace

std::array<std::byte, kFileHeaderBytes> EncodeFileHeader(const FileHeader& header) {
  std::array<std::byte, kFileHeaderBytes> bytes{};
  std::ranges::transform(kFileMagic, bytes.begin(),
                         [](std::uint8_t byte) { return static_cast<std::byte>(byte); });
  StoreLittleEndian(bytes, kVersionOffset, header.version);
  StoreLittleEndian(bytes, kFlagsOffset, header.flags);
  StoreLittleEndian(bytes, kIndexOffsetOffset, header.index_offset);
  StoreLittleEndian(bytes, kIndexSizeOffset, header.index_size);
  StoreLittleEndian(bytes, kIndexChecksumOffset, header.index_checksum);
  return bytes;
}

Result<FileHeader> DecodeFileHeader(std::span<const std::byte, kFileHeaderBytes> bytes,
                                    std::uint64_t file_size) {
  if (!std::ranges::equal(bytes.first<kFileMagic.size()>(), kFileMagic, {},
                          [](std::byte byte) { return static_cast<std::uint8_t>(byte); })) {
    return InvalidArgumentError(R"(header: magic is not "HRRY\r\n\x1a\n" (not a .hrry file))");
  }
  FileHeader header{.version = LoadLittleEndian<std::uint32_t>(bytes, kVersionOffset),
                    .flags = LoadLittleEndian<std::uint32_t>(bytes, kFlagsOffset),
                    .index_offset = LoadLittleEndian<std::uint64_t>(bytes, kIndexOffsetOffset),
                    .index_size = LoadLittleEndian<std::uint64_t>(bytes, kIndexSizeOffset),
                    .index_checksum = LoadLittleEndian<std::uint64_t>(bytes, kIndexChecksumOffset)};
  if (header.version != kFileFormatVersion) {
    return InvalidArgumentError(fmt::format("header: format version {} is not supported (only {})",
                                            header.version, kFileFormatVersion));
  }
  if (header.flags != 0) {
    return InvalidArgumentError(fmt::format("header: flags 0x{:08X} has bits no version {} defines",
                                            header.flags, kFileFormatVersion));
  }
  if (std::ranges::any_of(bytes.subspan(kReservedOffset),
                          [](std::byte byte) { return byte != std::byte{0}; })) {
    return InvalidArgumentError("header: reserved bytes 40-63 are not zero");
  }
  if (header.index_size > kMaxFileIndexBytes) {
    return InvalidArgumentError(fmt::format("header: index_size {} is above the limit {}",
                                            header.index_size, kMaxFileIndexBytes));
  }
  if (header.index_offset < kFileHeaderBytes || header.index_offset > file_size ||
      file_size - header.index_offset != header.index_size) {
    return InvalidArgumentError(
        fmt::format("header: index_offset {} + index_size {} does not end at the end of the "
                    "{}-byte file",
                    header.index_offset, header.index_size, file_size));
  }
  return header;
}

Status CheckFileTensorName(std::string_view name) {
  if (name.empty()) return InvalidArgumentError("name is empty");
  if (name.size() > kMaxFileTensorNameBytes) {
    return InvalidArgumentError(
        fmt::format("name of {} bytes is longer than {}", name.size(), kMaxFileTensorNameBytes));
  }
  if (name.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("name holds a NUL byte");
  }
  return {};
}

std::uint64_t FileChecksum(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

}  // namespace hurray::internal
