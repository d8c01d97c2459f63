#include "hurray/element_type.h"

#include <gtest/gtest.h>

#include <limits>

#include "testing/status_matchers.h"

namespace hurray {
namespace {

TEST(ElementTypeTest, EveryTagRoundTripsWithItsName) {
  for (std::uint8_t tag = 1; tag <= 22; ++tag) {
    auto type = ElementTypeFromTag(tag);
    ASSERT_OK(type);
    EXPECT_EQ(ElementTypeTag(*type), tag);
    EXPECT_EQ(ElementTypeFromName(ElementTypeName(*type)), *type);
  }
}

TEST(ElementTypeTest, UnknownTagsAreRejected) {
  EXPECT_ERROR(ElementTypeFromTag(0), StatusCode::kInvalidArgument, {"tag 0"});
  EXPECT_ERROR(ElementTypeFromTag(23), StatusCode::kInvalidArgument, {"tag 23"});
  EXPECT_ERROR(ElementTypeFromTag(255), StatusCode::kInvalidArgument, {"tag 255"});
  EXPECT_FALSE(ElementTypeFromName("float31").has_value());
}

TEST(ElementTypeTest, BitWidths) {
  EXPECT_EQ(ElementBitWidth(ElementType::kBool), 8u);
  EXPECT_EQ(ElementBitWidth(ElementType::kBfloat16), 16u);
  EXPECT_EQ(ElementBitWidth(ElementType::kFloat32), 32u);
  EXPECT_EQ(ElementBitWidth(ElementType::kComplex64), 64u);
  EXPECT_EQ(ElementBitWidth(ElementType::kComplex128), 128u);
  EXPECT_EQ(ElementBitWidth(ElementType::kFloat8E4m3fn), 8u);
  EXPECT_EQ(ElementBitWidth(ElementType::kFloat8E8m0), 8u);
  for (ElementType packed :
       {ElementType::kInt4, ElementType::kUint4, ElementType::kNf4, ElementType::kMxfp4}) {
    EXPECT_EQ(ElementBitWidth(packed), 4u);
    EXPECT_TRUE(IsPacked(packed));
  }
  EXPECT_FALSE(IsPacked(ElementType::kInt8));
}

TEST(ElementTypeTest, PackedTypesRoundUpToWholeBytes) {
  EXPECT_EQ(ByteSizeOf(ElementType::kInt4, 0), 0u);
  EXPECT_EQ(ByteSizeOf(ElementType::kInt4, 1), 1u);
  EXPECT_EQ(ByteSizeOf(ElementType::kInt4, 7), 4u);
  EXPECT_EQ(ByteSizeOf(ElementType::kNf4, 8), 4u);
  EXPECT_EQ(ByteSizeOf(ElementType::kFloat32, 5), 20u);
  EXPECT_EQ(ByteSizeOf(ElementType::kComplex128, 3), 48u);
}

TEST(ElementTypeTest, ByteSizeOverflowIsReported) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_FALSE(ByteSizeOf(ElementType::kFloat32, kMax / 2).has_value());
  EXPECT_EQ(ByteSizeOf(ElementType::kUint8, kMax), kMax);
  EXPECT_EQ(ByteSizeOf(ElementType::kInt4, kMax), kMax / 2 + 1);
}

TEST(ElementTypeTest, Classification) {
  EXPECT_TRUE(IsInteger(ElementType::kUint4));
  EXPECT_TRUE(IsInteger(ElementType::kInt64));
  EXPECT_FALSE(IsInteger(ElementType::kBool));
  EXPECT_FALSE(IsInteger(ElementType::kFloat8E4m3fn));
  EXPECT_TRUE(IsWideFloat(ElementType::kBfloat16));
  EXPECT_FALSE(IsWideFloat(ElementType::kFloat8E5m2));
  EXPECT_FALSE(IsWideFloat(ElementType::kComplex64));
}

}  // namespace
}  // namespace hurray
