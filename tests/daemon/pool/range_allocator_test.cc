#include "pool/range_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kPage = 4096;

double Fragmentation(const RangeAllocator& allocator) {
  if (allocator.free_bytes() == 0) return 0.0;
  return 1.0 - static_cast<double>(allocator.largest_free_range()) /
                   static_cast<double>(allocator.free_bytes());
}

// Allocates `pages` pages and expects success.
std::uint64_t MustAllocate(RangeAllocator& allocator, std::uint64_t pages) {
  const std::optional<std::uint64_t> offset = allocator.Allocate(pages * kPage);
  EXPECT_TRUE(offset.has_value()) << "allocating " << pages << " pages";
  return offset.value_or(UINT64_MAX);
}

class RangeAllocatorTest : public ::testing::Test {
 protected:
  RangeAllocator allocator_{16 * kPage, kPage};
};

TEST_F(RangeAllocatorTest, StartsWithOneFreeRangeOfTheWholeSpace) {
  EXPECT_EQ(allocator_.total_bytes(), 16 * kPage);
  EXPECT_EQ(allocator_.free_bytes(), 16 * kPage);
  EXPECT_EQ(allocator_.largest_free_range(), 16 * kPage);
  EXPECT_EQ(allocator_.free_range_count(), 1u);
  EXPECT_EQ(allocator_.allocated_bytes(), 0u);
  EXPECT_EQ(allocator_.allocation_count(), 0u);
}

TEST_F(RangeAllocatorTest, RoundsSizesUpToTheGranule) {
  EXPECT_EQ(allocator_.Allocate(1), 0u);
  EXPECT_EQ(allocator_.allocated_bytes(), kPage);
  // The second range starts after the whole first granule, not after its one byte.
  EXPECT_EQ(allocator_.Allocate(kPage + 1), kPage);
  EXPECT_EQ(allocator_.allocated_bytes(), 3 * kPage);
  EXPECT_EQ(allocator_.Allocate(kPage), 3 * kPage);
  EXPECT_EQ(allocator_.allocated_bytes(), 4 * kPage);
  EXPECT_EQ(allocator_.free_bytes(), 12 * kPage);
  EXPECT_EQ(allocator_.allocation_count(), 3u);
}

TEST_F(RangeAllocatorTest, RefusesZeroAndOversizedRequests) {
  EXPECT_EQ(allocator_.Allocate(0), std::nullopt);
  EXPECT_EQ(allocator_.Allocate(16 * kPage + 1), std::nullopt);
  EXPECT_EQ(allocator_.Allocate(UINT64_MAX), std::nullopt);
  EXPECT_EQ(allocator_.allocation_count(), 0u);
  EXPECT_EQ(allocator_.free_bytes(), 16 * kPage);
}

TEST_F(RangeAllocatorTest, PicksTheSmallestFreeRangeThatFits) {
  // Holes of 3, 1 and 2 pages (at pages 0, 4 and 6), then a tail of 7 pages at page 9.
  const std::uint64_t a = MustAllocate(allocator_, 3);
  MustAllocate(allocator_, 1);
  const std::uint64_t c = MustAllocate(allocator_, 1);
  MustAllocate(allocator_, 1);
  const std::uint64_t e = MustAllocate(allocator_, 2);
  MustAllocate(allocator_, 1);
  ASSERT_TRUE(allocator_.Free(a, 3 * kPage));
  ASSERT_TRUE(allocator_.Free(c, kPage));
  ASSERT_TRUE(allocator_.Free(e, 2 * kPage));
  ASSERT_EQ(allocator_.free_range_count(), 4u);

  // First fit would take page 0, worst fit the tail.
  EXPECT_EQ(allocator_.Allocate(2 * kPage), 6 * kPage);
  EXPECT_EQ(allocator_.Allocate(kPage), 4 * kPage);
  EXPECT_EQ(allocator_.Allocate(3 * kPage), 0u);
  EXPECT_EQ(allocator_.Allocate(4 * kPage), 9 * kPage);
}

