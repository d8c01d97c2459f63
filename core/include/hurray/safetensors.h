// safetensors: the header of a .safetensors file, and of a sharded model's
// *.safetensors.index.json, read into what hurray needs to place every tensor in a pool.
//
// A .safetensors file is an 8-byte little-endian header length N, N bytes of JSON (an object
// mapping each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]}, plus an
// optional "__metadata__" object of string values), then the data: each tensor's bytes at
// [8 + N + begin, 8 + N + end), little-endian, row-major.
//
// Parsing trusts nothing: every length, offset and count is checked against the file's size
// and against the others before anything is allocated. Errors are INVALID_ARGUMENT naming the
// tensor and the field ("tensor \"model.w\": data_offsets [0, 96] hold 96 bytes but dtype F32
// x shape [5, 5] needs 100").
//
// Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/element_type.h"
#include "hurray/error.h"
#include "hurray/tensor_descriptor.h"

namespace hurray {

// The largest JSON header accepted, in bytes (as the safetensors reference implementation).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// The deepest nesting of arrays and objects accepted in a header's or an index's JSON (a
// header needs 3: the header, a tensor entry, its shape).
inline constexpr std::size_t kMaxSafetensorsJsonDepth = 64;

// The hurray element type of a safetensors dtype ("F32", "BF16", "F8_E4M3", ...). Every dtype
// safetensors defines either maps or is refused by name: INVALID_ARGUMENT "dtype F6_E2M3 has
// no hurray element type" for a defined one hurray lacks, "unknown dtype X" otherwise.
[[nodiscard]] Result<ElementType> ElementTypeOfSafetensorsDtype(std::string_view dtype);

// One tensor of a safetensors file, ready to allocate.
struct SafetensorsTensor {
  // As in the file (the JSON key), at most kMaxSafetensorsNameBytes.
  std::string name;
  // Dense, row-major, unquantized, one producer-synced CPU buffer of exactly byte_size
  // bytes (alignment 64; alignment 1 when empty), as TensorDescriptor::Dense makes it.
  TensorDescriptor descriptor;
  // Absolute offset in the file of the tensor's first byte, and its length.
  std::uint64_t file_offset = 0;
  std::uint64_t byte_size = 0;
};

inline constexpr std::size_t kMaxSafetensorsNameBytes = 4096;

struct SafetensorsHeader {
  // Bytes before the data: 8 + the JSON's length.
  std::uint64_t data_offset = 0;
  // Every tensor, in order of file_offset (ties: by name). The ranges never overlap (empty
  // tensors aside), lie inside the data, and are checked against the file's size.
  std::vector<SafetensorsTensor> tensors;
  // "__metadata__", when present (string values only, as the format requires).
  std::map<std::string, std::string> metadata;
};

// Parses a header. `prefix` holds the file's first bytes: the 8-byte length and at least
// that many bytes of JSON (more are ignored); `file_size` is the whole file's size.
// INVALID_ARGUMENT naming the tensor and field for: a length past the file or above
// kMaxSafetensorsHeaderBytes, a prefix shorter than the length says, JSON that does not parse,
// nests deeper than kMaxSafetensorsJsonDepth or is not an object, a tensor entry that is not an
// object or lacks/mistypes dtype, shape or data_offsets, an unknown dtype, a dimension product
// that overflows, data_offsets that are reversed, outside the data or overlapping another
// tensor's, a byte length that disagrees with dtype x shape, a non-string metadata value, a
// name longer than kMaxSafetensorsNameBytes. Messages show no value of the file in full: a
// mistyped array or object by its size, a string cut at kMaxSafetensorsNameBytes.
[[nodiscard]] Result<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte> prefix,
                                                               std::uint64_t file_size);

// Reads and parses the header of the file open at `fd` (pread; the descriptor's offset is
// not used). Errors as ParseSafetensorsHeader, prefixed with `path`; an OS error names the
// call (errno text).
[[nodiscard]] Result<SafetensorsHeader> ReadSafetensorsHeader(int fd, std::string_view path);

// A sharded model's index ("model.safetensors.index.json": {"metadata": {...},
// "weight_map": {tensor name: shard file name}}).
struct SafetensorsIndex {
  // Each shard's file name once, in order of first appearance in weight_map's sorted keys.
  // Plain file names relative to the index's directory: one with a '/' or "..", or empty,
  // is refused.
  std::vector<std::string> shards;
  // Tensor name -> shard file name.
  std::map<std::string, std::string> weight_map;
};

// Parses an index's JSON. INVALID_ARGUMENT naming the field for JSON that does not parse or
// nests deeper than kMaxSafetensorsJsonDepth, a missing or mistyped weight_map, a shard name
// that is not a plain file name.
[[nodiscard]] Result<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json);

}  // namespace hurray
