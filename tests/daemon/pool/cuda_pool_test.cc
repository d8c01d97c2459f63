// CudaPool's slab accounting on the CPU, with FakeSlabMemory standing in for the device.
#include "pool/cuda_pool.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "fake_slab_memory.h"
#include "pool/pool_set.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

using namespace std::chrono_literals;
using testing::FakeSlabMemory;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGranularity = 2 * kMiB;
constexpr std::uint64_t kFirstSlab = std::uint64_t{1} << 32;

class CudaPoolTest : public ::testing::Test {
 protected:
  static CudaPool::Options DefaultOptions() {
    return CudaPool::Options{.name = "cuda:0",
                             .capacity_bytes = 32 * kMiB,
                             .slab_bytes = 8 * kMiB,
                             .first_segment_id = kFirstSlab,
                             .idle_slab_release = 1h,
                             .device_uuid = "GPU-00112233-4455-6677-8899-aabbccddeeff",
                             .device_name = "Fake GPU",
                             .device_ordinal = 0};
  }

  std::unique_ptr<CudaPool> MakePool(CudaPool::Options options = DefaultOptions(),
                                     SlabMechanism mechanism = SlabMechanism::kVmm) {
    auto pool = CudaPool::Create(std::move(options),
                                 std::make_unique<FakeSlabMemory>(state_, mechanism, kGranularity));
    EXPECT_OK(pool);
    return pool ? std::move(*pool) : nullptr;
  }

  std::uint64_t LiveSlabs() const {
    const std::lock_guard lock(state_.mutex);
    return state_.slabs.size();
  }
  std::uint64_t Releases() const {
    const std::lock_guard lock(state_.mutex);
    return state_.releases;
  }

  FakeSlabMemory::State state_;
};

TEST_F(CudaPoolTest, StartsWithoutSlabsAndGrowsOnDemand) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(LiveSlabs(), 0u);
  EXPECT_EQ(pool->Usage().segment_count, 0u);
  ASSERT_OK_AND_ASSIGN(const PoolRange first, pool->Allocate(4 * kMiB));
  ASSERT_OK_AND_ASSIGN(const PoolRange second, pool->Allocate(4 * kMiB));
  EXPECT_EQ(first.segment_id, kFirstSlab);
  EXPECT_EQ(second.segment_id, kFirstSlab);
  EXPECT_EQ(LiveSlabs(), 1u);
  ASSERT_OK_AND_ASSIGN(const PoolRange third, pool->Allocate(1));
  EXPECT_EQ(third.segment_id, kFirstSlab + 1);
  EXPECT_EQ(LiveSlabs(), 2u);
  EXPECT_EQ(pool->SegmentSize(kFirstSlab), 8 * kMiB);
}

TEST_F(CudaPoolTest, OffsetsAreMultiplesOf4096) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->page_size(), 4096u);
  EXPECT_EQ(pool->device_tag(), DeviceTag::Cuda());
  for (const std::uint64_t size : {1ul, 4095ul, 4097ul, 12345ul, 1ul}) {
    ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(size));
    EXPECT_EQ(range.offset % 4096, 0u) << size;
    EXPECT_EQ(range.size, size);
  }
  EXPECT_EQ(pool->Usage().used_bytes, 4096u * (1 + 1 + 2 + 4 + 1));
}

TEST_F(CudaPoolTest, CapacityIsNeverExceeded) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  for (int i = 0; i < 4; ++i) ASSERT_OK(pool->Allocate(8 * kMiB));
  EXPECT_ERROR(pool->Allocate(1), StatusCode::kResourceExhausted,
               {"pool cuda:0", "no room for 1 bytes", "capacity 33554432", "4 slabs"});
  EXPECT_ERROR(pool->Allocate(33 * kMiB), StatusCode::kResourceExhausted,
               {"pool cuda:0", "byte_size 34603008", "capacity 33554432"});
  EXPECT_EQ(LiveSlabs(), 4u);
}

TEST_F(CudaPoolTest, LastSlabTakesWhatTheCapacityLeaves) {
  CudaPool::Options options = DefaultOptions();
  options.capacity_bytes = 12 * kMiB;
  auto pool = MakePool(options);
  ASSERT_NE(pool, nullptr);
  ASSERT_OK(pool->Allocate(8 * kMiB));
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(3 * kMiB));
  EXPECT_EQ(pool->SegmentSize(range.segment_id), 4 * kMiB);
  EXPECT_ERROR(pool->Allocate(2 * kMiB), StatusCode::kResourceExhausted, {"no room"});
}

