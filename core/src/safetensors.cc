#include "hurray/safetensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "hurray/errno_error.h"
#include "hurray/file_reads.h"

namespace hurray {
namespace {

using Json = nlohmann::json;

constexpr std::uint64_t kLengthBytes = 8;

// Every dtype of the safetensors format, and its hurray element type where there is one.
struct DtypeEntry {
  std::string_view dtype;
  std::optional<ElementType> type;
};

constexpr std::array<DtypeEntry, 20> kDtypes{{
    {"BOOL", ElementType::kBool},
    {"U8", ElementType::kUint8},
    {"I8", ElementType::kInt8},
    {"I16", ElementType::kInt16},
    {"U16", ElementType::kUint16},
    {"F16", ElementType::kFloat16},
    {"BF16", ElementType::kBfloat16},
    {"I32", ElementType::kInt32},
    {"U32", ElementType::kUint32},
    {"F32", ElementType::kFloat32},
    {"F64", ElementType::kFloat64},
    {"I64", ElementType::kInt64},
    {"U64", ElementType::kUint64},
    {"C64", ElementType::kComplex64},
    {"F8_E5M2", ElementType::kFloat8E5m2},
    {"F8_E4M3", ElementType::kFloat8E4m3fn},
    {"F8_E8M0", ElementType::kFloat8E8m0},
    {"F4", std::nullopt},
    {"F6_E2M3", std::nullopt},
    {"F6_E3M2", std::nullopt},
}};

// A JSON string for messages: names come from the file and may hold anything, of any
// length; at most kMaxSafetensorsNameBytes of it are shown.
std::string Quoted(std::string_view text) {
  const bool cut = text.size() > kMaxSafetensorsNameBytes;
  return Json(std::string(text.substr(0, kMaxSafetensorsNameBytes)))
             .dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace) +
         (cut ? "..." : "");
}

// A value of the file for messages, never its dump: dump() recurses without bound into a
// nested value, and a file can nest 100 MB deep. A scalar as written (a string quoted and cut),
// an array or object by its size.
std::string Shown(const Json& value) {
  if (value.is_string()) return Quoted(value.get_ref<const std::string&>());
  if (value.is_array()) return fmt::format("an array of size {}", value.size());
  if (value.is_object()) return fmt::format("an object of size {}", value.size());
  return value.dump();  // A number, a boolean or null: a few characters.
}

std::string TensorContext(std::string_view name) { return "tensor " + Quoted(name); }

// A field that must hold a non-negative integer: the value, or an error naming `field`.
Result<std::uint64_t> UnsignedField(const Json& value, std::string_view field) {
  if (!value.is_number_unsigned()) {
    return InvalidArgumentError(
        fmt::format("{} is {}, not a non-negative integer", field, Shown(value)));
  }
  return value.get<std::uint64_t>();
}

const Json* Member(const Json& object, std::string_view key) {
  const auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

Result<ElementType> ParseDtype(const Json& entry) {
  const Json* dtype = Member(entry, "dtype");
  if (dtype == nullptr) return InvalidArgumentError("dtype is missing");
  if (!dtype->is_string()) {
    return InvalidArgumentError(fmt::format("dtype is {}, not a string", Shown(*dtype)));
  }
  return ElementTypeOfSafetensorsDtype(dtype->get_ref<const std::string&>());
}

Result<std::vector<std::uint64_t>> ParseShape(const Json& entry) {
  const Json* shape = Member(entry, "shape");
  if (shape == nullptr) return InvalidArgumentError("shape is missing");
  if (!shape->is_array()) {
    return InvalidArgumentError(fmt::format("shape is {}, not an array", Shown(*shape)));
  }
  if (shape->size() > kMaxRank) {
    return InvalidArgumentError(
        fmt::format("shape has {} dimensions, above the maximum {}", shape->size(), kMaxRank));
  }
  std::vector<std::uint64_t> dimensions;
  for (std::size_t i = 0; i < shape->size(); ++i) {
    HURRAY_ASSIGN_OR_RETURN(std::uint64_t dimension,
                            UnsignedField((*shape)[i], fmt::format("shape[{}]", i)));
    dimensions.push_back(dimension);
  }
  return dimensions;
}

Result<std::pair<std::uint64_t, std::uint64_t>> ParseDataOffsets(const Json& entry) {
  const Json* offsets = Member(entry, "data_offsets");
  if (offsets == nullptr) return InvalidArgumentError("data_offsets is missing");
  if (!offsets->is_array() || offsets->size() != 2) {
    return InvalidArgumentError(
        fmt::format("data_offsets is {}, not an array [begin, end]", Shown(*offsets)));
  }
  HURRAY_ASSIGN_OR_RETURN(std::uint64_t begin, UnsignedField((*offsets)[0], "data_offsets[0]"));
  HURRAY_ASSIGN_OR_RETURN(std::uint64_t end, UnsignedField((*offsets)[1], "data_offsets[1]"));
  return std::pair(begin, end);
}

// The byte size that dtype x shape needs.
Result<std::uint64_t> NeededBytes(ElementType type, std::span<const std::uint64_t> shape) {
  std::uint64_t count = 1;
  for (std::uint64_t dimension : shape) {
    if (dimension != 0 && count > UINT64_MAX / dimension) {
      return InvalidArgumentError(
          fmt::format("shape [{}] has 2^64 elements or more", fmt::join(shape, ", ")));
    }
    count *= dimension;
  }
  const std::optional<std::uint64_t> bytes = ByteSizeOf(type, count);
  if (!bytes) {
    return InvalidArgumentError(
        fmt::format("shape [{}] needs 2^64 bytes or more", fmt::join(shape, ", ")));
  }
  return *bytes;
}

// One tensor entry, checked on its own against the data's size.
Result<SafetensorsTensor> ParseTensor(const std::string& name, const Json& entry,
                                      std::uint64_t data_offset, std::uint64_t data_bytes) {
  if (!entry.is_object()) {
    return InvalidArgumentError(fmt::format("entry is {}, not an object", entry.type_name()));
  }
  HURRAY_ASSIGN_OR_RETURN(ElementType type, ParseDtype(entry));
  HURRAY_ASSIGN_OR_RETURN(std::vector<std::uint64_t> shape, ParseShape(entry));
  HURRAY_ASSIGN_OR_RETURN(auto offsets, ParseDataOffsets(entry));
  const auto [begin, end] = offsets;
  if (begin > end) {
    return InvalidArgumentError(fmt::format("data_offsets [{}, {}] are reversed", begin, end));
  }
  if (end > data_bytes) {
    return InvalidArgumentError(fmt::format(
        "data_offsets [{}, {}] lie outside the data of {} bytes", begin, end, data_bytes));
  }
  HURRAY_ASSIGN_OR_RETURN(std::uint64_t needed, NeededBytes(type, shape));
  if (end - begin != needed) {
    const auto dtype = std::ranges::find(kDtypes, std::optional(type), &DtypeEntry::type)->dtype;
    return InvalidArgumentError(
        fmt::format("data_offsets [{}, {}] hold {} bytes but dtype {} x shape [{}] needs {}", begin,
                    end, end - begin, dtype, fmt::join(shape, ", "), needed));
  }
  HURRAY_ASSIGN_OR_RETURN(TensorDescriptor descriptor, TensorDescriptor::Dense(type, shape));
  return SafetensorsTensor{.name = name,
                           .descriptor = std::move(descriptor),
                           .file_offset = data_offset + begin,
                           .byte_size = needed};
}

Result<std::map<std::string, std::string>> ParseMetadata(const Json& metadata) {
  if (!metadata.is_object()) {
    return InvalidArgumentError(
        fmt::format("__metadata__ is {}, not an object", metadata.type_name()));
  }
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      return InvalidArgumentError(fmt::format("__metadata__ {}: value is {}, not a string",
                                              Quoted(key), value.type_name()));
    }
    values.emplace(key, value.get<std::string>());
  }
  return values;
}

