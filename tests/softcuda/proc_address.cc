// cuGetProcAddress_v2: every entry point softcuda has, by base name and the CUDA version
// that introduced the ABI it has (the real driver's rule: the newest version not above the
// caller's cudaVersion).
#include <array>
#include <cstring>
#include <string>

#include "driver_state.h"
#include "refusal.h"

namespace {

struct EntryPoint {
  const char* name;  // The base name, as callers ask: "cuMemAlloc", not "cuMemAlloc_v2".
  int version;       // The first CUDA version whose ABI this function has.
  void* function;
};

template <typename Function>
void* Address(Function* function) {
  return reinterpret_cast<void*>(function);  // NOLINT: dlsym-style table of entry points.
}

const std::array kEntryPoints{
    EntryPoint{"cuInit", 2000, Address(&cuInit)},
    EntryPoint{"cuDriverGetVersion", 2020, Address(&cuDriverGetVersion)},
    EntryPoint{"cuGetProcAddress", 12000, Address(&cuGetProcAddress_v2)},
    EntryPoint{"cuGetErrorName", 6000, Address(&cuGetErrorName)},
    EntryPoint{"cuGetErrorString", 6000, Address(&cuGetErrorString)},
    EntryPoint{"cuDeviceGetCount", 2000, Address(&cuDeviceGetCount)},
    EntryPoint{"cuDeviceGet", 2000, Address(&cuDeviceGet)},
    EntryPoint{"cuDeviceGetName", 2000, Address(&cuDeviceGetName)},
    EntryPoint{"cuDeviceGetUuid", 9020, Address(&cuDeviceGetUuid)},
    EntryPoint{"cuDeviceGetUuid", 11040, Address(&cuDeviceGetUuid_v2)},
    EntryPoint{"cuDeviceGetAttribute", 2000, Address(&cuDeviceGetAttribute)},
    EntryPoint{"cuDeviceTotalMem", 3020, Address(&cuDeviceTotalMem_v2)},
    EntryPoint{"cuDevicePrimaryCtxRetain", 7000, Address(&cuDevicePrimaryCtxRetain)},
    EntryPoint{"cuDevicePrimaryCtxRelease", 11000, Address(&cuDevicePrimaryCtxRelease_v2)},
    EntryPoint{"cuCtxSetCurrent", 4000, Address(&cuCtxSetCurrent)},
    EntryPoint{"cuCtxGetCurrent", 4000, Address(&cuCtxGetCurrent)},
    EntryPoint{"cuCtxGetDevice", 2000, Address(&cuCtxGetDevice)},
    EntryPoint{"cuCtxSynchronize", 2000, Address(&cuCtxSynchronize)},
    EntryPoint{"cuStreamCreate", 2000, Address(&cuStreamCreate)},
    EntryPoint{"cuStreamDestroy", 4000, Address(&cuStreamDestroy_v2)},
    EntryPoint{"cuStreamSynchronize", 2000, Address(&cuStreamSynchronize)},
    EntryPoint{"cuLaunchHostFunc", 10000, Address(&cuLaunchHostFunc)},
    EntryPoint{"cuStreamGetCtx", 9020, Address(&cuStreamGetCtx)},
    EntryPoint{"cuStreamWaitValue64", 11070, Address(&cuStreamWaitValue64_v2)},
    EntryPoint{"cuStreamWriteValue64", 11070, Address(&cuStreamWriteValue64_v2)},
    EntryPoint{"cuEventCreate", 2000, Address(&cuEventCreate)},
    EntryPoint{"cuEventRecord", 2000, Address(&cuEventRecord)},
    EntryPoint{"cuEventQuery", 2000, Address(&cuEventQuery)},
    EntryPoint{"cuEventDestroy", 4000, Address(&cuEventDestroy_v2)},
    EntryPoint{"cuMemGetAllocationGranularity", 10020, Address(&cuMemGetAllocationGranularity)},
    EntryPoint{"cuMemCreate", 10020, Address(&cuMemCreate)},
    EntryPoint{"cuMemRelease", 10020, Address(&cuMemRelease)},
    EntryPoint{"cuMemGetAllocationPropertiesFromHandle", 10020,
               Address(&cuMemGetAllocationPropertiesFromHandle)},
    EntryPoint{"cuMemExportToShareableHandle", 10020, Address(&cuMemExportToShareableHandle)},
    EntryPoint{"cuMemImportFromShareableHandle", 10020, Address(&cuMemImportFromShareableHandle)},
    EntryPoint{"cuMemAddressReserve", 10020, Address(&cuMemAddressReserve)},
    EntryPoint{"cuMemAddressFree", 10020, Address(&cuMemAddressFree)},
    EntryPoint{"cuMemMap", 10020, Address(&cuMemMap)},
    EntryPoint{"cuMemUnmap", 10020, Address(&cuMemUnmap)},
    EntryPoint{"cuMemSetAccess", 10020, Address(&cuMemSetAccess)},
    EntryPoint{"cuMemGetAccess", 10020, Address(&cuMemGetAccess)},
    EntryPoint{"cuMemHostRegister", 6050, Address(&cuMemHostRegister_v2)},
    EntryPoint{"cuMemHostUnregister", 4000, Address(&cuMemHostUnregister)},
    EntryPoint{"cuMemHostGetDevicePointer", 3020, Address(&cuMemHostGetDevicePointer_v2)},
    EntryPoint{"cuMemAlloc", 3020, Address(&cuMemAlloc_v2)},
    EntryPoint{"cuMemFree", 3020, Address(&cuMemFree_v2)},
    EntryPoint{"cuMemGetInfo", 3020, Address(&cuMemGetInfo_v2)},
    EntryPoint{"cuMemcpyHtoD", 3020, Address(&cuMemcpyHtoD_v2)},
    EntryPoint{"cuMemcpyDtoH", 3020, Address(&cuMemcpyDtoH_v2)},
    EntryPoint{"cuMemcpyDtoD", 3020, Address(&cuMemcpyDtoD_v2)},
    EntryPoint{"cuMemcpyHtoDAsync", 3020, Address(&cuMemcpyHtoDAsync_v2)},
    EntryPoint{"cuMemcpyDtoHAsync", 3020, Address(&cuMemcpyDtoHAsync_v2)},
    EntryPoint{"cuMemsetD8", 3020, Address(&cuMemsetD8_v2)},
    EntryPoint{"cuMemsetD8Async", 3020, Address(&cuMemsetD8Async)},
    EntryPoint{"cuIpcGetMemHandle", 4010, Address(&cuIpcGetMemHandle)},
    EntryPoint{"cuIpcOpenMemHandle", 11000, Address(&cuIpcOpenMemHandle_v2)},
    EntryPoint{"cuIpcCloseMemHandle", 4010, Address(&cuIpcCloseMemHandle)},
};

}  // namespace

CUresult cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version,
                             cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  constexpr const char* kCall = "cuGetProcAddress";
  if (symbol == nullptr || function == nullptr) {
    return softcuda::Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "symbol or pfn is NULL");
  }
  constexpr cuuint64_t kKnownFlags =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if ((flags & ~kKnownFlags) != 0 || cuda_version > softcuda::DriverVersion()) {
    return softcuda::Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                            "unknown flags, or cudaVersion " + std::to_string(cuda_version) +
                                " is newer than the driver's " +
                                std::to_string(softcuda::DriverVersion()));
  }
  // softcuda has no per-thread default stream: both stream flavours get the same function.
  const EntryPoint* best = nullptr;
  bool known = false;
  for (const EntryPoint& entry : kEntryPoints) {
    if (std::strcmp(entry.name, symbol) != 0) continue;
    known = true;
    if (entry.version <= cuda_version && (best == nullptr || entry.version > best->version)) {
      best = &entry;
    }
  }
  *function = best != nullptr ? best->function : nullptr;
  if (status != nullptr) {
    *status = best != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
              : known         ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                              : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return best != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
