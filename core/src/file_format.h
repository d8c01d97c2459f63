// The fixed parts of the .hrry format (docs/file-format.md) that FileReader and FileWriter
// share: the 64-byte header and the buffer checksum. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hurray/error.h"

namespace hurray::internal {

inline constexpr std::size_t kFileHeaderBytes = 64;
// "HRRY\r\n\x1a\n": a text-mode transfer or a truncation at a ^Z breaks it, as PNG's does.
inline constexpr std::array<std::uint8_t, 8> kFileMagic = {'H',  'R',  'R',  'Y',
                                                           '\r', '\n', 0x1A, '\n'};
inline constexpr std::uint32_t kFileFormatVersion = 1;
// The largest index a reader accepts, in bytes.
inline constexpr std::uint64_t kMaxFileIndexBytes = std::uint64_t{256} << 20;
// The longest tensor name, in bytes.
inline constexpr std::size_t kMaxFileTensorNameBytes = 4096;

// The header's fields (the magic and the reserved bytes are implied: Encode writes them,
// Decode checks them).
struct FileHeader {
  std::uint32_t version = kFileFormatVersion;
  std::uint32_t flags = 0;  // No flag is defined in version 1: must be 0.
  std::uint64_t index_offset = 0;
  std::uint64_t index_size = 0;
  std::uint64_t index_checksum = 0;  // XXH3-64 of the index bytes.

  friend bool operator==(const FileHeader&, const FileHeader&) = default;
};

// The 64 little-endian bytes of `header`.
[[nodiscard]] std::array<std::byte, kFileHeaderBytes> EncodeFileHeader(const FileHeader& header);

// Decodes and checks a header read from a file of `file_size` bytes: magic, version, flags,
// zero reserved bytes, and an index that starts at or after the header and ends exactly at
// the end of the file, no larger than kMaxFileIndexBytes. INVALID_ARGUMENT naming the field.
[[nodiscard]] Result<FileHeader> DecodeFileHeader(
    std::span<const std::byte, kFileHeaderBytes> bytes, std::uint64_t file_size);

// A tensor name's rules: 1 to kMaxFileTensorNameBytes bytes, no NUL byte. INVALID_ARGUMENT
// saying which rule.
[[nodiscard]] Status CheckFileTensorName(std::string_view name);

// XXH3-64 (seed 0) of `bytes`: the checksum of every buffer and of the index.
[[nodiscard]] std::uint64_t FileChecksum(std::span<const std::byte> bytes);

}  // namespace hurray::internal
