#include "hurray/element_type.h"

#include <fmt/format.h>

#include <array>

#include "hurray/checked_math.h"

namespace hurray {
namespace {

struct ElementTypeInfo {
  ElementType type;
  std::string_view name;
  std::uint32_t bits;
};

// Indexed by tag - 1.
constexpr std::array<ElementTypeInfo, 22> kElementTypes = {{
    {ElementType::kBool, "bool", 8},
    {ElementType::kInt8, "int8", 8},
    {ElementType::kInt16, "int16", 16},
    {ElementType::kInt32, "int32", 32},
    {ElementType::kInt64, "int64", 64},
    {ElementType::kUint8, "uint8", 8},
    {ElementType::kUint16, "uint16", 16},
    {ElementType::kUint32, "uint32", 32},
    {ElementType::kUint64, "uint64", 64},
    {ElementType::kFloat16, "float16", 16},
    {ElementType::kBfloat16, "bfloat16", 16},
    {ElementType::kFloat32, "float32", 32},
    {ElementType::kFloat64, "float64", 64},
    {ElementType::kComplex64, "complex64", 64},
    {ElementType::kComplex128, "complex128", 128},
    {ElementType::kFloat8E4m3fn, "float8_e4m3fn", 8},
    {ElementType::kFloat8E5m2, "float8_e5m2", 8},
    {ElementType::kInt4, "int4", 4},
    {ElementType::kUint4, "uint4", 4},
    {ElementType::kNf4, "nf4", 4},
    {ElementType::kMxfp4, "mxfp4", 4},
    {ElementType::kFloat8E8m0, "float8_e8m0", 8},
}};

const ElementTypeInfo& InfoOf(ElementType type) {
  return kElementTypes[static_cast<std::size_t>(type) - 1];
}

}  // namespace

Result<ElementType> ElementTypeFromTag(std::uint8_t tag) {
  if (tag == 0 || tag > kElementTypes.size()) {
    return InvalidArgumentError(fmt::format("element type tag {} names no type", tag));
  }
  return kElementTypes[tag - 1].type;
}

std::uint32_t ElementBitWidth(ElementType type) { return InfoOf(type).bits; }

std::string_view ElementTypeName(ElementType type) { return InfoOf(type).name; }

std::optional<ElementType> ElementTypeFromName(std::string_view name) {
  for (const auto& info : kElementTypes) {
    if (info.name == name) return info.type;
  }
  return std::nullopt;
}

bool IsPacked(ElementType type) { return InfoOf(type).bits == 4; }

bool IsInteger(ElementType type) {
  switch (type) {
    case ElementType::kInt4:
    case ElementType::kInt8:
    case ElementType::kInt16:
    case ElementType::kInt32:
    case ElementType::kInt64:
    case ElementType::kUint4:
    case ElementType::kUint8:
    case ElementType::kUint16:
    case ElementType::kUint32:
    case ElementType::kUint64:
      return true;
    default:
      return false;
  }
}

bool IsWideFloat(ElementType type) {
  return type == ElementType::kFloat16 || type == ElementType::kBfloat16 ||
         type == ElementType::kFloat32 || type == ElementType::kFloat64;
}

std::optional<std::uint64_t> ByteSizeOf(ElementType type, std::uint64_t count) {
  const std::uint32_t bits = ElementBitWidth(type);
  if (bits < 8) return internal::CeilDiv(count, 8 / bits);
  return internal::CheckedMul(count, bits / 8);
}

}  // namespace hurray