// Sorts by file offset (then name) and refuses two non-empty tensors sharing a byte.
Status SortAndCheckOverlaps(std::vector<SafetensorsTensor>& tensors, std::uint64_t data_offset) {
  std::ranges::sort(tensors, {}, [](const SafetensorsTensor& tensor) {
    return std::tie(tensor.file_offset, tensor.name);
  });
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& tensor : tensors) {
    if (tensor.byte_size == 0) continue;
    if (previous != nullptr && tensor.file_offset < previous->file_offset + previous->byte_size) {
      const std::uint64_t begin = tensor.file_offset - data_offset;
      const std::uint64_t previous_begin = previous->file_offset - data_offset;
      return InvalidArgumentError(fmt::format(
          "{}: data_offsets [{}, {}] overlap those of {}, [{}, {}]", TensorContext(tensor.name),
          begin, begin + tensor.byte_size, TensorContext(previous->name), previous_begin,
          previous_begin + previous->byte_size));
    }
    previous = &tensor;
  }
  return {};
}

// The header length, checked against the limits and the file's size.
Result<std::uint64_t> HeaderLength(std::span<const std::byte> prefix, std::uint64_t file_size) {
  if (file_size < kLengthBytes) {
    return InvalidArgumentError(fmt::format(
        "header length: the file of {} bytes is shorter than the 8-byte length", file_size));
  }
  if (prefix.size() < kLengthBytes) {
    return InvalidArgumentError(
        fmt::format("header length: {} bytes given, fewer than its 8", prefix.size()));
  }
  std::uint64_t length = 0;
  for (std::size_t i = 0; i < kLengthBytes; ++i) {
    length |= std::to_integer<std::uint64_t>(prefix[i]) << (8 * i);
  }
  if (length > kMaxSafetensorsHeaderBytes) {
    return InvalidArgumentError(fmt::format("header length {} is above the maximum {}", length,
                                            kMaxSafetensorsHeaderBytes));
  }
  if (length > file_size - kLengthBytes) {
    return InvalidArgumentError(fmt::format(
        "header length {} runs past the end of the file of {} bytes", length, file_size));
  }
  return length;
}