TEST_F(RangeAllocatorTest, TiesGoToTheLowestOffset) {
  const std::uint64_t a = MustAllocate(allocator_, 1);
  MustAllocate(allocator_, 1);
  const std::uint64_t c = MustAllocate(allocator_, 1);
  MustAllocate(allocator_, 1);
  // Freed high first, so neither "last freed" nor "first freed" explains the choice.
  ASSERT_TRUE(allocator_.Free(c, kPage));
  ASSERT_TRUE(allocator_.Free(a, kPage));
  EXPECT_EQ(allocator_.Allocate(kPage), 0u);
  EXPECT_EQ(allocator_.Allocate(kPage), 2 * kPage);
}

TEST_F(RangeAllocatorTest, CoalescesWithTheLeftNeighbour) {
  const std::uint64_t a = MustAllocate(allocator_, 1);
  const std::uint64_t b = MustAllocate(allocator_, 1);
  MustAllocate(allocator_, 1);
  ASSERT_TRUE(allocator_.Free(a, kPage));
  ASSERT_TRUE(allocator_.Free(b, kPage));  // Left neighbour a is free.
  EXPECT_EQ(allocator_.free_range_count(), 2u);
  // A 2-page range exists only if a and b merged; otherwise it would come from the tail.
  EXPECT_EQ(allocator_.Allocate(2 * kPage), 0u);
}

TEST_F(RangeAllocatorTest, CoalescesWithTheRightNeighbour) {
  const std::uint64_t a = MustAllocate(allocator_, 1);
  const std::uint64_t b = MustAllocate(allocator_, 1);
  MustAllocate(allocator_, 1);
  ASSERT_TRUE(allocator_.Free(b, kPage));
  ASSERT_TRUE(allocator_.Free(a, kPage));  // Right neighbour b is free.
  EXPECT_EQ(allocator_.free_range_count(), 2u);
  EXPECT_EQ(allocator_.Allocate(2 * kPage), 0u);
}

TEST_F(RangeAllocatorTest, CoalescesWithBothNeighbours) {
  const std::uint64_t a = MustAllocate(allocator_, 1);
  const std::uint64_t b = MustAllocate(allocator_, 2);
  const std::uint64_t c = MustAllocate(allocator_, 1);
  ASSERT_TRUE(allocator_.Free(a, kPage));
  ASSERT_TRUE(allocator_.Free(c, kPage));  // Merges with the tail on its right.
  EXPECT_EQ(allocator_.free_range_count(), 2u);
  EXPECT_GT(Fragmentation(allocator_), 0.0);
  ASSERT_TRUE(allocator_.Free(b, 2 * kPage));  // Merges left and right.
  EXPECT_EQ(allocator_.free_range_count(), 1u);
  EXPECT_EQ(allocator_.largest_free_range(), 16 * kPage);
  EXPECT_EQ(allocator_.free_bytes(), 16 * kPage);
  EXPECT_EQ(Fragmentation(allocator_), 0.0);
  EXPECT_EQ(allocator_.Allocate(16 * kPage), 0u);
}

TEST_F(RangeAllocatorTest, ExhaustionRefusesUntilSomethingIsFreed) {
  std::vector<std::uint64_t> offsets;
  offsets.reserve(16);
  for (int i = 0; i < 16; ++i) offsets.push_back(MustAllocate(allocator_, 1));
  EXPECT_EQ(allocator_.Allocate(1), std::nullopt);
  EXPECT_EQ(allocator_.free_bytes(), 0u);
  EXPECT_EQ(allocator_.largest_free_range(), 0u);
  EXPECT_EQ(allocator_.free_range_count(), 0u);
  EXPECT_EQ(Fragmentation(allocator_), 0.0);

  ASSERT_TRUE(allocator_.Free(offsets[5], kPage));
  EXPECT_EQ(allocator_.Allocate(2 * kPage), std::nullopt);  // Free space is one page.
  EXPECT_EQ(allocator_.Allocate(kPage), offsets[5]);
}

TEST_F(RangeAllocatorTest, FreeAcceptsTheRequestedOrTheRoundedSize) {
  const std::uint64_t a = allocator_.Allocate(100).value();
  const std::uint64_t b = allocator_.Allocate(100).value();
  EXPECT_TRUE(allocator_.Free(a, 100));
  EXPECT_TRUE(allocator_.Free(b, kPage));
  EXPECT_EQ(allocator_.allocation_count(), 0u);
  EXPECT_EQ(allocator_.free_range_count(), 1u);
}

