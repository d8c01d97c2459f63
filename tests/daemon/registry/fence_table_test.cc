// FenceTable: fence words in real shared memory, written and read through clients' mappings
// of the descriptors it grants, as a producer's and a consumer's GPU would.
#include "registry/fence_table.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "testing/shared_mapping.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kFirstId = kFirstFenceSegmentId;

class FenceTableTest : public ::testing::Test {
 protected:
  static FenceTable::Options Small() {
    return FenceTable::Options{.pool_name = "cuda:0",
                               .shm_prefix = "hurray-test",
                               .first_segment_id = kFirstId,
                               .segment_bytes = 4096};
  }

  ReservedFence Reserve() {
    auto fence = table_.Reserve();
    EXPECT_OK(fence);
    return fence ? std::move(*fence) : ReservedFence();
  }

  // A client's mapping of the segment of `slot`, through a descriptor the table opened.
  testing::SharedMapping Map(const FenceSlot& slot, bool writable) {
    auto access = table_.OpenSegment(slot.segment_id, writable);
    EXPECT_OK(access);
    return testing::SharedMapping::Of(access->fd.get(), access->segment_size, writable);
  }

  FenceTable table_{Small()};
};

TEST_F(FenceTableTest, FirstFenceIsAFreshWordOfTheFirstSegment) {
  ReservedFence fence = Reserve();
  const FenceSlot& slot = fence.slot();
  EXPECT_EQ(slot.segment_id, kFirstId);
  EXPECT_EQ(slot.segment_size, 4096u);
  EXPECT_EQ(slot.offset, 0u);
  EXPECT_EQ(slot.value, 1u);
  EXPECT_EQ(fence.State(), FenceState::kPending);
  EXPECT_EQ(table_.counts().in_use, 1u);
  EXPECT_EQ(table_.counts().segments, 1u);
}

TEST_F(FenceTableTest, StateFollowsTheWordAProducerWrites) {
  ReservedFence fence = Reserve();
  testing::SharedMapping producer = Map(fence.slot(), /*writable=*/true);
  producer.WriteWord(fence.slot().offset, fence.slot().value - 1);
  EXPECT_EQ(fence.State(), FenceState::kPending);
  producer.WriteWord(fence.slot().offset, fence.slot().value);
  EXPECT_EQ(fence.State(), FenceState::kReady);
  producer.WriteWord(fence.slot().offset, fence.slot().value + 5);
  EXPECT_EQ(fence.State(), FenceState::kReady);
  FenceTable::Poison(fence.slot());
  EXPECT_EQ(fence.State(), FenceState::kFailed);
}

TEST_F(FenceTableTest, ReachedWordIsReusedWithALargerValue) {
  ReservedFence first = Reserve();
  const FenceSlot used = first.slot();
  testing::SharedMapping producer = Map(used, /*writable=*/true);
  // A producer may overshoot its value: the next one is above whatever the word holds.
  producer.WriteWord(used.offset, used.value + 41);
  first.Reset();
  EXPECT_EQ(table_.counts().in_use, 0u);
  EXPECT_EQ(table_.counts().free, 1u);
  ReservedFence second = Reserve();
  EXPECT_EQ(second.slot().segment_id, used.segment_id);
  EXPECT_EQ(second.slot().offset, used.offset);
  EXPECT_EQ(second.slot().value, used.value + 42);
  EXPECT_EQ(second.State(), FenceState::kPending);
  producer.WriteWord(second.slot().offset, second.slot().value);
  second.Reset();
  ReservedFence third = Reserve();
  EXPECT_EQ(third.slot().offset, used.offset);
  EXPECT_GT(third.slot().value, used.value + 42);
  EXPECT_EQ(table_.counts().retired, 0u);
}

