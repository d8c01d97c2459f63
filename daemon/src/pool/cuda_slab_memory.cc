#include "pool/cuda_slab_memory.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>

namespace hurray::daemon {

Result<std::unique_ptr<CudaSlabMemory>> CudaSlabMemory::Create(const cuda::DriverApi& api,
                                                               const CudaPoolPlan& plan) {
  const std::uint32_t ordinal = plan.device.ordinal;
  const std::string where = fmt::format("device {}", ordinal);
  CUdevice device = 0;
  if (Status got =
          cuda::CheckCuda(api, "cuDeviceGet", api.DeviceGet(&device, static_cast<int>(ordinal)));
      !got) {
    return std::unexpected(got.error().WithContext(where));
  }
  CUcontext context = nullptr;
  if (plan.mechanism == SlabMechanism::kLegacyIpc) {
    if (Status retained = cuda::CheckCuda(api, "cuDevicePrimaryCtxRetain",
                                          api.DevicePrimaryCtxRetain(&context, device));
        !retained) {
      return std::unexpected(retained.error().WithContext(where));
    }
  }
  return std::unique_ptr<CudaSlabMemory>(new CudaSlabMemory(
      api, ordinal, device, plan.mechanism, plan.granularity_bytes, plan.gpu_direct_rdma, context));
}

CudaSlabMemory::~CudaSlabMemory() {
  std::lock_guard lock(mutex_);
  if (context_ == nullptr) return;
  if (Status released = Check("cuDevicePrimaryCtxRelease", api_.DevicePrimaryCtxRelease(device_));
      !released) {
    spdlog::error("{}", released.error().ToString());
  }
}

Status CudaSlabMemory::Check(std::string_view call, CUresult result) const {
  Status status = cuda::CheckCuda(api_, call, result);
  if (!status) {
    return std::unexpected(status.error().WithContext(fmt::format("device {}", ordinal_)));
  }
  return status;
}

Status CudaSlabMemory::UseContext() const {
  std::lock_guard lock(mutex_);
  if (context_ == nullptr) return {};
  return Check("cuCtxSetCurrent", api_.CtxSetCurrent(context_));
}

Status CudaSlabMemory::RetainContext() {
  std::lock_guard lock(mutex_);
  if (context_ != nullptr) return {};
  CUcontext context = nullptr;
  HURRAY_RETURN_IF_ERROR(
      Check("cuDevicePrimaryCtxRetain", api_.DevicePrimaryCtxRetain(&context, device_)));
  context_ = context;
  spdlog::warn(
      "device {}: cuMemCreate needs a CUDA context with this driver: the daemon holds "
      "the device's primary context from now on",
      ordinal_);
  return {};
}

Result<std::uint64_t> CudaSlabMemory::CreateVmm(std::uint64_t bytes) {
  HURRAY_RETURN_IF_ERROR(UseContext());
  const CUmemAllocationProp properties = SlabAllocationProperties(device_, gpu_direct_rdma_);
  CUmemGenericAllocationHandle handle = 0;
  CUresult result = api_.MemCreate(&handle, static_cast<std::size_t>(bytes), &properties, 0);
  if (result == CUDA_ERROR_INVALID_CONTEXT) {
    HURRAY_RETURN_IF_ERROR(RetainContext());
    HURRAY_RETURN_IF_ERROR(UseContext());
    result = api_.MemCreate(&handle, static_cast<std::size_t>(bytes), &properties, 0);
  }
  HURRAY_RETURN_IF_ERROR(Check(fmt::format("cuMemCreate of {} bytes", bytes), result));
  return std::uint64_t{handle};
}

Result<std::uint64_t> CudaSlabMemory::Create(std::uint64_t bytes) {
  if (mechanism_ == SlabMechanism::kVmm) return CreateVmm(bytes);
  HURRAY_RETURN_IF_ERROR(UseContext());
  CUdeviceptr pointer = 0;
  HURRAY_RETURN_IF_ERROR(Check(fmt::format("cuMemAlloc of {} bytes", bytes),
                               api_.MemAlloc(&pointer, static_cast<std::size_t>(bytes))));
  return std::uint64_t{pointer};
}

Result<SlabExport> CudaSlabMemory::Export(std::uint64_t handle) const {
  SlabExport exported;
  HURRAY_RETURN_IF_ERROR(UseContext());
  if (mechanism_ == SlabMechanism::kVmm) {
    int fd = -1;
    HURRAY_RETURN_IF_ERROR(Check(
        "cuMemExportToShareableHandle",
        api_.MemExportToShareableHandle(&fd, static_cast<CUmemGenericAllocationHandle>(handle),
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)));
    exported.fd = UniqueFd(fd);
    return exported;
  }
  CUipcMemHandle ipc_handle{};
  HURRAY_RETURN_IF_ERROR(Check(
      "cuIpcGetMemHandle", api_.IpcGetMemHandle(&ipc_handle, static_cast<CUdeviceptr>(handle))));
  static_assert(sizeof(ipc_handle.reserved) == kLegacyIpcHandleBytes);
  std::memcpy(exported.legacy_ipc_handle.data(), ipc_handle.reserved, kLegacyIpcHandleBytes);
  return exported;
}

void CudaSlabMemory::Release(std::uint64_t handle) {
  Status released = UseContext();
  if (released && mechanism_ == SlabMechanism::kVmm) {
    released =
        Check("cuMemRelease", api_.MemRelease(static_cast<CUmemGenericAllocationHandle>(handle)));
  } else if (released) {
    released = Check("cuMemFree", api_.MemFree(static_cast<CUdeviceptr>(handle)));
  }
  if (!released) spdlog::error("slab {:#x}: {}", handle, released.error().ToString());
}

}  // namespace hurray::daemon
