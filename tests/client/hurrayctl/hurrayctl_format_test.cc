// Tests of hurrayctl's text rendering (client/src/hurrayctl_format.h).
#include "hurrayctl/hurrayctl_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace hurray::ctl {
namespace {

TEST(FormatBytesTest, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(48), "48 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(64ull << 20), "64.0 MiB");
  EXPECT_EQ(FormatBytes(3ull << 30), "3.0 GiB");
  EXPECT_EQ(FormatBytes(5ull << 40), "5.0 TiB");
  EXPECT_EQ(FormatBytes(UINT64_MAX), "16.0 EiB");
}

TEST(FormatBytesTest, RoundsUpToTheNextUnitRatherThanPrinting1024) {
  EXPECT_EQ(FormatBytes((1ull << 20) - 1), "1.0 MiB");
  EXPECT_EQ(FormatBytes((1ull << 30) - 1), "1.0 GiB");
}

TEST(FormatDurationTest, ShowsTheLargestUnitsNeeded) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(42), "42s");
  EXPECT_EQ(FormatDuration(187), "3m 07s");
  EXPECT_EQ(FormatDuration(7387), "2h 03m 07s");
  EXPECT_EQ(FormatDuration(439387), "5d 02h 03m 07s");
}

TEST(FormatAgeTest, CountsBackFromNow) {
  constexpr std::int64_t kSecond = 1'000'000'000;
  const std::int64_t now = 1'700'000'000 * kSecond;
  EXPECT_EQ(FormatAge(now, now), "0s ago");
  EXPECT_EQ(FormatAge(now - 192 * kSecond, now), "3m 12s ago");
  EXPECT_EQ(FormatAge(now - 7387 * kSecond - kSecond / 2, now), "2h 03m 07s ago");
  EXPECT_EQ(FormatAge(now + 5 * kSecond, now), "0s ago");
  EXPECT_EQ(FormatAge(0, now), "-");
}

TEST(FormatShapeTest, MatchesTensorDescriptorToString) {
  EXPECT_EQ(FormatShape(std::vector<std::uint64_t>{}), "[]");
  EXPECT_EQ(FormatShape(std::vector<std::uint64_t>{3}), "[3]");
  EXPECT_EQ(FormatShape(std::vector<std::uint64_t>{3, 4}), "[3, 4]");
}

TEST(FormatPercentTest, OneDecimal) {
  EXPECT_EQ(FormatPercent(0.0), "0.0%");
  EXPECT_EQ(FormatPercent(0.125), "12.5%");
  EXPECT_EQ(FormatPercent(1.0), "100.0%");
}

TEST(FormatTimestampTest, DashForUnset) {
  EXPECT_EQ(FormatTimestamp(0), "-");
  EXPECT_EQ(FormatTimestamp(-5), "-");
  EXPECT_EQ(FormatTimestamp(1'700'000'000'000'000'000).size(), 19u);  // YYYY-MM-DD HH:MM:SS
}

TEST(TextTableTest, AlignsColumnsWithoutTrailingSpaces) {
  TextTable table({"NAME", "SIZE"});
  table.AddRow({"a/long-name", "1 B"});
  table.AddRow({"b/x", "12.0 KiB"});
  table.AddRow({"c/short"});
  EXPECT_EQ(table.Render("  "),
            "  NAME         SIZE\n"
            "  a/long-name  1 B\n"
            "  b/x          12.0 KiB\n"
            "  c/short\n");
}

}  // namespace
}  // namespace hurray::ctl
