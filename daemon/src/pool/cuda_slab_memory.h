// CudaSlabMemory: SlabMemory of one CUDA device, through the driver loaded at run time.
// Compiled only with CUDA support (HURRAY_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "hurray/cuda/driver.h"
#include "hurray/error.h"
#include "pool/cuda_devices.h"
#include "pool/slab_memory.h"

namespace hurray::daemon {

// Slabs of device memory that the daemon never maps:
//
// - kVmm: cuMemCreate of pinned memory located on the device, with POSIX file-descriptor
//   handles requested (and GPUDirect RDMA capable where the device supports it); each Export is a
//   fresh descriptor from cuMemExportToShareableHandle; Release is cuMemRelease (memory that
//   clients imported lives on until they unmap it). Tried without a CUDA context, so that the
//   daemon costs the device no context memory; a driver that answers CUDA_ERROR_INVALID_CONTEXT
//   gets the primary context retained (once, logged) and made current before every later call, as
//   kLegacyIpc does.
// - kLegacyIpc: cuMemAlloc in the device's primary context (retained by Create, released by
//   the destructor) and the handle's bytes from cuIpcGetMemHandle; Release is cuMemFree.
//
// A handle is the CUmemGenericAllocationHandle (kVmm) or the CUdeviceptr (kLegacyIpc).
// Thread-safe: the context is set at most once, under mutex_; the driver serializes what it
// must (with a context, it is made current on the calling thread before each call).
class CudaSlabMemory final : public SlabMemory {
 public:
  // For the device of `plan`, through `api`: its mechanism, its slabs multiples of its
  // granularity, GPUDirect RDMA capable when it says so (as ChooseCudaPools planned them).
  // Errors name the failed call and the device.
  [[nodiscard]] static Result<std::unique_ptr<CudaSlabMemory>> Create(const cuda::DriverApi& api,
                                                                      const CudaPoolPlan& plan);

  CudaSlabMemory(const CudaSlabMemory&) = delete;
  CudaSlabMemory& operator=(const CudaSlabMemory&) = delete;
  // Releases the primary context, if one was retained. Slabs still alive are the owner's bug; the
  // pool releases all of its slabs first.
  ~CudaSlabMemory() override;

  [[nodiscard]] SlabMechanism mechanism() const override { return mechanism_; }
  [[nodiscard]] std::uint64_t granularity() const override { return granularity_; }
  [[nodiscard]] bool gpu_direct_rdma() const override { return gpu_direct_rdma_; }
  [[nodiscard]] Result<std::uint64_t> Create(std::uint64_t bytes) override;
  [[nodiscard]] Result<SlabExport> Export(std::uint64_t handle) const override;
  void Release(std::uint64_t handle) override;

 private:
  CudaSlabMemory(const cuda::DriverApi& api, std::uint32_t ordinal, CUdevice device,
                 SlabMechanism mechanism, std::uint64_t granularity, bool gpu_direct_rdma,
                 CUcontext context)
      : api_(api),
        ordinal_(ordinal),
        device_(device),
        mechanism_(mechanism),
        granularity_(granularity),
        gpu_direct_rdma_(gpu_direct_rdma),
        context_(context) {}

  // `result` of `call` as a Status, its error naming the device.
  [[nodiscard]] Status Check(std::string_view call, CUresult result) const;
  // Makes the primary context current on this thread, when there is one.
  [[nodiscard]] Status UseContext() const;
  // Retains the primary context (kVmm, after a driver asked for one). Idempotent.
  [[nodiscard]] Status RetainContext();
  // cuMemCreate of `bytes` (kVmm).
  [[nodiscard]] Result<std::uint64_t> CreateVmm(std::uint64_t bytes);

  const cuda::DriverApi& api_;
  const std::uint32_t ordinal_;
  const CUdevice device_;
  const SlabMechanism mechanism_;
  const std::uint64_t granularity_;
  const bool gpu_direct_rdma_;
  mutable std::mutex mutex_;
  // The retained primary context: always for kLegacyIpc; for kVmm only after the driver
  // refused a call without one. Guarded by mutex_.
  CUcontext context_;
};

}  // namespace hurray::daemon