TEST_F(FenceTableTest, UnreachedWordIsPoisonedAndRetired) {
  ReservedFence fence = Reserve();
  const FenceSlot slot = fence.slot();
  testing::SharedMapping consumer = Map(slot, /*writable=*/false);
  fence.Reset();
  EXPECT_EQ(consumer.ReadWord(slot.offset), kFencePoison);
  EXPECT_EQ(table_.counts().retired, 1u);
  EXPECT_EQ(table_.counts().in_use, 0u);
  EXPECT_EQ(table_.counts().free, 0u);
  ReservedFence next = Reserve();
  EXPECT_NE(next.slot().offset, slot.offset);
}

// A stream waits with cuStreamWaitValue64(GEQ), whose compare is cyclic: the wait ends once
// (int64_t)(word - value) >= 0. The poison must end the wait of every value the table can
// hand out (the old poison, 2^64 - 1, ended none: a stream waiting on a dead producer hung).
bool GpuWaitEnds(std::uint64_t word, std::uint64_t value) {
  return static_cast<std::int64_t>(word - value) >= 0;
}

TEST_F(FenceTableTest, ThePoisonEndsAGpuWaitForEveryValueTheTableHandsOut) {
  ReservedFence fence = Reserve();
  for (const std::uint64_t value :
       {fence.slot().value, std::uint64_t{2}, std::uint64_t{1} << 32, std::uint64_t{1} << 61,
        kFenceValueLimit - 2, kFenceValueLimit - 1}) {
    EXPECT_TRUE(GpuWaitEnds(kFencePoison, value)) << value;
    EXPECT_EQ(FenceWordReaches(kFencePoison, value), GpuWaitEnds(kFencePoison, value));
  }
  EXPECT_FALSE(GpuWaitEnds(std::numeric_limits<std::uint64_t>::max(), fence.slot().value));
  FenceTable::Poison(fence.slot());
  EXPECT_TRUE(GpuWaitEnds(*fence.slot().word, fence.slot().value));
  EXPECT_EQ(fence.State(), FenceState::kFailed);
}

