// The CUDA driver API, loaded at run time: hurrayd and the client never link libcuda.so, so
// the same binaries start on hosts without the NVIDIA driver (they then have no CUDA pools,
// or no device tensors, and say why). The one wrapping of CUresult for the whole tree.
//
// Only built when the CUDA toolkit's headers are found at build time (HURRAY_CUDA, see the
// top-level CMakeLists.txt); code that uses it is compiled under `#if HURRAY_HAVE_CUDA`.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::cuda {

// Every driver entry point hurray calls, resolved once through cuGetProcAddress with the
// ABI of CUDA 12.0 (so that a 12.x driver serves a binary built with a newer toolkit). The
// members are named after the calls without their "cu" prefix. Immutable once loaded;
// thread-safe to read.
struct DriverApi {
  int driver_version = 0;  // cuDriverGetVersion: 12040 for CUDA 12.4.

  // Errors, devices.
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&::cuDeviceGetUuid) DeviceGetUuid = nullptr;  // The _v2 call: MIG-aware.
  // cuDeviceGetUuid as of CUDA 11.0: the UUID of the physical GPU, also for a MIG instance.
  // Optional: null when the driver lacks it (a MIG instance then reads as a whole GPU).
  decltype(&::cuDeviceGetUuid) DeviceGetPhysicalUuid = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) DeviceTotalMem = nullptr;

  // Contexts and streams.
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) CtxGetDevice = nullptr;
  decltype(&::cuCtxSynchronize) CtxSynchronize = nullptr;
  decltype(&::cuStreamCreate) StreamCreate = nullptr;
  decltype(&::cuStreamDestroy) StreamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) StreamSynchronize = nullptr;
  decltype(&::cuStreamGetCtx) StreamGetCtx = nullptr;
  decltype(&::cuLaunchHostFunc) LaunchHostFunc = nullptr;
  decltype(&::cuStreamWaitValue64) StreamWaitValue64 = nullptr;
  decltype(&::cuStreamWriteValue64) StreamWriteValue64 = nullptr;
  decltype(&::cuEventCreate) EventCreate = nullptr;
  decltype(&::cuEventRecord) EventRecord = nullptr;
  decltype(&::cuEventDestroy) EventDestroy = nullptr;
  decltype(&::cuEventQuery) EventQuery = nullptr;

  // Virtual memory management: physical slabs, shareable handles, address ranges.
  decltype(&::cuMemGetAllocationGranularity) MemGetAllocationGranularity = nullptr;
  decltype(&::cuMemCreate) MemCreate = nullptr;
  decltype(&::cuMemRelease) MemRelease = nullptr;
  decltype(&::cuMemExportToShareableHandle) MemExportToShareableHandle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) MemImportFromShareableHandle = nullptr;
  decltype(&::cuMemAddressReserve) MemAddressReserve = nullptr;
  decltype(&::cuMemAddressFree) MemAddressFree = nullptr;
  decltype(&::cuMemMap) MemMap = nullptr;
  decltype(&::cuMemUnmap) MemUnmap = nullptr;
  decltype(&::cuMemSetAccess) MemSetAccess = nullptr;

  // Host memory seen by the device (fence words), and plain device memory.
  decltype(&::cuMemHostRegister) MemHostRegister = nullptr;
  decltype(&::cuMemHostUnregister) MemHostUnregister = nullptr;
  decltype(&::cuMemHostGetDevicePointer) MemHostGetDevicePointer = nullptr;
  decltype(&::cuMemAlloc) MemAlloc = nullptr;
  decltype(&::cuMemFree) MemFree = nullptr;
  decltype(&::cuMemcpyDtoH) MemcpyDtoH = nullptr;

  // Legacy interprocess memory handles, for devices that cannot export file descriptors.
  // Optional, all three or none: null when the driver lacks any of them (WSL2's has none).
  decltype(&::cuIpcGetMemHandle) IpcGetMemHandle = nullptr;
  decltype(&::cuIpcOpenMemHandle) IpcOpenMemHandle = nullptr;
  decltype(&::cuIpcCloseMemHandle) IpcCloseMemHandle = nullptr;
};

// The driver of this process: dlopen("libcuda.so.1"), every entry point of DriverApi, and
// cuInit(0). Done once (thread-safe; the library is never unloaded); later calls return
// the first outcome. FAILED_PRECONDITION saying why there is no usable driver:
// "the NVIDIA driver is not installed (dlopen libcuda.so.1: ...)", "libcuda.so.1 of CUDA
// 11.8 is older than 12.0, which hurray needs", "cuInit: CUDA_ERROR_NO_DEVICE (...)".
[[nodiscard]] Result<const DriverApi*> LoadDriver();

// A driver entry point DriverApi does not hold (for tests and tools: a copy, an access
// query), resolved through cuGetProcAddress at the ABI of CUDA `version`, as DriverApi's are.
// LoadDriver's errors; FAILED_PRECONDITION naming the call when the driver lacks it.
[[nodiscard]] Result<void*> DriverEntryPoint(const char* symbol, int version = 12000);

// DriverEntryPoint, typed: `out` is set to the entry point (unchanged on error).
template <typename Function>
[[nodiscard]] Status ResolveDriverEntryPoint(const char* symbol, Function& out,
                                             int version = 12000) {
  HURRAY_ASSIGN_OR_RETURN(void* pointer, DriverEntryPoint(symbol, version));
  out = reinterpret_cast<Function>(pointer);  // NOLINT: cuGetProcAddress returns void*.
  return {};
}

// A failed driver call as an Error: "<call>: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
// RESOURCE_EXHAUSTED for CUDA_ERROR_OUT_OF_MEMORY, FAILED_PRECONDITION for
// CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NO_DEVICE and CUDA_ERROR_NOT_PERMITTED,
// INVALID_ARGUMENT for CUDA_ERROR_INVALID_VALUE and CUDA_ERROR_INVALID_HANDLE, INTERNAL
// otherwise. `api` may be null (then the number stands for the name).
[[nodiscard]] Error CudaError(const DriverApi* api, std::string_view call, CUresult result);

// OK for CUDA_SUCCESS, else CudaError.
[[nodiscard]] Status CheckCuda(const DriverApi& api, std::string_view call, CUresult result);

// A device UUID as CUDA tools print it: "GPU-" (or `prefix`) and 32 hex digits in groups
// of 8-4-4-4-12 ("GPU-6f3e2b1a-0c4d-...").
[[nodiscard]] std::string FormatDeviceUuid(const std::array<unsigned char, 16>& bytes,
                                           std::string_view prefix = "GPU-");

// The names of a device as CUDA tools print them: `uuid` is "GPU-..." for a whole GPU and
// "MIG-..." for a MIG instance (the _v2 cuDeviceGetUuid names the instance, the 11.0 call its
// physical GPU); `parent_uuid` is a MIG instance's physical GPU, "GPU-...", and empty for a
// whole GPU. Without the 11.0 call (DriverApi::DeviceGetPhysicalUuid null) a MIG instance
// reads as a whole GPU. The failed call's error otherwise.
struct DeviceUuids {
  std::string uuid;
  std::string parent_uuid;
};
[[nodiscard]] Result<DeviceUuids> ReadDeviceUuids(const DriverApi& api, CUdevice device);

}  // namespace hurray::cuda