// Every JSON this file reads comes from a file: a header or an index. Nesting beyond
// kMaxSafetensorsJsonDepth is refused while parsing (the parser itself does not recurse), so
// that no deep value reaches code that might.
Result<Json> ParseJson(std::string_view text, std::string_view what) {
  bool too_deep = false;
  // `depth` is the number of containers around the one that starts.
  const Json::parser_callback_t bound_depth = [&too_deep](int depth, Json::parse_event_t event,
                                                          const Json& /*parsed*/) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= static_cast<int>(kMaxSafetensorsJsonDepth)) {
      too_deep = true;
      return false;  // Discarded: nothing deeper is kept.
    }
    return true;
  };
  Json json;
  try {
    json = Json::parse(text, bound_depth);
  } catch (const Json::exception& error) {
    return InvalidArgumentError(fmt::format("{}: invalid JSON: {}", what, error.what()));
  }
  if (too_deep) {
    return InvalidArgumentError(fmt::format("{}: JSON nested deeper than the maximum {} levels",
                                            what, kMaxSafetensorsJsonDepth));
  }
  return json;
}

}  // namespace

Result<ElementType> ElementTypeOfSafetensorsDtype(std::string_view dtype) {
  const auto* entry = std::ranges::find(kDtypes, dtype, &DtypeEntry::dtype);
  if (entry == kDtypes.end()) {
    return InvalidArgumentError(fmt::format("unknown dtype {}", Quoted(dtype)));
  }
  if (!entry->type) {
    return InvalidArgumentError(fmt::format("dtype {} has no hurray element type", dtype));
  }
  return *entry->type;
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte> prefix,
                                                 std::uint64_t file_size) {
  HURRAY_ASSIGN_OR_RETURN(std::uint64_t length, HeaderLength(prefix, file_size));
  if (prefix.size() - kLengthBytes < length) {
    return InvalidArgumentError(
        fmt::format("header: {} bytes given, fewer than the 8 + {} its "
                    "length says",
                    prefix.size(), length));
  }
  SafetensorsHeader header{.data_offset = kLengthBytes + length};
  const std::string_view text(reinterpret_cast<const char*>(prefix.data()) + kLengthBytes, length);
  HURRAY_ASSIGN_OR_RETURN(Json json, ParseJson(text, "header"));
  if (!json.is_object()) {
    return InvalidArgumentError(fmt::format("header: JSON is {}, not an object", json.type_name()));
  }
  const std::uint64_t data_bytes = file_size - header.data_offset;
  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") {
      HURRAY_ASSIGN_OR_RETURN(header.metadata, ParseMetadata(entry));
      continue;
    }
    if (name.size() > kMaxSafetensorsNameBytes) {
      return InvalidArgumentError(
          fmt::format("tensor name of {} bytes is longer than the {} "
                      "allowed: {}...",
                      name.size(), kMaxSafetensorsNameBytes, Quoted(name.substr(0, 64))));
    }
    auto tensor = ParseTensor(name, entry, header.data_offset, data_bytes);
    if (!tensor) return std::unexpected(tensor.error().WithContext(TensorContext(name)));
    header.tensors.push_back(*std::move(tensor));
  }
  HURRAY_RETURN_IF_ERROR(SortAndCheckOverlaps(header.tensors, header.data_offset));
  return header;
}