// Captures every statistic, to show a refused Free changed nothing.
struct Snapshot {
  std::uint64_t free_bytes, largest, ranges, allocated, count;
  explicit Snapshot(const RangeAllocator& allocator)
      : free_bytes(allocator.free_bytes()),
        largest(allocator.largest_free_range()),
        ranges(allocator.free_range_count()),
        allocated(allocator.allocated_bytes()),
        count(allocator.allocation_count()) {}
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

TEST_F(RangeAllocatorTest, DoubleFreeIsRefusedWithoutCorruptingState) {
  const std::uint64_t a = MustAllocate(allocator_, 2);
  MustAllocate(allocator_, 1);
  ASSERT_TRUE(allocator_.Free(a, 2 * kPage));
  const Snapshot before(allocator_);
  EXPECT_FALSE(allocator_.Free(a, 2 * kPage));
  EXPECT_EQ(Snapshot(allocator_), before);
  // The free space was not counted twice: exactly 15 pages fit, in two requests.
  EXPECT_EQ(allocator_.Allocate(2 * kPage), a);
  EXPECT_EQ(allocator_.Allocate(13 * kPage), 3 * kPage);
  EXPECT_EQ(allocator_.Allocate(1), std::nullopt);
}

TEST_F(RangeAllocatorTest, ForeignFreeIsRefusedWithoutCorruptingState) {
  const std::uint64_t a = MustAllocate(allocator_, 2);
  MustAllocate(allocator_, 1);
  const Snapshot before(allocator_);
  EXPECT_FALSE(allocator_.Free(a + kPage, kPage));       // Inside an allocation.
  EXPECT_FALSE(allocator_.Free(a, kPage));               // Wrong size.
  EXPECT_FALSE(allocator_.Free(a, 3 * kPage));           // Wrong size, over a neighbour.
  EXPECT_FALSE(allocator_.Free(8 * kPage, kPage));       // In free space.
  EXPECT_FALSE(allocator_.Free(64 * kPage, kPage));      // Beyond the end.
  EXPECT_FALSE(allocator_.Free(a, UINT64_MAX));          // Size overflows when rounded.
  EXPECT_FALSE(allocator_.Free(UINT64_MAX - 1, kPage));  // End overflows.
  EXPECT_EQ(Snapshot(allocator_), before);
  EXPECT_TRUE(allocator_.Free(a, 2 * kPage));
}

TEST(RangeAllocatorEmptyTest, ZeroTotalFitsNothing) {
  RangeAllocator allocator(0, kPage);
  EXPECT_EQ(allocator.Allocate(1), std::nullopt);
  EXPECT_EQ(allocator.free_range_count(), 0u);
  EXPECT_EQ(allocator.largest_free_range(), 0u);
}

// The free ranges implied by a set of live allocations (offset -> rounded size).
std::vector<std::pair<std::uint64_t, std::uint64_t>> Gaps(
    const std::map<std::uint64_t, std::uint64_t>& live, std::uint64_t total) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps;
  std::uint64_t cursor = 0;
  for (const auto& [offset, size] : live) {
    if (offset > cursor) gaps.emplace_back(cursor, offset - cursor);
    cursor = offset + size;
  }
  if (cursor < total) gaps.emplace_back(cursor, total - cursor);
  return gaps;
}

