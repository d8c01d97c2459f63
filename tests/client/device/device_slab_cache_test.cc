// DeviceSlabCache over a fake DeviceMemoryMapper: the logic of importing, referencing and
// unmapping CUDA slabs, on the CPU.
#include "device/device_slab_cache.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray::client_internal {
namespace {

constexpr std::uint64_t kSlabBytes = 1 << 20;
constexpr std::string_view kUuid = "GPU-00000000-0000-0000-0000-000000000001";

// Records what the cache asked of the driver. Addresses are slab ids times 2^32.
class FakeMapper final : public DeviceMemoryMapper {
 public:
  struct Log {
    std::vector<std::uint64_t> imported;
    std::multiset<DeviceAddress> mapped;  // Mapped now.
    std::vector<DeviceAddress> unmapped;
    bool refuse_read_only = false;
    bool fail_import = false;
    std::uint64_t device_bytes = 8 * kSlabBytes;
  };
  explicit FakeMapper(std::shared_ptr<Log> log) : log_(std::move(log)) {}

  Result<int> DeviceOrdinalOf(std::string_view uuid) override {
    if (uuid == kUuid) return 0;
    return FailedPreconditionError(fmt::format("GPU {} is not visible to this process", uuid));
  }
  Result<std::uint64_t> DeviceMemoryBytes(int /*ordinal*/) override { return log_->device_bytes; }
  Result<MappedSlab> ImportAndMap(const SlabToImport& slab) override {
    if (log_->fail_import) return InternalError("cuMemMap: CUDA_ERROR_UNKNOWN");
    log_->imported.push_back(slab.segment_id);
    const DeviceAddress address = slab.segment_id << 32;
    log_->mapped.insert(address);
    return MappedSlab{.address = address,
                      .size = slab.size,
                      .kind = slab.kind,
                      .device_ordinal = slab.device_ordinal,
                      .read_only = slab.read_only && !log_->refuse_read_only};
  }
  void Unmap(const MappedSlab& slab) override {
    log_->mapped.erase(log_->mapped.find(slab.address));
    log_->unmapped.push_back(slab.address);
  }
  Result<DeviceAddress> RegisterHostMemory(void* host, std::uint64_t, int, bool) override {
    return reinterpret_cast<DeviceAddress>(host);
  }
  void UnregisterHostMemory(void*) override {}
  Status WaitValue(void*, int, DeviceAddress, std::uint64_t) override { return {}; }
  Status WriteValue(void*, int, DeviceAddress, std::uint64_t) override { return {}; }
  Result<void*> RecordEventAfterWait(int, DeviceAddress, std::uint64_t) override { return nullptr; }
  Status RelayValue(int, DeviceAddress, std::uint64_t, DeviceAddress, std::uint64_t) override {
    return {};
  }
  Status LaunchHostFunction(void*, int, void (*function)(void*), void* data) override {
    function(data);
    return {};
  }
  void DestroyEvent(void*) override {}

 private:
  std::shared_ptr<Log> log_;
};

class DeviceSlabCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<DeviceSlabCache> MakeCache(
      std::uint64_t cap, std::chrono::milliseconds idle_unmap = std::chrono::milliseconds(0)) {
    return std::make_unique<DeviceSlabCache>(
        std::make_unique<FakeMapper>(log_), cap,
        [this](std::uint64_t segment_id, bool writable) -> Result<client::GrantedSegment> {
          grants_.emplace_back(segment_id, writable);
          if (segment_id == kUnknownSlab) return NotFoundError("segment 99 is not granted");
          return client::GrantedSegment{
              .fd = UniqueFd(),
              .size = kSlabBytes,
              .writable = writable,
              .page_size = 2 << 20,
              .kind = v1::SEGMENT_KIND_CUDA_VMM,
              .device_uuid = std::string(segment_id == kOtherGpuSlab ? "GPU-other" : kUuid),
              .legacy_ipc_handle = {}};
        },
        [this](std::uint64_t segment_id, bool read_only, bool unmapped) {
          if (unmapped) {
            unmapped_reports_.push_back(segment_id);
          } else {
            reports_.emplace_back(segment_id, read_only);
          }
        },
        idle_unmap);
  }

  static constexpr std::uint64_t kUnknownSlab = 99;
  static constexpr std::uint64_t kOtherGpuSlab = 98;
  std::shared_ptr<FakeMapper::Log> log_ = std::make_shared<FakeMapper::Log>();
  std::vector<std::pair<std::uint64_t, bool>> grants_;
  std::vector<std::pair<std::uint64_t, bool>> reports_;
  std::vector<std::uint64_t> unmapped_reports_;
};