TEST_F(CudaPoolTest, BufferLargerThanASlabGetsASlabOfItsOwn) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange large, pool->Allocate(9 * kMiB + 1));
  EXPECT_EQ(large.offset, 0u);
  EXPECT_EQ(pool->SegmentSize(large.segment_id), 10 * kMiB);  // Rounded to the granularity.
  // The slab's tail serves small buffers.
  ASSERT_OK_AND_ASSIGN(const PoolRange small, pool->Allocate(4096));
  EXPECT_EQ(small.segment_id, large.segment_id);
  EXPECT_EQ(LiveSlabs(), 1u);
}

TEST_F(CudaPoolTest, EmptySlabIsReleasedOnlyAfterTheIdleTime) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(kMiB));
  pool->Free(range);
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ(pool->ReleaseIdleSlabs(now), 0u);
  EXPECT_EQ(LiveSlabs(), 1u);
  EXPECT_EQ(pool->ReleaseIdleSlabs(now + 2h), 1u);
  EXPECT_EQ(LiveSlabs(), 0u);
  EXPECT_EQ(Releases(), 1u);
  EXPECT_EQ(pool->SegmentSize(range.segment_id), std::nullopt);
  EXPECT_ERROR(pool->OpenSegment(range.segment_id, false), StatusCode::kNotFound,
               {"segment 4294967296 is not in pool cuda:0"});
  // Ids are never reused: a client's import of the old slab is never taken for the new.
  ASSERT_OK_AND_ASSIGN(const PoolRange next, pool->Allocate(kMiB));
  EXPECT_EQ(next.segment_id, kFirstSlab + 1);
}

TEST_F(CudaPoolTest, ReusedSlabStartsItsIdleTimeAgain) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange first, pool->Allocate(kMiB));
  pool->Free(first);
  ASSERT_OK_AND_ASSIGN(const PoolRange second, pool->Allocate(kMiB));
  EXPECT_EQ(second.segment_id, first.segment_id);
  EXPECT_EQ(pool->ReleaseIdleSlabs(std::chrono::steady_clock::now() + 2h), 0u);
}

TEST_F(CudaPoolTest, SlabWithLiveRangesIsNeverReleased) {
  CudaPool::Options options = DefaultOptions();
  options.idle_slab_release = 0ms;
  auto pool = MakePool(options);
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange kept, pool->Allocate(kMiB));
  ASSERT_OK_AND_ASSIGN(const PoolRange freed, pool->Allocate(kMiB));
  pool->Free(freed);
  EXPECT_EQ(pool->ReleaseIdleSlabs(std::chrono::steady_clock::now() + 24h), 0u);
  EXPECT_EQ(LiveSlabs(), 1u);
  EXPECT_EQ(pool->SegmentSize(kept.segment_id), 8 * kMiB);
  pool->Free(kept);
  EXPECT_EQ(pool->ReleaseIdleSlabs(std::chrono::steady_clock::now()), 1u);
}

TEST_F(CudaPoolTest, EmptySlabAClientStillMapsIsNotReleased) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(kMiB));
  pool->Free(range);
  const auto later = std::chrono::steady_clock::now() + 2h;
  // A client process maps it (Registry::MappedSlabs): its memory is not freed while mapped.
  EXPECT_EQ(pool->ReleaseIdleSlabs(later, {range.segment_id}), 0u);
  EXPECT_EQ(LiveSlabs(), 1u);
  EXPECT_EQ(pool->SegmentSize(range.segment_id), 8 * kMiB);
  // Unmapped by then, it goes at the next look.
  EXPECT_EQ(pool->ReleaseIdleSlabs(later, {}), 1u);
  EXPECT_EQ(Releases(), 1u);
}

TEST_F(CudaPoolTest, DoubleAndForeignFreesAreIgnored) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(kMiB));
  ASSERT_OK_AND_ASSIGN(const PoolRange other, pool->Allocate(kMiB));
  pool->Free(range);
  pool->Free(range);
  pool->Free(PoolRange{.segment_id = 7, .offset = 0, .size = kMiB});
  pool->Free(PoolRange{});
  EXPECT_EQ(pool->Usage().allocation_count, 1u);
  EXPECT_EQ(pool->Usage().used_bytes, kMiB);
  pool->Free(other);
  EXPECT_EQ(pool->Usage().allocation_count, 0u);
}

