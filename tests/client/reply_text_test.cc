// Tests of hurrayctl's rendering of CUDA pools and device tensors (hurrayctl/reply_text.h),
// from replies built here: no daemon, no GPU.
#include "hurrayctl/reply_text.h"

#include <gtest/gtest.h>

#include <string>

namespace hurray::ctl {
namespace {

v1::StatsResponse StatsWithACudaPool() {
  v1::StatsResponse stats;
  stats.add_pools()->set_kind("cpu");
  v1::PoolStats& pool = *stats.add_pools();
  pool.set_name("cuda:0");
  pool.set_kind("cuda");
  pool.set_device_uuid("GPU-6f3e2b1a-0c4d-4e5f-8a9b-0123456789ab");
  pool.set_device_name("NVIDIA H200");
  pool.set_device_ordinal(2);
  pool.set_mechanism("vmm");
  pool.set_slab_bytes(std::uint64_t{1} << 30);
  pool.set_slab_mappings(12);
  pool.set_read_only_slab_mappings(10);
  pool.set_fences_in_use(3);
  pool.set_fences_retired(1);
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
  v1::StatsResponse stats = StatsWithACudaPool();
  stats.mutable_pools(1)->set_gpu_direct_rdma(true);
  EXPECT_NE(RenderCudaPools(stats).find("  vmm, rdma  "), std::string::npos)
      << RenderCudaPools(stats);
}

TEST(RenderCudaPoolsTest, IsEmptyWithoutCudaPools) {
  v1::StatsResponse stats;
  stats.add_pools()->set_kind("cpu");
  EXPECT_EQ(RenderCudaPools(stats), "");
}

TEST(RenderDeviceAndHandoffTest, ShowsTheDeviceAndTheFenceOfAnEventHandoff) {
  v1::TensorInfo tensor;
  tensor.mutable_handoff()->set_sync_mode(1);
  v1::Fence& fence = *tensor.mutable_handoff()->mutable_fence();
  fence.set_segment_id(std::uint64_t{1} << 56);
  fence.set_offset(64);
  fence.set_value(7);
  EXPECT_EQ(RenderDeviceAndHandoff(tensor, DeviceTag::Cuda()),
            "device:     cuda\n"
            "handoff:    event (fence segment 72057594037927936 offset 64 value 7, not ready)\n");
  tensor.mutable_handoff()->set_ready(true);
  EXPECT_NE(RenderDeviceAndHandoff(tensor, DeviceTag::Cuda()).find(", ready)"), std::string::npos);
}

TEST(RenderDeviceAndHandoffTest, ShowsAProducerSyncedCpuTensor) {
  EXPECT_EQ(RenderDeviceAndHandoff(v1::TensorInfo(), DeviceTag::Cpu()),
            "device:     cpu\n"
            "handoff:    producer_synced\n");
}

}  // namespace
}  // namespace hurray::ctl