TEST_F(FenceTableTest, AWordTheGpuWouldNotCountAsReachedIsPendingAndRetiredAtFree) {
  ReservedFence fence = Reserve();
  const FenceSlot slot = fence.slot();
  testing::SharedMapping producer = Map(slot, /*writable=*/true);
  // Above the value unsigned, below it in the GPU's cyclic compare: a waiting stream would
  // not move on, so the daemon does not call it ready either.
  producer.WriteWord(slot.offset, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(fence.State(), FenceState::kPending);
  fence.Reset();
  EXPECT_EQ(producer.ReadWord(slot.offset), kFencePoison);
  EXPECT_EQ(table_.counts().retired, 1u);
  EXPECT_EQ(table_.counts().free, 0u);
}

TEST_F(FenceTableTest, AWordReachedAtTheValueLimitIsRetiredNotReused) {
  ReservedFence fence = Reserve();
  const FenceSlot slot = fence.slot();
  testing::SharedMapping producer = Map(slot, /*writable=*/true);
  // Reached, but a next value above it would not be below kFenceValueLimit.
  producer.WriteWord(slot.offset, kFenceValueLimit - 1);
  EXPECT_EQ(fence.State(), FenceState::kReady);
  fence.Reset();
  EXPECT_EQ(table_.counts().retired, 1u);
  EXPECT_EQ(table_.counts().free, 0u);
  EXPECT_EQ(producer.ReadWord(slot.offset), kFencePoison);
  ReservedFence next = Reserve();
  EXPECT_NE(next.slot().offset, slot.offset);
}

TEST_F(FenceTableTest, PoisonIsVisibleThroughAReadOnlyMapping) {
  ReservedFence fence = Reserve();
  testing::SharedMapping consumer = Map(fence.slot(), /*writable=*/false);
  EXPECT_EQ(consumer.ReadWord(fence.slot().offset), 0u);
  FenceTable::Poison(fence.slot());
  EXPECT_EQ(consumer.ReadWord(fence.slot().offset), kFencePoison);
  // A poisoned word is never reused, even though it is "reached".
  fence.Reset();
  EXPECT_EQ(table_.counts().retired, 1u);
  EXPECT_EQ(table_.counts().free, 0u);
}

TEST_F(FenceTableTest, PoisonUnreachedLeavesReachedFencesAlone) {
  ReservedFence reached = Reserve();
  ReservedFence pending = Reserve();
  testing::SharedMapping producer = Map(reached.slot(), /*writable=*/true);
  producer.WriteWord(reached.slot().offset, reached.slot().value);
  EXPECT_EQ(table_.PoisonUnreached(), 1u);
  EXPECT_EQ(reached.State(), FenceState::kReady);
  EXPECT_EQ(pending.State(), FenceState::kFailed);
  EXPECT_EQ(producer.ReadWord(pending.slot().offset), kFencePoison);
  EXPECT_EQ(table_.PoisonUnreached(), 0u);
}

TEST_F(FenceTableTest, ThousandsOfFencesGrowSegments) {
  constexpr std::size_t kFences = 5000;
  constexpr std::size_t kPerSegment = 4096 / kFenceWordBytes;
  std::vector<ReservedFence> fences;
  std::set<std::pair<std::uint64_t, std::uint64_t>> places;
  for (std::size_t i = 0; i < kFences; ++i) {
    fences.push_back(Reserve());
    const FenceSlot& slot = fences.back().slot();
    EXPECT_EQ(slot.offset % kFenceWordBytes, 0u);
    EXPECT_LT(slot.offset, slot.segment_size);
    places.emplace(slot.segment_id, slot.offset);
  }
  EXPECT_EQ(places.size(), kFences);
  const FenceTable::Counts counts = table_.counts();
  EXPECT_EQ(counts.in_use, kFences);
  EXPECT_EQ(counts.segments, (kFences + kPerSegment - 1) / kPerSegment);
  EXPECT_EQ(fences.back().slot().segment_id, kFirstId + counts.segments - 1);
  EXPECT_TRUE(table_.SegmentSize(kFirstId + counts.segments - 1).has_value());
  EXPECT_FALSE(table_.SegmentSize(kFirstId + counts.segments).has_value());
  fences.clear();
  EXPECT_EQ(table_.counts().in_use, 0u);
  EXPECT_EQ(table_.counts().retired, kFences);
}

TEST_F(FenceTableTest, OpenSegmentModesAreEnforcedByTheKernel) {
  ReservedFence fence = Reserve();
  auto read_only = table_.OpenSegment(fence.slot().segment_id, /*writable=*/false);
  ASSERT_OK(read_only);
  EXPECT_FALSE(read_only->writable);
  EXPECT_EQ(read_only->segment_size, 4096u);
  EXPECT_EQ(read_only->page_size, FenceTable::kPageSize);
  // A write mapping of the read-only descriptor is refused.
  errno = 0;
  void* refused = ::mmap(nullptr, read_only->segment_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                         read_only->fd.get(), 0);
  EXPECT_EQ(refused, MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  auto writable = table_.OpenSegment(fence.slot().segment_id, /*writable=*/true);
  ASSERT_OK(writable);
  EXPECT_TRUE(writable->writable);
  // Only the daemon's user may open the segment by name.
  struct stat info{};
  ASSERT_EQ(::fstat(writable->fd.get(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_ERROR(table_.OpenSegment(kFirstId + 1, false), StatusCode::kNotFound,
               {"is not a fence segment of pool cuda:0"});
  EXPECT_ERROR(table_.OpenSegment(1, false), StatusCode::kNotFound);
}

TEST_F(FenceTableTest, ABadPrefixFailsTheReservationAndLeavesNothing) {
  FenceTable bad(FenceTable::Options{.pool_name = "cuda:0", .shm_prefix = "no/slash"});
  EXPECT_ERROR(bad.Reserve(), StatusCode::kInvalidArgument, {"shm_prefix"});
  EXPECT_EQ(bad.counts().segments, 0u);
  EXPECT_EQ(bad.counts().in_use, 0u);
}

}  // namespace
}  // namespace hurray::daemon
