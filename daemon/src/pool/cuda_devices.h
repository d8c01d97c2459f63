// The CUDA devices the daemon sees, and the CUDA pools it makes of them: the facts are
// gathered from the driver (ReadCudaDevices, only with CUDA support built), the choice is a
// pure function of them (ChooseCudaPools), so that any host can be described in a test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hurray/error.h"
#include "pool/slab_memory.h"

#if HURRAY_HAVE_CUDA
#include "hurray/cuda/driver.h"
#endif

namespace hurray::daemon {

// What the driver says about one device.
struct CudaDeviceFacts {
  // The daemon's CUDA ordinal (which depends on its CUDA_VISIBLE_DEVICES).
  std::uint32_t ordinal = 0;
  // "GPU-<uuid>", or "MIG-<uuid>" for a MIG instance.
  std::string uuid;
  // A MIG instance's physical GPU, "GPU-<uuid>"; empty for a whole GPU.
  std::string parent_uuid;
  std::string name;  // "NVIDIA H200".
  std::uint64_t total_memory_bytes = 0;
  // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED.
  bool vmm_supported = false;
  // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED.
  bool posix_fd_supported = false;
  // cuMemGetAllocationGranularity (MINIMUM) of pinned device memory exportable as a POSIX
  // descriptor; 0 when the device cannot export descriptors.
  std::uint64_t granularity_bytes = 0;
  // The driver has the legacy IPC calls (cuIpc*MemHandle), which a legacy pool needs.
  bool legacy_ipc_supported = true;
  // CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: cuStreamWaitValue64/WriteValue64,
  // which every Event handoff uses.
  bool stream_mem_ops_64 = true;
  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: cuMemCreate takes
  // allocFlags.gpuDirectRDMACapable, which lets a NIC reach the memory.
  bool gpu_direct_rdma_with_vmm = false;

  friend bool operator==(const CudaDeviceFacts&, const CudaDeviceFacts&) = default;
};

// The [cuda_pool] sizes that apply to every device.
struct CudaPoolSizing {
  // Most bytes of slabs per pool; 0: half of the device's memory.
  std::uint64_t capacity_bytes = 0;
  // Bytes of a slab, rounded up to the granularity (0: one granule).
  std::uint64_t slab_bytes = 0;
};

// One CUDA pool to make.
struct CudaPoolPlan {
  CudaDeviceFacts device;
  std::string name;  // "cuda:<ordinal>".
  SlabMechanism mechanism = SlabMechanism::kVmm;
  // The slab size unit: the device's granularity (kVmm) or kLegacySlabGranularity.
  std::uint64_t granularity_bytes = 0;
  // A multiple of granularity_bytes, at most the device's memory.
  std::uint64_t capacity_bytes = 0;
  // A multiple of granularity_bytes, at most capacity_bytes.
  std::uint64_t slab_bytes = 0;
  // (ordinal + 1) << 32: the pool's slab ids count up from here.
  std::uint64_t first_segment_id = 0;
  // Slabs are allocated with allocFlags.gpuDirectRDMACapable: kVmm on a device with
  // gpu_direct_rdma_with_vmm.
  bool gpu_direct_rdma = false;
  // For the log: the mechanism and why, and any size that was adjusted ("slab_size 2 GiB is
  // above the capacity: slabs of 1 GiB").
  std::string explanation;
};

// The slab size unit of a legacy pool (cuMemAlloc has no granularity): 2 MiB.
inline constexpr std::uint64_t kLegacySlabGranularity = std::uint64_t{2} << 20;

// The pools for `devices`, one per device, in their order:
//
// - mechanism kVmm when the device supports virtual memory management and POSIX-descriptor
//   handles with a granularity that is a power of two of at least 4096, else kLegacyIpc
//   (the explanation says which fact was missing);
// - capacity: `sizing.capacity_bytes`, or half of the device's memory when 0 (the daemon
//   shares the GPU with the processes that compute on it), at most the device's memory,
//   rounded down to the granularity;
// - slab size: `sizing.slab_bytes` rounded up to the granularity, at most the capacity;
// - GPUDirect RDMA capable slabs wherever the device supports them with kVmm.
//
// INVALID_ARGUMENT naming the device when its capacity comes to less than one granule, or
// when an ordinal is at or above 2^24 (no room for its segment ids); FAILED_PRECONDITION when
// a device needs a legacy pool and the driver has no legacy IPC calls. A device without
// 64-bit stream memory operations gets its pool, its explanation saying that Event
// handoffs fail there. Pure: reads nothing
// but its arguments. Thread-safe.
[[nodiscard]] Result<std::vector<CudaPoolPlan>> ChooseCudaPools(
    const std::vector<CudaDeviceFacts>& devices, const CudaPoolSizing& sizing);

// "pool cuda:0 on GPU-6f3e… (NVIDIA H200, ordinal 0): vmm, capacity 70 GiB, slabs of 2 GiB"
// and the plan's explanation: the start-up log line of a pool.
[[nodiscard]] std::string DescribeCudaPoolPlan(const CudaPoolPlan& plan);

#if HURRAY_HAVE_CUDA
// What a VMM slab of `device` is: pinned device memory, exportable as a POSIX file
// descriptor, GPUDirect RDMA capable when asked. The granularity query and cuMemCreate both
// use it.
[[nodiscard]] CUmemAllocationProp SlabAllocationProperties(CUdevice device, bool gpu_direct_rdma);

// The facts of every device the driver sees, in ordinal order (none when it sees none).
// Errors name the failed call and the device.
[[nodiscard]] Result<std::vector<CudaDeviceFacts>> ReadCudaDevices(const cuda::DriverApi& api);
#endif

}  // namespace hurray::daemon
