// Tests of hurrayctl's rendering of CUDA pools and device tensors (hurrayctl/reply_text.h),
// from values built here: no daemon, no GPU.
#include "hurrayctl/reply_text.h"

#include <gtest/gtest.h>

#include <string>

namespace hurray::ctl {
namespace {

DaemonStats StatsWithACudaPool() {
  DaemonStats stats;
  stats.pools.push_back(PoolStats{.name = "cpu", .kind = "cpu"});
  stats.pools.push_back(PoolStats{.name = "cuda:0",
                                  .kind = "cuda",
                                  .device_uuid = "GPU-6f3e2b1a-0c4d-4e5f-8a9b-0123456789ab",
                                  .device_name = "NVIDIA H200",
                                  .device_ordinal = 2,
                                  .mechanism = "vmm",
                                  .slab_bytes = std::uint64_t{1} << 30,
                                  .slab_mappings = 12,
                                  .read_only_slab_mappings = 10,
                                  .fences_in_use = 3,
                                  .fences_retired = 1});
  return stats;
}

TEST(RenderCudaPoolsTest, ShowsEachCudaPoolsGpuMechanismSlabsAndFences) {
  const std::string text = RenderCudaPools(StatsWithACudaPool());
  EXPECT_EQ(text,
            "cuda pools:\n"
            "  POOL    GPU                                       DEVICE                          "
            "MECHANISM  SLAB     SLAB MAPPINGS  READ-ONLY  FENCES IN USE  FENCES RETIRED\n"
            "  cuda:0  GPU-6f3e2b1a-0c4d-4e5f-8a9b-0123456789ab  NVIDIA H200 (daemon ordinal 2)  "
            "vmm        1.0 GiB  12             10         3              1\n");
}

TEST(RenderCudaPoolsTest, SaysWhenSlabsAreGpuDirectRdmaCapable) {
  DaemonStats stats = StatsWithACudaPool();
  stats.pools[1].gpu_direct_rdma = true;
  EXPECT_NE(RenderCudaPools(stats).find("  vmm, rdma  "), std::string::npos)
      << RenderCudaPools(stats);
}

TEST(RenderCudaPoolsTest, IsEmptyWithoutCudaPools) {
  DaemonStats stats;
  stats.pools.push_back(PoolStats{.name = "cpu", .kind = "cpu"});
  EXPECT_EQ(RenderCudaPools(stats), "");
}

TensorDetails TensorOn(DeviceTag device_tag) {
  return TensorDetails{.descriptor =
                           *TensorDescriptor::Dense(ElementType::kFloat32, {4}, device_tag)};
}

TEST(RenderDeviceAndHandoffTest, ShowsTheDeviceAndTheFenceOfAnEventHandoff) {
  TensorDetails tensor = TensorOn(DeviceTag::Cuda());
  tensor.sync_mode = SyncMode::kEvent;
  tensor.fence = FenceLocation{.segment_id = std::uint64_t{1} << 56, .offset = 64, .value = 7};
  EXPECT_EQ(RenderDeviceAndHandoff(tensor),
            "device:     cuda\n"
            "handoff:    event (fence segment 72057594037927936 offset 64 value 7, not ready)\n");
  tensor.ready = true;
  EXPECT_NE(RenderDeviceAndHandoff(tensor).find(", ready)"), std::string::npos);
}

TEST(RenderDeviceAndHandoffTest, ShowsAProducerSyncedCpuTensor) {
  EXPECT_EQ(RenderDeviceAndHandoff(TensorOn(DeviceTag::Cpu())),
            "device:     cpu\n"
            "handoff:    producer_synced\n");
}

}  // namespace
}  // namespace hurray::ctl
