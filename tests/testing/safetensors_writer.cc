#include "testing/safetensors_writer.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace hurray::testing {
namespace {

constexpr std::size_t kHeaderAlignment = 8;

std::string LengthField(std::uint64_t length) {
  std::string field(8, '\0');
  for (std::size_t i = 0; i < field.size(); ++i) {
    field[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  }
  return field;
}

}  // namespace

std::string SafetensorsBytes(std::span<const SafetensorsTensorSpec> tensors,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  for (const SafetensorsTensorSpec& tensor : tensors) {
    const std::uint64_t begin = data.size();
    data.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {begin, std::uint64_t{data.size()}}}};
  }
  std::string json = header.dump();
  json.append((kHeaderAlignment - json.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  return RawSafetensorsBytes(json, data);
}

std::string RawSafetensorsBytes(std::string_view header_json, std::string_view data,
                                std::optional<std::uint64_t> header_length) {
  std::string bytes = LengthField(header_length.value_or(header_json.size()));
  bytes.append(header_json);
  bytes.append(data);
  return bytes;
}

Status WriteSafetensors(const std::filesystem::path& path,
                        std::span<const SafetensorsTensorSpec> tensors,
                        const std::map<std::string, std::string>& metadata) {
  return WriteFileBytes(path, SafetensorsBytes(tensors, metadata));
}

Status WriteFileBytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return InternalError(fmt::format("writing {}: failed", path.string()));
  return {};
}

std::vector<std::byte> PatternBytes(std::size_t count, std::uint32_t seed) {
  std::vector<std::byte> bytes(count);
  std::uint32_t state = seed * 2654435761U + 1;
  for (std::byte& byte : bytes) {
    state = state * 1664525U + 1013904223U;  // Numerical Recipes' LCG.
    byte = static_cast<std::byte>(state >> 24);
  }
  return bytes;
}

}  // namespace hurray::testing
