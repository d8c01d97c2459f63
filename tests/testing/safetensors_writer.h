// Writes .safetensors files for tests and the benchmark: valid ones from a list of tensors,
// and deliberately broken ones from a raw header and data.
//
// Pure functions apart from the file writes; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"

namespace hurray::testing {

// One tensor to write. The bytes are written as given: a byte count that disagrees with
// dtype x shape makes a broken file on purpose.
struct SafetensorsTensorSpec {
  std::string name;
  std::string dtype;  // As safetensors spells it: "F32", "BF16", ...
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
};

// The bytes of a .safetensors file holding `tensors`, their data packed in the order given
// (data_offsets follow from the byte counts) and the JSON padded with spaces to a multiple
// of 8 bytes, as the reference writer does. `metadata` becomes "__metadata__" when not empty.
[[nodiscard]] std::string SafetensorsBytes(std::span<const SafetensorsTensorSpec> tensors,
                                           const std::map<std::string, std::string>& metadata = {});

// The bytes of a file with `header_json` as its header, verbatim, then `data`. The length
// field holds `header_length` when given (one that disagrees with the JSON makes a broken
// file), else the JSON's size.
[[nodiscard]] std::string RawSafetensorsBytes(std::string_view header_json, std::string_view data,
                                              std::optional<std::uint64_t> header_length = {});

// Writes SafetensorsBytes(tensors, metadata) to `path`, replacing any file there.
[[nodiscard]] Status WriteSafetensors(const std::filesystem::path& path,
                                      std::span<const SafetensorsTensorSpec> tensors,
                                      const std::map<std::string, std::string>& metadata = {});

// Writes `bytes` to `path`, replacing any file there.
[[nodiscard]] Status WriteFileBytes(const std::filesystem::path& path, std::string_view bytes);

// `count` bytes of a fixed pseudo-random pattern that depends on `seed`, to fill tensors.
[[nodiscard]] std::vector<std::byte> PatternBytes(std::size_t count, std::uint32_t seed);

}  // namespace hurray::testing
