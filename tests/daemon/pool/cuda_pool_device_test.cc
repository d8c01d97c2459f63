// CudaPool over the real CudaSlabMemory, on the devices this host has. Label cuda: skips
// without the NVIDIA driver or a device.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <vector>

#include "hurray/cuda/driver.h"
#include "pool/cuda_devices.h"
#include "pool/cuda_pool.h"
#include "pool/cuda_slab_memory.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

class CudaPoolDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto driver = cuda::LoadDriver();
    if (!driver) GTEST_SKIP() << "no CUDA driver: " << driver.error().message();
    driver_ = *driver;
    ASSERT_OK_AND_ASSIGN(devices_, ReadCudaDevices(*driver_));
    if (devices_.empty()) GTEST_SKIP() << "the driver shows no CUDA device";
    ASSERT_OK_AND_ASSIGN(
        plans_, ChooseCudaPools(devices_, {.capacity_bytes = 256 * kMiB, .slab_bytes = 64 * kMiB}));
  }

  // The pool of device 0, as the daemon makes it.
  std::unique_ptr<CudaPool> MakePool() {
    const CudaPoolPlan& plan = plans_.front();
    auto memory = CudaSlabMemory::Create(*driver_, plan);
    EXPECT_OK(memory);
    if (!memory) return nullptr;
    auto pool = CudaPool::Create(CudaPool::Options{.name = plan.name,
                                                   .capacity_bytes = plan.capacity_bytes,
                                                   .slab_bytes = plan.slab_bytes,
                                                   .first_segment_id = plan.first_segment_id,
                                                   .idle_slab_release = 1s,
                                                   .device_uuid = plan.device.uuid,
                                                   .device_name = plan.device.name,
                                                   .device_ordinal = plan.device.ordinal},
                                 std::move(*memory));
    EXPECT_OK(pool);
    return pool ? std::move(*pool) : nullptr;
  }

  const cuda::DriverApi* driver_ = nullptr;
  std::vector<CudaDeviceFacts> devices_;
  std::vector<CudaPoolPlan> plans_;
};

TEST_F(CudaPoolDeviceTest, DevicesAreNamedByUuidAndDescribed) {
  for (const CudaDeviceFacts& device : devices_) {
    SCOPED_TRACE(device.uuid);
    EXPECT_TRUE(device.uuid.starts_with("GPU-") || device.uuid.starts_with("MIG-"));
    EXPECT_EQ(device.uuid.size(), 40u);
    EXPECT_EQ(device.parent_uuid.empty(), device.uuid.starts_with("GPU-"));
    EXPECT_FALSE(device.name.empty());
    EXPECT_GT(device.total_memory_bytes, 0u);
    if (device.vmm_supported && device.posix_fd_supported) {
      EXPECT_TRUE(std::has_single_bit(device.granularity_bytes)) << device.granularity_bytes;
    }
  }
  for (const CudaPoolPlan& plan : plans_) std::cout << DescribeCudaPoolPlan(plan) << "\n";
}

TEST_F(CudaPoolDeviceTest, SlabsAreMadeExportedAndReleased) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange small, pool->Allocate(kMiB));
  ASSERT_OK_AND_ASSIGN(const PoolRange large, pool->Allocate(100 * kMiB));
  EXPECT_NE(small.segment_id, large.segment_id);
  EXPECT_EQ(pool->Usage().segment_count, 2u);
  ASSERT_OK_AND_ASSIGN(const SegmentAccess first, pool->OpenSegment(small.segment_id, true));
  ASSERT_OK_AND_ASSIGN(const SegmentAccess second, pool->OpenSegment(small.segment_id, false));
  EXPECT_EQ(first.segment_size, pool->slab_bytes());
  if (pool->mechanism() == SlabMechanism::kVmm) {
    ASSERT_TRUE(first.fd.valid());
    ASSERT_TRUE(second.fd.valid());
    EXPECT_NE(first.fd.get(), second.fd.get());
    // The descriptor names the slab's memory: it imports as an allocation of the device.
    CUmemGenericAllocationHandle imported = 0;
    ASSERT_OK(cuda::CheckCuda(
        *driver_, "cuMemImportFromShareableHandle",
        driver_->MemImportFromShareableHandle(
            // NOLINTNEXTLINE(performance-no-int-to-ptr): the driver takes the fd as a void*.
            &imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(first.fd.get())),
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)));
    EXPECT_OK(cuda::CheckCuda(*driver_, "cuMemRelease", driver_->MemRelease(imported)));
  } else {
    EXPECT_FALSE(first.fd.valid());
    EXPECT_EQ(first.legacy_ipc_handle.size(), kLegacyIpcHandleBytes);
  }
  pool->Free(small);
  pool->Free(large);
  EXPECT_EQ(pool->ReleaseIdleSlabs(std::chrono::steady_clock::now() + 1h), 2u);
  EXPECT_EQ(pool->Usage().segment_count, 0u);
}

TEST_F(CudaPoolDeviceTest, SlabsAreGpuDirectRdmaCapableWhereTheDeviceSupportsIt) {
  const CudaPoolPlan& plan = plans_.front();
  EXPECT_EQ(plan.gpu_direct_rdma,
            plan.mechanism == SlabMechanism::kVmm && plan.device.gpu_direct_rdma_with_vmm);
  if (plan.mechanism != SlabMechanism::kVmm) GTEST_SKIP() << "a legacy pool: cuMemAlloc slabs";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaSlabMemory> memory,
                       CudaSlabMemory::Create(*driver_, plan));
  EXPECT_EQ(memory->gpu_direct_rdma(), plan.gpu_direct_rdma);
  ASSERT_OK_AND_ASSIGN(const std::uint64_t handle, memory->Create(plan.slab_bytes));
  decltype(&::cuMemGetAllocationPropertiesFromHandle) get_properties = nullptr;
  ASSERT_OK(
      cuda::ResolveDriverEntryPoint("cuMemGetAllocationPropertiesFromHandle", get_properties));
  CUmemAllocationProp properties{};
  const CUresult got =
      get_properties(&properties, static_cast<CUmemGenericAllocationHandle>(handle));
  memory->Release(handle);
  ASSERT_OK(cuda::CheckCuda(*driver_, "cuMemGetAllocationPropertiesFromHandle", got));
  EXPECT_EQ(properties.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(properties.allocFlags.gpuDirectRDMACapable, plan.gpu_direct_rdma ? 1 : 0);
  std::cout << plan.name << ": GPUDirect RDMA capable slabs: " << plan.gpu_direct_rdma << "\n";
}

}  // namespace
}  // namespace hurray::daemon