TEST_F(DeviceSlabCacheTest, ImportsEachSlabOncePerProcessForManyTensors) {
  auto cache = MakeCache(0);
  std::vector<SlabReference> tensors;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_OK_AND_ASSIGN(SlabReference reference,
                         cache->Acquire(1 + static_cast<std::uint64_t>(i % 2), false, "cuda:0"));
    tensors.push_back(std::move(reference));
  }
  EXPECT_EQ(log_->imported, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(grants_.size(), 2U);
  EXPECT_EQ(reports_, (std::vector<std::pair<std::uint64_t, bool>>{{1, true}, {2, true}}));
  EXPECT_EQ(tensors[0].address(), DeviceAddress{1} << 32);
  EXPECT_EQ(tensors[1].slab().device_uuid, kUuid);
  EXPECT_EQ(cache->mapped_bytes(0), 2 * kSlabBytes);
}

TEST_F(DeviceSlabCacheTest, ReadsShareAWritableMappingButWritesNeedTheirOwn) {
  auto cache = MakeCache(0);
  ASSERT_OK_AND_ASSIGN(SlabReference written, cache->Acquire(1, true, "cuda:0"));
  ASSERT_OK_AND_ASSIGN(SlabReference read, cache->Acquire(1, false, "cuda:0"));
  EXPECT_EQ(log_->imported.size(), 1U);
  EXPECT_FALSE(read.slab().read_only);
  EXPECT_EQ(reports_, (std::vector<std::pair<std::uint64_t, bool>>{{1, false}}));
}

TEST_F(DeviceSlabCacheTest, RecordsTheReadWriteFallbackWhenTheDriverRefusesReadOnly) {
  log_->refuse_read_only = true;
  auto cache = MakeCache(0);
  ASSERT_OK_AND_ASSIGN(SlabReference reference, cache->Acquire(1, false, "cuda:0"));
  EXPECT_FALSE(reference.slab().read_only);
  EXPECT_EQ(reports_, (std::vector<std::pair<std::uint64_t, bool>>{{1, false}}));
}