Result<SafetensorsHeader> ReadSafetensorsHeader(int fd, std::string_view path) {
  struct stat status{};
  if (::fstat(fd, &status) != 0) return ErrnoFailure("fstat", path, errno);
  const auto file_size = static_cast<std::uint64_t>(status.st_size);
  std::vector<std::byte> prefix(std::min(file_size, kLengthBytes));
  auto read_prefix = [&]() -> Status {
    const FileRange range{.file_offset = 0, .destination = prefix};
    return ReadFileRanges(fd, path, std::span(&range, 1), {.parallelism = 1});
  };
  HURRAY_RETURN_IF_ERROR(read_prefix());
  auto length = HeaderLength(prefix, file_size);
  if (!length) return std::unexpected(length.error().WithContext(path));
  prefix.resize(kLengthBytes + *length);
  HURRAY_RETURN_IF_ERROR(read_prefix());
  auto header = ParseSafetensorsHeader(prefix, file_size);
  if (!header) return std::unexpected(header.error().WithContext(path));
  return header;
}

Result<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json) {
  HURRAY_ASSIGN_OR_RETURN(Json index, ParseJson(json, "index"));
  if (!index.is_object()) {
    return InvalidArgumentError(fmt::format("index: JSON is {}, not an object", index.type_name()));
  }
  const Json* weight_map = Member(index, "weight_map");
  if (weight_map == nullptr) return InvalidArgumentError("index: weight_map is missing");
  if (!weight_map->is_object()) {
    return InvalidArgumentError(
        fmt::format("index: weight_map is {}, not an object", weight_map->type_name()));
  }
  SafetensorsIndex result;
  for (const auto& [name, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      return InvalidArgumentError(fmt::format("index: weight_map {}: shard is {}, not a string",
                                              Quoted(name), shard.type_name()));
    }
    const auto& file = shard.get_ref<const std::string&>();
    if (file.empty() || file == "." || file.find('/') != std::string::npos ||
        file.find("..") != std::string::npos || file.find('\0') != std::string::npos) {
      return InvalidArgumentError(fmt::format(
          "index: weight_map {}: shard {} is not a plain file name", Quoted(name), Quoted(file)));
    }
    if (std::ranges::find(result.shards, file) == result.shards.end()) {
      result.shards.push_back(file);
    }
    result.weight_map.emplace(name, file);
  }
  return result;
}

}  // namespace hurray