TEST_F(CudaPoolTest, VmmSlabIsExportedAsAFreshDescriptorEachTime) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(kMiB));
  ASSERT_OK_AND_ASSIGN(const SegmentAccess first, pool->OpenSegment(range.segment_id, true));
  ASSERT_OK_AND_ASSIGN(const SegmentAccess second, pool->OpenSegment(range.segment_id, false));
  ASSERT_TRUE(first.fd.valid());
  ASSERT_TRUE(second.fd.valid());
  EXPECT_NE(first.fd.get(), second.fd.get());
  EXPECT_EQ(first.kind, SegmentKind::kCudaVmm);
  EXPECT_EQ(first.segment_size, 8 * kMiB);
  EXPECT_EQ(first.page_size, kGranularity);
  EXPECT_TRUE(first.writable);
  EXPECT_FALSE(second.writable);
  EXPECT_EQ(first.device_uuid, DefaultOptions().device_uuid);
  EXPECT_TRUE(first.legacy_ipc_handle.empty());
  struct stat status{};
  ASSERT_EQ(::fstat(first.fd.get(), &status), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(status.st_size), 8 * kMiB);
}

TEST_F(CudaPoolTest, LegacySlabIsExportedAsHandleBytesWithoutADescriptor) {
  auto pool = MakePool(DefaultOptions(), SlabMechanism::kLegacyIpc);
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(kMiB));
  ASSERT_OK_AND_ASSIGN(const SegmentAccess access, pool->OpenSegment(range.segment_id, false));
  EXPECT_FALSE(access.fd.valid());
  EXPECT_EQ(access.kind, SegmentKind::kCudaLegacyIpc);
  EXPECT_EQ(access.legacy_ipc_handle.size(), kLegacyIpcHandleBytes);
  EXPECT_EQ(pool->Usage().mechanism, "legacy_ipc");
}

TEST_F(CudaPoolTest, ExportFailureIsAnErrorNamingPoolAndSlab) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(kMiB));
  {
    const std::lock_guard lock(state_.mutex);
    state_.fail_exports = true;
  }
  EXPECT_ERROR(pool->OpenSegment(range.segment_id, false), StatusCode::kInternal,
               {"pool cuda:0", "slab 4294967296", "cuMemExportToShareableHandle"});
}

TEST_F(CudaPoolTest, DeviceOutOfMemoryIsReportedAndLeavesNoSlab) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  {
    const std::lock_guard lock(state_.mutex);
    state_.create_failures = 1;
  }
  EXPECT_ERROR(pool->Allocate(kMiB), StatusCode::kResourceExhausted,
               {"pool cuda:0", "new slab of 8388608 bytes", "CUDA_ERROR_OUT_OF_MEMORY"});
  EXPECT_EQ(pool->Usage().segment_count, 0u);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(kMiB));
  EXPECT_EQ(range.segment_id, kFirstSlab);
}

TEST_F(CudaPoolTest, UsageReportsSlabsSpaceAndDevice) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK(pool->Allocate(8 * kMiB));
  ASSERT_OK(pool->Allocate(3 * kMiB));
  const PoolUsage usage = pool->Usage();
  EXPECT_EQ(usage.name, "cuda:0");
  EXPECT_EQ(usage.kind, "cuda");
  EXPECT_EQ(usage.capacity_bytes, 32 * kMiB);
  EXPECT_EQ(usage.used_bytes, 11 * kMiB);
  EXPECT_EQ(usage.segment_count, 2u);
  EXPECT_EQ(usage.allocation_count, 2u);
  EXPECT_EQ(usage.page_size, 4096u);
  EXPECT_EQ(usage.huge_pages, "");
  // 16 MiB of the capacity are in no slab yet: a buffer that large still fits.
  EXPECT_EQ(usage.largest_free_bytes, 16 * kMiB);
  EXPECT_DOUBLE_EQ(usage.fragmentation, 0.0);  // The only free space in slabs is one range.
  EXPECT_EQ(usage.device_uuid, DefaultOptions().device_uuid);
  EXPECT_EQ(usage.device_name, "Fake GPU");
  EXPECT_EQ(usage.device_ordinal, 0u);
  EXPECT_EQ(usage.mechanism, "vmm");
  EXPECT_EQ(usage.slab_bytes, 8 * kMiB);
  EXPECT_FALSE(usage.gpu_direct_rdma);
}

