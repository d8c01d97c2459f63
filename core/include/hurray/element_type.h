// Element types of the Hurray format: one-byte tags and bit widths.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "hurray/error.h"
#include "hurray/export.h"

namespace hurray {

// The type of one element. The enumerator value is the element's one-byte type tag, equal to
// the hurray.v1.ElementType enum value in proto/hurray/v1/descriptor.proto.
enum class ElementType : std::uint8_t {
  kBool = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kUint8 = 6,
  kUint16 = 7,
  kUint32 = 8,
  kUint64 = 9,
  kFloat16 = 10,
  kBfloat16 = 11,
  kFloat32 = 12,
  kFloat64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kFloat8E4m3fn = 16,
  kFloat8E5m2 = 17,
  kInt4 = 18,
  kUint4 = 19,
  kNf4 = 20,
  kMxfp4 = 21,
  kFloat8E8m0 = 22,
};

// The element type of a tag; INVALID_ARGUMENT naming the tag when it names none.
[[nodiscard]] HURRAY_CXX_EXPORT Result<ElementType> ElementTypeFromTag(std::uint8_t tag);

// The one-byte tag of a type.
[[nodiscard]] constexpr std::uint8_t ElementTypeTag(ElementType type) {
  return static_cast<std::uint8_t>(type);
}

// Width of one element in bits: 4, 8, 16, 32, 64 or 128.
[[nodiscard]] HURRAY_CXX_EXPORT std::uint32_t ElementBitWidth(ElementType type);

// The lower-case name used in docs and messages ("float32", "float8_e4m3fn").
[[nodiscard]] HURRAY_CXX_EXPORT std::string_view ElementTypeName(ElementType type);

// The type whose ElementTypeName is `name`, if any.
[[nodiscard]] HURRAY_CXX_EXPORT std::optional<ElementType> ElementTypeFromName(
    std::string_view name);

// Whether the type is 4 bits wide and packed two elements per byte, low nibble first.
[[nodiscard]] HURRAY_CXX_EXPORT bool IsPacked(ElementType type);

// Whether the type is a plain integer (signed or unsigned, any width, packed included).
[[nodiscard]] HURRAY_CXX_EXPORT bool IsInteger(ElementType type);

// Whether the type is an IEEE or brain float of 16 bits or more (float16, bfloat16,
// float32, float64).
[[nodiscard]] HURRAY_CXX_EXPORT bool IsWideFloat(ElementType type);

// Bytes that `count` elements of `type` occupy (ceil(count * bits / 8)); nullopt when that
// does not fit in 64 bits.
[[nodiscard]] HURRAY_CXX_EXPORT std::optional<std::uint64_t> ByteSizeOf(ElementType type,
                                                                        std::uint64_t count);

}  // namespace hurray