// Thousands of random operations checked against a model: live ranges never overlap, the
// chosen range is the best fit of the model's gaps, adjacent free ranges are always merged,
// and free + allocated == total after every step.
TEST(RangeAllocatorRandomTest, MatchesAModelOverRandomOperations) {
  constexpr std::uint64_t kTotal = 256 * kPage;
  RangeAllocator allocator(kTotal, kPage);
  std::map<std::uint64_t, std::uint64_t> live;                 // offset -> rounded size
  std::vector<std::pair<std::uint64_t, std::uint64_t>> freed;  // For double frees.
  std::mt19937_64 random(20240517);
  std::uniform_int_distribution<std::uint64_t> size_of(1, 24 * kPage);
  std::uniform_int_distribution<int> percent(0, 99);

  for (int step = 0; step < 20000; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const int roll = percent(random);
    if (roll < 3 && !freed.empty()) {
      const auto& [offset, size] = freed[random() % freed.size()];
      if (!live.contains(offset)) {
        EXPECT_FALSE(allocator.Free(offset, size));
      }
    } else if (roll < 55 || live.empty()) {
      const std::uint64_t size = size_of(random);
      const std::uint64_t rounded = (size + kPage - 1) / kPage * kPage;
      const auto gaps = Gaps(live, kTotal);
      std::optional<std::pair<std::uint64_t, std::uint64_t>> best;
      for (const auto& gap : gaps) {
        if (gap.second >= rounded && (!best || gap.second < best->second)) best = gap;
      }
      const std::optional<std::uint64_t> offset = allocator.Allocate(size);
      if (!best) {
        ASSERT_EQ(offset, std::nullopt) << "no gap of " << rounded << " bytes exists";
        continue;
      }
      ASSERT_EQ(offset, best->first) << "not the best fit for " << rounded << " bytes";
      // No overlap with any live range (redundant with best fit, but that is the point).
      const auto next = live.lower_bound(*offset);
      if (next != live.end()) {
        ASSERT_LE(*offset + rounded, next->first);
      }
      if (next != live.begin()) {
        const auto previous = std::prev(next);
        ASSERT_LE(previous->first + previous->second, *offset);
      }
      ASSERT_LE(*offset + rounded, kTotal);
      live.emplace(*offset, rounded);
    } else {
      auto victim = live.begin();
      std::advance(victim, static_cast<std::ptrdiff_t>(random() % live.size()));
      // Free with the requested size sometimes, the rounded size otherwise.
      const std::uint64_t size =
          percent(random) < 50 ? victim->second : victim->second - (random() % kPage);
      ASSERT_TRUE(allocator.Free(victim->first, size));
      freed.emplace_back(victim->first, victim->second);
      live.erase(victim);
    }

    std::uint64_t allocated = 0;
    for (const auto& [offset, size] : live) allocated += size;
    const auto gaps = Gaps(live, kTotal);
    std::uint64_t largest_gap = 0;
    for (const auto& gap : gaps) largest_gap = std::max(largest_gap, gap.second);
    ASSERT_EQ(allocator.allocated_bytes(), allocated);
    ASSERT_EQ(allocator.free_bytes() + allocator.allocated_bytes(), kTotal);
    ASSERT_EQ(allocator.allocation_count(), live.size());
    ASSERT_EQ(allocator.free_range_count(), gaps.size());
    ASSERT_EQ(allocator.largest_free_range(), largest_gap);
  }

  for (const auto& [offset, size] : live) ASSERT_TRUE(allocator.Free(offset, size));
  EXPECT_EQ(allocator.free_range_count(), 1u);
  EXPECT_EQ(allocator.largest_free_range(), kTotal);
  EXPECT_EQ(Fragmentation(allocator), 0.0);
}

TEST(RangeAllocatorExtendTest, OnlyTheUsablePrefixIsFreeAndExtendGrowsIt) {
  RangeAllocator allocator(8 * kPage, kPage, 2 * kPage);
  EXPECT_EQ(allocator.usable_bytes(), 2 * kPage);
  EXPECT_EQ(allocator.free_bytes(), 2 * kPage);
  EXPECT_FALSE(allocator.Allocate(3 * kPage));
  allocator.Extend(4 * kPage);
  EXPECT_EQ(allocator.free_range_count(), 1u);
  EXPECT_EQ(allocator.largest_free_range(), 4 * kPage);
  EXPECT_EQ(allocator.Allocate(3 * kPage), 0u);
}

TEST(RangeAllocatorExtendTest, ExtendAfterAFullPrefixStartsANewFreeRange) {
  RangeAllocator allocator(8 * kPage, kPage, 2 * kPage);
  ASSERT_EQ(allocator.Allocate(kPage), 0u);
  ASSERT_EQ(allocator.Allocate(kPage), kPage);
  allocator.Extend(3 * kPage);
  EXPECT_EQ(allocator.Allocate(kPage), 2 * kPage);
  allocator.Extend(8 * kPage);
  EXPECT_EQ(allocator.usable_bytes(), 8 * kPage);
  EXPECT_EQ(allocator.free_bytes(), 5 * kPage);
  // Freeing the middle range merges it with the range Extend made after it.
  ASSERT_TRUE(allocator.Free(2 * kPage, kPage));
  EXPECT_EQ(allocator.free_range_count(), 1u);
  EXPECT_EQ(allocator.largest_free_range(), 6 * kPage);
}

}  // namespace
}  // namespace hurray::daemon
