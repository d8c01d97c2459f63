// NumPy .npy files: parse a file's header and write one, mapping NumPy dtypes to hurray
// element types. Pure functions over bytes (no I/O), so a caller reads a file's data
// straight into a tensor buffer and writes a buffer straight out. Thread-safe.
//
// The format (numpy.lib.format): the magic "\x93NUMPY", a major and a minor version byte, the
// header length (little-endian uint16 in version 1.0, uint32 in 2.0 and 3.0), then the
// header: a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded
// with spaces and ended by '\n'. The array's bytes follow in C order, and nothing after them.
//
// Supported dtypes: |b1 bool; |i1 <i2 <i4 <i8; |u1 <u2 <u4 <u8; <f2 <f4 <f8; <c8 <c16.
// One-byte types take any byte-order mark (<, >, |, =), since order does not matter for
// them. Big-endian ('>') and unfixed-order ('=', '|') multi-byte types, object, string,
// datetime and structured dtypes, and fortran_order True are refused.
//
// Reading a file: NpyHeaderEnd on its first kNpyPreambleBytes says how many bytes the header
// takes; ParseNpyHeader on that many says what it holds; then header.data_bytes are read from
// header.data_offset straight into the tensor's buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hurray/element_type.h"
#include "hurray/error.h"

namespace hurray {

// Bytes before the header dict: magic (6), version (2) and a version 2.0 length field (4).
// NpyHeaderEnd never needs more than this.
inline constexpr std::uint64_t kNpyPreambleBytes = 12;

// Longest header (dict and padding) accepted, in bytes.
inline constexpr std::uint64_t kMaxNpyHeaderBytes = 1 << 20;

// What a .npy header says, checked against the file's size.
struct NpyHeader {
  ElementType element_type = ElementType::kFloat32;
  // Dimensions, outermost first; empty for a scalar (0-d array).
  std::vector<std::uint64_t> shape;
  // Offset of the first data byte from the start of the file.
  std::uint64_t data_offset = 0;
  // Number of data bytes: product(shape) * element width, equal to file_size - data_offset.
  std::uint64_t data_bytes = 0;

  friend bool operator==(const NpyHeader&, const NpyHeader&) = default;
};

// Where the header of a .npy file of `file_size` bytes ends (the offset of its first data
// byte), from the file's first bytes `file_prefix`; min(file_size, kNpyPreambleBytes) bytes
// suffice. Checks the magic, the version and that the header lies within the file.
// INVALID_ARGUMENT naming what was wrong.
[[nodiscard]] Result<std::uint64_t> NpyHeaderEnd(std::span<const std::uint8_t> file_prefix,
                                                 std::uint64_t file_size);

// Parses the header of a .npy file of `file_size` bytes whose first bytes are `file_prefix`:
// at least up to the end of the header (NpyHeaderEnd); bytes beyond it are ignored. Never
// reads outside `file_prefix`. Reads format versions 1.0, 2.0 and 3.0.
//
// INVALID_ARGUMENT, naming what was wrong, for: everything NpyHeaderEnd refuses; a header
// that ends beyond the bytes given or is longer than kMaxNpyHeaderBytes; a header that is
// not a dict literal with exactly the keys descr, fortran_order and shape (any order, any
// whitespace, trailing commas allowed); an unsupported, big-endian or unfixed-order dtype;
// fortran_order True; a shape that is not a tuple of non-negative integers; an entry, the
// element count or the byte size overflowing 64 bits; and a data size that differs from
// what the file holds after the header.
[[nodiscard]] Result<NpyHeader> ParseNpyHeader(std::span<const std::uint8_t> file_prefix,
                                               std::uint64_t file_size);

// The NumPy dtype string of a type, as written in a header ("<f4", "|b1"). INVALID_ARGUMENT
// naming the type for types NumPy has no dtype for: bfloat16, the float8 types, the 4-bit
// types and float8_e8m0.
[[nodiscard]] Result<std::string> NpyDtype(ElementType element_type);

// The complete header (magic, version, length, dict, padding) of a C-order array of
// `element_type` and `shape`, as NumPy writes it: version 1.0, or 2.0 when the header does
// not fit a 1.0 length field, padded with spaces and a final '\n' so that the data starts at
// a multiple of 64 bytes. INVALID_ARGUMENT when the type has no NumPy dtype (see NpyDtype).
[[nodiscard]] Result<std::string> NpyHeaderFor(ElementType element_type,
                                               std::span<const std::uint64_t> shape);

}  // namespace hurray
