// FenceTable: fence words in real shared memory, written and read through clients' mappings
// of the descriptors it grants, as a producer's and a consumer's GPU would.
#include "registry/fence_table.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <utility>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kFirstId = kFirstFenceSegmentId;

// A client's shared mapping of a whole fence segment, unmapped on destruction.
class Mapping {
 public:
  // Maps `access` read-write or read-only, as its descriptor allows.
  static Mapping Of(const SegmentAccess& access, bool writable) {
    void* base = ::mmap(nullptr, access.segment_size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                        MAP_SHARED, access.fd.get(), 0);
    EXPECT_NE(base, MAP_FAILED) << "mmap: errno " << errno;
    return Mapping(base == MAP_FAILED ? nullptr : base, access.segment_size);
  }
  Mapping(Mapping&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), size_(other.size_) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() {
    if (base_ != nullptr) ::munmap(base_, size_);
  }

  [[nodiscard]] std::uint64_t Read(const FenceSlot& slot) const {
    return std::atomic_ref<std::uint64_t>(*Word(slot)).load(std::memory_order_acquire);
  }
  // What a producer's cuStreamWriteValue64 does.
  void Write(const FenceSlot& slot, std::uint64_t value) const {
    std::atomic_ref<std::uint64_t>(*Word(slot)).store(value, std::memory_order_release);
  }

 private:
  Mapping(void* base, std::uint64_t size) : base_(base), size_(size) {}
  [[nodiscard]] std::uint64_t* Word(const FenceSlot& slot) const {
    return static_cast<std::uint64_t*>(base_) + slot.offset / kFenceWordBytes;
  }

  void* base_;
  std::uint64_t size_;
};

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

  Mapping Map(const FenceSlot& slot, bool writable) {
    auto access = table_.OpenSegment(slot.segment_id, writable);
    EXPECT_OK(access);
    return Mapping::Of(*access, writable);
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
  Mapping producer = Map(fence.slot(), /*writable=*/true);
  producer.Write(fence.slot(), fence.slot().value - 1);
  EXPECT_EQ(fence.State(), FenceState::kPending);
  producer.Write(fence.slot(), fence.slot().value);
  EXPECT_EQ(fence.State(), FenceState::kReady);
  producer.Write(fence.slot(), fence.slot().value + 5);
  EXPECT_EQ(fence.State(), FenceState::kReady);
  FenceTable::Poison(fence.slot());
  EXPECT_EQ(fence.State(), FenceState::kFailed);
}

TEST_F(FenceTableTest, ReachedWordIsReusedWithALargerValue) {
  ReservedFence first = Reserve();
  const FenceSlot used = first.slot();
  Mapping producer = Map(used, /*writable=*/true);
  // A producer may overshoot its value: the next one is above whatever the word holds.
  producer.Write(used, used.value + 41);
  first.Reset();
  EXPECT_EQ(table_.counts().in_use, 0u);
  EXPECT_EQ(table_.counts().free, 1u);
  ReservedFence second = Reserve();
  EXPECT_EQ(second.slot().segment_id, used.segment_id);
  EXPECT_EQ(second.slot().offset, used.offset);
  EXPECT_EQ(second.slot().value, used.value + 42);
  EXPECT_EQ(second.State(), FenceState::kPending);
  producer.Write(second.slot(), second.slot().value);
  second.Reset();
  ReservedFence third = Reserve();
  EXPECT_EQ(third.slot().offset, used.offset);
  EXPECT_GT(third.slot().value, used.value + 42);
  EXPECT_EQ(table_.counts().retired, 0u);
}

TEST_F(FenceTableTest, UnreachedWordIsPoisonedAndRetired) {
  ReservedFence fence = Reserve();
  const FenceSlot slot = fence.slot();
  Mapping consumer = Map(slot, /*writable=*/false);
  fence.Reset();
  EXPECT_EQ(consumer.Read(slot), kFencePoison);
  EXPECT_EQ(table_.counts().retired, 1u);
  EXPECT_EQ(table_.counts().in_use, 0u);
  EXPECT_EQ(table_.counts().free, 0u);
  ReservedFence next = Reserve();
  EXPECT_NE(next.slot().offset, slot.offset);
}

TEST_F(FenceTableTest, PoisonIsVisibleThroughAReadOnlyMapping) {
  ReservedFence fence = Reserve();
  Mapping consumer = Map(fence.slot(), /*writable=*/false);
  EXPECT_EQ(consumer.Read(fence.slot()), 0u);
  FenceTable::Poison(fence.slot());
  EXPECT_EQ(consumer.Read(fence.slot()), kFencePoison);
  // A poisoned word is never reused, even though it is "reached".
  fence.Reset();
  EXPECT_EQ(table_.counts().retired, 1u);
  EXPECT_EQ(table_.counts().free, 0u);
}

TEST_F(FenceTableTest, PoisonUnreachedLeavesReachedFencesAlone) {
  ReservedFence reached = Reserve();
  ReservedFence pending = Reserve();
  Mapping producer = Map(reached.slot(), /*writable=*/true);
  producer.Write(reached.slot(), reached.slot().value);
  EXPECT_EQ(table_.PoisonUnreached(), 1u);
  EXPECT_EQ(reached.State(), FenceState::kReady);
  EXPECT_EQ(pending.State(), FenceState::kFailed);
  EXPECT_EQ(producer.Read(pending.slot()), kFencePoison);
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
