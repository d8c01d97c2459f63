// ChooseCudaPools: the CUDA pools of made-up devices.
#include "pool/cuda_devices.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

CudaDeviceFacts H200(std::uint32_t ordinal) {
  return CudaDeviceFacts{.ordinal = ordinal,
                         .uuid = "GPU-6f3e2b1a-0c4d-4e5f-8a9b-0123456789ab",
                         .parent_uuid = "",
                         .name = "NVIDIA H200",
                         .total_memory_bytes = 143'771'287'552,
                         .vmm_supported = true,
                         .posix_fd_supported = true,
                         .granularity_bytes = 2 * kMiB};
}

const CudaPoolSizing kDefaults{.capacity_bytes = 0, .slab_bytes = 2 * kGiB};

TEST(ChooseCudaPoolsTest, NoDevicesGiveNoPools) {
  ASSERT_OK_AND_ASSIGN(const auto plans, ChooseCudaPools({}, kDefaults));
  EXPECT_TRUE(plans.empty());
}

TEST(ChooseCudaPoolsTest, VmmDeviceGetsHalfItsMemoryInSlabsOfTheConfiguredSize) {
  ASSERT_OK_AND_ASSIGN(const auto plans, ChooseCudaPools({H200(0), H200(1)}, kDefaults));
  ASSERT_EQ(plans.size(), 2u);
  const CudaPoolPlan& plan = plans[1];
  EXPECT_EQ(plan.name, "cuda:1");
  EXPECT_EQ(plan.mechanism, SlabMechanism::kVmm);
  EXPECT_EQ(plan.granularity_bytes, 2 * kMiB);
  EXPECT_EQ(plan.capacity_bytes, 143'771'287'552 / 2 / (2 * kMiB) * (2 * kMiB));
  EXPECT_EQ(plan.slab_bytes, 2 * kGiB);
  EXPECT_EQ(plan.first_segment_id, std::uint64_t{2} << 32);
  EXPECT_EQ(plans[0].first_segment_id, std::uint64_t{1} << 32);
  EXPECT_NE(plan.explanation.find("vmm"), std::string::npos) << plan.explanation;
}

TEST(ChooseCudaPoolsTest, DeviceWithoutPosixDescriptorsFallsBackToLegacyIpcSayingWhy) {
  CudaDeviceFacts device = H200(0);
  device.posix_fd_supported = false;
  device.granularity_bytes = 0;
  ASSERT_OK_AND_ASSIGN(const auto plans, ChooseCudaPools({device}, kDefaults));
  EXPECT_EQ(plans[0].mechanism, SlabMechanism::kLegacyIpc);
  EXPECT_EQ(plans[0].granularity_bytes, kLegacySlabGranularity);
  EXPECT_NE(plans[0].explanation.find("HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED 0"),
            std::string::npos)
      << plans[0].explanation;

  device = H200(0);
  device.vmm_supported = false;
  ASSERT_OK_AND_ASSIGN(const auto no_vmm, ChooseCudaPools({device}, kDefaults));
  EXPECT_EQ(no_vmm[0].mechanism, SlabMechanism::kLegacyIpc);
  EXPECT_NE(no_vmm[0].explanation.find("virtual memory management"), std::string::npos);
}

TEST(ChooseCudaPoolsTest, ALegacyDeviceOnADriverWithoutLegacyIpcIsRefusedSayingWhy) {
  CudaDeviceFacts device = H200(0);
  device.posix_fd_supported = false;
  device.granularity_bytes = 0;
  device.legacy_ipc_supported = false;
  const auto plans = ChooseCudaPools({device}, kDefaults);
  ASSERT_FALSE(plans.has_value());
  EXPECT_EQ(plans.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plans.error().message().find("no legacy IPC calls"), std::string::npos)
      << plans.error().message();
  // A VMM device does not need them.
  device = H200(0);
  device.legacy_ipc_supported = false;
  ASSERT_OK_AND_ASSIGN(const auto vmm, ChooseCudaPools({device}, kDefaults));
  EXPECT_EQ(vmm[0].mechanism, SlabMechanism::kVmm);
}

TEST(ChooseCudaPoolsTest, ADeviceWithoutStreamMemoryOperationsGetsAPoolThatSaysSo) {
  CudaDeviceFacts device = H200(0);
  device.stream_mem_ops_64 = false;
  ASSERT_OK_AND_ASSIGN(const auto plans, ChooseCudaPools({device}, kDefaults));
  EXPECT_NE(plans[0].explanation.find("CAN_USE_64_BIT_STREAM_MEM_OPS 0"), std::string::npos)
      << plans[0].explanation;
  ASSERT_OK_AND_ASSIGN(const auto with, ChooseCudaPools({H200(0)}, kDefaults));
  EXPECT_EQ(with[0].explanation.find("STREAM_MEM_OPS"), std::string::npos);
}

TEST(ChooseCudaPoolsTest, VmmSlabsAreGpuDirectRdmaCapableWhereTheDeviceSupportsIt) {
  CudaDeviceFacts device = H200(0);
  device.gpu_direct_rdma_with_vmm = true;
  ASSERT_OK_AND_ASSIGN(const auto capable, ChooseCudaPools({device}, kDefaults));
  EXPECT_TRUE(capable[0].gpu_direct_rdma);
  EXPECT_NE(capable[0].explanation.find("GPUDirect RDMA"), std::string::npos);
  device.gpu_direct_rdma_with_vmm = false;
  ASSERT_OK_AND_ASSIGN(const auto without, ChooseCudaPools({device}, kDefaults));
  EXPECT_FALSE(without[0].gpu_direct_rdma);
  // cuMemAlloc slabs take no such flag.
  device.gpu_direct_rdma_with_vmm = true;
  device.posix_fd_supported = false;
  ASSERT_OK_AND_ASSIGN(const auto legacy, ChooseCudaPools({device}, kDefaults));
  EXPECT_EQ(legacy[0].mechanism, SlabMechanism::kLegacyIpc);
  EXPECT_FALSE(legacy[0].gpu_direct_rdma);
}

TEST(ChooseCudaPoolsTest, SizesAreRoundedToTheGranularity) {
  CudaDeviceFacts device = H200(0);
  device.granularity_bytes = 32 * kMiB;
  ASSERT_OK_AND_ASSIGN(const auto plans, ChooseCudaPools({device}, {.capacity_bytes = 100 * kMiB,
                                                                    .slab_bytes = 33 * kMiB}));
  EXPECT_EQ(plans[0].capacity_bytes, 96 * kMiB);  // Down: never above what was asked.
  EXPECT_EQ(plans[0].slab_bytes, 64 * kMiB);      // Up: a whole number of granules.
}

TEST(ChooseCudaPoolsTest, SlabAboveTheCapacityIsCutToTheCapacity) {
  ASSERT_OK_AND_ASSIGN(const auto plans, ChooseCudaPools({H200(0)}, {.capacity_bytes = kGiB,
                                                                     .slab_bytes = 2 * kGiB}));
  EXPECT_EQ(plans[0].slab_bytes, kGiB);
  EXPECT_NE(plans[0].explanation.find("slabs of 1 GiB"), std::string::npos) << plans[0].explanation;
}

TEST(ChooseCudaPoolsTest, CapacityAboveTheDeviceMemoryIsCutToIt) {
  CudaDeviceFacts device = H200(0);
  device.total_memory_bytes = 10 * kGiB;
  ASSERT_OK_AND_ASSIGN(const auto plans,
                       ChooseCudaPools({device}, {.capacity_bytes = 64 * kGiB, .slab_bytes = 0}));
  EXPECT_EQ(plans[0].capacity_bytes, 10 * kGiB);
  EXPECT_EQ(plans[0].slab_bytes, 2 * kMiB);  // 0: one granule.
  EXPECT_NE(plans[0].explanation.find("above the device's memory"), std::string::npos);
}

TEST(ChooseCudaPoolsTest, CapacityBelowOneGranuleIsRefusedNamingTheDevice) {
  EXPECT_ERROR(ChooseCudaPools({H200(3)}, {.capacity_bytes = kMiB, .slab_bytes = kGiB}),
               StatusCode::kInvalidArgument, {"cuda:3", "GPU-6f3e2b1a", "capacity 1048576"});
}

TEST(ChooseCudaPoolsTest, MigInstanceIsDescribedWithItsGpu) {
  CudaDeviceFacts device = H200(0);
  device.uuid = "MIG-11111111-2222-3333-4444-555555555555";
  device.parent_uuid = "GPU-6f3e2b1a-0c4d-4e5f-8a9b-0123456789ab";
  ASSERT_OK_AND_ASSIGN(const auto plans, ChooseCudaPools({device}, kDefaults));
  const std::string description = DescribeCudaPoolPlan(plans[0]);
  EXPECT_NE(description.find("pool cuda:0 on MIG-11111111-2222-3333-4444-555555555555 of "
                             "GPU-6f3e2b1a-0c4d-4e5f-8a9b-0123456789ab (NVIDIA H200"),
            std::string::npos)
      << description;
  EXPECT_NE(description.find("slabs of 2 GiB"), std::string::npos) << description;
}

}  // namespace
}  // namespace hurray::daemon