TEST_F(CudaPoolTest, UsageSaysWhenSlabsAreGpuDirectRdmaCapable) {
  auto pool = CudaPool::Create(
      DefaultOptions(), std::make_unique<FakeSlabMemory>(state_, SlabMechanism::kVmm, kGranularity,
                                                         /*gpu_direct_rdma=*/true));
  ASSERT_OK(pool);
  EXPECT_TRUE((*pool)->Usage().gpu_direct_rdma);
}

TEST_F(CudaPoolTest, SlabSizeIsRoundedUpToTheGranularity) {
  CudaPool::Options options = DefaultOptions();
  options.slab_bytes = 3 * kMiB;
  auto pool = MakePool(options);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->slab_bytes(), 4 * kMiB);
}

TEST_F(CudaPoolTest, CreateRefusesBadOptionsNamingThem) {
  const auto create = [this](CudaPool::Options options, std::uint64_t granularity = kGranularity) {
    return CudaPool::Create(std::move(options), std::make_unique<FakeSlabMemory>(
                                                    state_, SlabMechanism::kVmm, granularity));
  };
  CudaPool::Options options = DefaultOptions();
  options.capacity_bytes = kMiB;
  EXPECT_ERROR(create(options), StatusCode::kInvalidArgument, {"capacity 1048576", "granule"});
  options = DefaultOptions();
  options.slab_bytes = 0;
  EXPECT_ERROR(create(options), StatusCode::kInvalidArgument, {"slab_size 0"});
  options = DefaultOptions();
  options.first_segment_id = 0;
  EXPECT_ERROR(create(options), StatusCode::kInvalidArgument, {"first_segment_id 0"});
  options = DefaultOptions();
  options.device_uuid.clear();
  EXPECT_ERROR(create(options), StatusCode::kInvalidArgument, {"device_uuid"});
  EXPECT_ERROR(create(DefaultOptions(), 3000), StatusCode::kInvalidArgument, {"granularity 3000"});
  EXPECT_ERROR(create(DefaultOptions(), 8 * kMiB / 4 * 3), StatusCode::kInvalidArgument,
               {"not a power of two"});
  EXPECT_ERROR(CudaPool::Create(DefaultOptions(), nullptr), StatusCode::kInvalidArgument);
}

TEST_F(CudaPoolTest, DestroyingThePoolReleasesEverySlab) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK(pool->Allocate(8 * kMiB));
  ASSERT_OK(pool->Allocate(8 * kMiB));
  EXPECT_EQ(LiveSlabs(), 2u);
  pool.reset();
  EXPECT_EQ(LiveSlabs(), 0u);
  EXPECT_EQ(Releases(), 2u);
}

TEST(PoolSetTest, CudaPoolNamesSayWhyThereAreNoCudaPools) {
  PoolSet pools;
  EXPECT_ERROR(pools.Resolve("cuda:0"), StatusCode::kNotFound, {"pool \"cuda:0\" does not exist"});
  pools.SetCudaUnavailableReason("the NVIDIA driver is not installed (dlopen libcuda.so.1: x)");
  EXPECT_ERROR(pools.Resolve("cuda:0"), StatusCode::kFailedPrecondition,
               {"pool cuda:0: no CUDA pools: the NVIDIA driver is not installed"});
  EXPECT_ERROR(pools.Resolve("cuda"), StatusCode::kFailedPrecondition, {"pool cuda: no CUDA"});
  EXPECT_ERROR(pools.Resolve("cudax"), StatusCode::kNotFound, {"pool \"cudax\" does not exist"});
}

TEST(PoolSetTest, CudaPoolsAreFoundByNameAndSegment) {
  FakeSlabMemory::State state;
  auto pool =
      CudaPool::Create(CudaPool::Options{.name = "cuda:1",
                                         .capacity_bytes = 8 * kMiB,
                                         .slab_bytes = 8 * kMiB,
                                         .first_segment_id = std::uint64_t{2} << 32,
                                         .device_uuid = "GPU-1"},
                       std::make_unique<FakeSlabMemory>(state, SlabMechanism::kVmm, kGranularity));
  ASSERT_OK(pool);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, (*pool)->Allocate(kMiB));
  PoolSet pools;
  pools.Add(std::move(*pool));
  ASSERT_OK_AND_ASSIGN(Pool* const found, pools.Resolve("cuda:1"));
  EXPECT_EQ(found->name(), "cuda:1");
  EXPECT_EQ(pools.FindBySegment(range.segment_id), found);
  EXPECT_EQ(pools.FindBySegment(range.segment_id + 1), nullptr);
}

}  // namespace
}  // namespace hurray::daemon