TEST_F(DeviceSlabCacheTest, UnmapsLeastRecentlyUsedUnreferencedSlabsBeyondTheCap) {
  auto cache = MakeCache(2 * kSlabBytes);
  ASSERT_OK_AND_ASSIGN(SlabReference first, cache->Acquire(1, false, "cuda:0"));
  ASSERT_OK_AND_ASSIGN(SlabReference second, cache->Acquire(2, false, "cuda:0"));
  first.Reset();   // 1 is now the least recently used...
  second.Reset();  // ...and 2 the most.
  EXPECT_TRUE(log_->unmapped.empty()) << "within the cap, released slabs stay mapped";
  ASSERT_OK_AND_ASSIGN(SlabReference third, cache->Acquire(3, false, "cuda:0"));
  EXPECT_EQ(log_->unmapped, (std::vector<DeviceAddress>{DeviceAddress{1} << 32}));
  // 2 is still cached: no new import.
  ASSERT_OK_AND_ASSIGN(SlabReference again, cache->Acquire(2, false, "cuda:0"));
  EXPECT_EQ(log_->imported, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(cache->mapped_bytes(0), 2 * kSlabBytes);
}

TEST_F(DeviceSlabCacheTest, NeverUnmapsAReferencedSlabEvenBeyondTheCap) {
  auto cache = MakeCache(kSlabBytes);
  ASSERT_OK_AND_ASSIGN(SlabReference first, cache->Acquire(1, false, "cuda:0"));
  ASSERT_OK_AND_ASSIGN(SlabReference second, cache->Acquire(2, false, "cuda:0"));
  ASSERT_OK_AND_ASSIGN(SlabReference third, cache->Acquire(3, false, "cuda:0"));
  EXPECT_TRUE(log_->unmapped.empty());
  EXPECT_EQ(cache->mapped_bytes(0), 3 * kSlabBytes);
  second.Reset();  // Over the cap: the one unreferenced slab goes at once.
  EXPECT_EQ(log_->unmapped, (std::vector<DeviceAddress>{DeviceAddress{2} << 32}));
  EXPECT_EQ(cache->mapped_slab_count(), 2U);
}

TEST_F(DeviceSlabCacheTest, TheDefaultCapIsTheDevicesMemory) {
  log_->device_bytes = 2 * kSlabBytes;
  auto cache = MakeCache(0);
  for (std::uint64_t slab = 1; slab <= 3; ++slab) {
    ASSERT_OK_AND_ASSIGN(SlabReference reference, cache->Acquire(slab, false, "cuda:0"));
  }
  EXPECT_EQ(log_->unmapped, (std::vector<DeviceAddress>{DeviceAddress{1} << 32}));
}

TEST_F(DeviceSlabCacheTest, TellsTheDaemonOfEachUnmapOnceTheProcessMapsTheSlabNoMore) {
  auto cache = MakeCache(kSlabBytes);
  {
    ASSERT_OK_AND_ASSIGN(SlabReference written, cache->Acquire(1, true, "cuda:0"));
    ASSERT_OK_AND_ASSIGN(SlabReference read, cache->Acquire(1, false, "cuda:0"));
  }
  ASSERT_OK_AND_ASSIGN(SlabReference second, cache->Acquire(2, false, "cuda:0"));
  // Over the cap, slab 1 went: the daemon hears so, and may release it once it is empty.
  EXPECT_EQ(unmapped_reports_, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(reports_, (std::vector<std::pair<std::uint64_t, bool>>{{1, false}, {2, true}}));
}

TEST_F(DeviceSlabCacheTest, IdleSlabsAreUnmappedAfterTheIdleTime) {
  auto cache = MakeCache(0, std::chrono::milliseconds(50));
  {
    ASSERT_OK_AND_ASSIGN(SlabReference first, cache->Acquire(1, false, "cuda:0"));
  }
  ASSERT_OK_AND_ASSIGN(SlabReference again, cache->Acquire(1, false, "cuda:0"));
  again.Reset();
  EXPECT_EQ(log_->imported.size(), 1U) << "an acquire within the idle time finds it";
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  ASSERT_OK_AND_ASSIGN(SlabReference other, cache->Acquire(2, false, "cuda:0"));
  EXPECT_EQ(log_->unmapped, (std::vector<DeviceAddress>{DeviceAddress{1} << 32}));
  EXPECT_EQ(unmapped_reports_, (std::vector<std::uint64_t>{1}));
  // A referenced slab is never idle.
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  ASSERT_OK_AND_ASSIGN(SlabReference third, cache->Acquire(3, false, "cuda:0"));
  EXPECT_EQ(log_->unmapped.size(), 1U);
}

TEST_F(DeviceSlabCacheTest, ARetiredCacheUnmapsWhatNothingHoldsNowAndTheRestAsItGoes) {
  auto cache = MakeCache(0);
  ASSERT_OK_AND_ASSIGN(SlabReference held, cache->Acquire(1, false, "cuda:0"));
  {
    ASSERT_OK_AND_ASSIGN(SlabReference dropped, cache->Acquire(2, false, "cuda:0"));
  }
  cache->Retire();
  EXPECT_EQ(log_->unmapped, (std::vector<DeviceAddress>{DeviceAddress{2} << 32}));
  held.Reset();
  EXPECT_EQ(log_->unmapped.size(), 2U);
  EXPECT_EQ(cache->mapped_slab_count(), 0U);
  // That daemon is gone: it is told nothing.
  EXPECT_TRUE(unmapped_reports_.empty());
}

TEST_F(DeviceSlabCacheTest, UnmapsEverythingWhenTheConnectionEnds) {
  auto cache = MakeCache(0);
  {
    ASSERT_OK_AND_ASSIGN(SlabReference first, cache->Acquire(1, false, "cuda:0"));
    ASSERT_OK_AND_ASSIGN(SlabReference second, cache->Acquire(2, true, "cuda:0"));
  }
  EXPECT_EQ(log_->mapped.size(), 2U);
  cache.reset();
  EXPECT_TRUE(log_->mapped.empty());
}

TEST_F(DeviceSlabCacheTest, AFailedImportLeavesNoState) {
  auto cache = MakeCache(0);
  log_->fail_import = true;
  EXPECT_ERROR(cache->Acquire(1, false, "cuda:0"), StatusCode::kInternal, {"cuMemMap"});
  EXPECT_ERROR(cache->Acquire(kUnknownSlab, false, "cuda:0"), StatusCode::kNotFound,
               {"segment 99"});
  EXPECT_EQ(cache->mapped_slab_count(), 0U);
  EXPECT_EQ(cache->mapped_bytes(0), 0U);
  EXPECT_TRUE(reports_.empty());
  log_->fail_import = false;
  ASSERT_OK_AND_ASSIGN(SlabReference reference, cache->Acquire(1, false, "cuda:0"));
  EXPECT_EQ(cache->import_count(), 1U);
}

TEST_F(DeviceSlabCacheTest, AnInvisibleGpuNamesThePool) {
  auto cache = MakeCache(0);
  EXPECT_ERROR(cache->Acquire(kOtherGpuSlab, false, "cuda:1"), StatusCode::kFailedPrecondition,
               {"pool cuda:1's GPU GPU-other is not visible to this process"});
  EXPECT_EQ(cache->mapped_slab_count(), 0U);
}

}  // namespace
}  // namespace hurray::client_internal
