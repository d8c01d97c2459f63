// Entry points: device memory (VMM and cuMemAlloc), copies, host registration, legacy IPC.
#include <cstdint>
#include <cstring>
#include <string>

#include "driver_state.h"
#include "refusal.h"

using softcuda::Access;
using softcuda::AttributeOf;
using softcuda::CheckCurrentContext;
using softcuda::CheckInitialized;
using softcuda::DriverState;
using softcuda::kGranularity;
using softcuda::Refuse;

namespace {

void* HostPointer(CUdeviceptr address) {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr): unified VA.
}

// A CUmemAllocationProp softcuda can serve: pinned memory of a visible device, with no
// handle type or a POSIX file descriptor, on a device whose attributes allow it.
CUresult CheckProperties(const char* call, const CUmemAllocationProp* properties) {
  if (CUresult result = CheckInitialized(call); result != CUDA_SUCCESS) return result;
  if (properties == nullptr || properties->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      properties->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !DriverState::Get().devices().Valid(properties->location.id)) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, call,
                  "prop must be CU_MEM_ALLOCATION_TYPE_PINNED on CU_MEM_LOCATION_TYPE_DEVICE of "
                  "a visible device");
  }
  if (properties->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
      properties->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, call,
                  "softcuda supports no handle type but CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
  }
  if (AttributeOf(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, call, "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0");
  }
  if (properties->requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
      AttributeOf(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) == 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, call,
                  "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0");
  }
  return CUDA_SUCCESS;
}

CUresult CheckPosixHandleType(const char* call, CUmemAllocationHandleType type) {
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, call,
                  "softcuda shares CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR handles only");
  }
  if (AttributeOf(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) == 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, call,
                  "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0");
  }
  return CUDA_SUCCESS;
}

// Queues `operation` on `stream` (the NULL stream too), after the checks of the current
// context, the stream and the device memory it touches; `wait`: then waits for it, as the
// synchronous copies do.
template <typename Operation>
CUresult Submit(const char* call, CUstream stream, CUdeviceptr device_address, std::size_t size,
                Access access, bool wait, Operation operation) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext(call, &context); result != CUDA_SUCCESS) return result;
  CUstream_st* resolved = nullptr;
  if (CUresult result = softcuda::ResolveStream(call, stream, &resolved); result != CUDA_SUCCESS) {
    return result;
  }
  if (size == 0) return CUDA_SUCCESS;
  if (CUresult result = softcuda::CheckDeviceAccess(call, device_address, size, access);
      result != CUDA_SUCCESS) {
    return result;
  }
  resolved->Enqueue(std::move(operation));
  if (wait) resolved->Synchronize();
  return CUDA_SUCCESS;
}

}  // namespace

CUresult cuMemGetAllocationGranularity(std::size_t* granularity,
                                       const CUmemAllocationProp* properties,
                                       CUmemAllocationGranularity_flags option) {
  constexpr const char* kCall = "cuMemGetAllocationGranularity";
  if (CUresult result = CheckProperties(kCall, properties); result != CUDA_SUCCESS) return result;
  if (granularity == nullptr || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                 option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "granularity is NULL or option is unknown");
  }
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size,
                     const CUmemAllocationProp* properties,
                     unsigned long long flags) {  // NOLINT(google-runtime-int): cuda.h's type.
  constexpr const char* kCall = "cuMemCreate";
  if (CUresult result = CheckProperties(kCall, properties); result != CUDA_SUCCESS) return result;
  if (handle == nullptr || flags != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "handle is NULL or flags is not 0");
  }
  if (size == 0 || size % kGranularity != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  "size " + std::to_string(size) +
                      " is not a nonzero multiple of the granularity " +
                      std::to_string(kGranularity) + " (cuMemGetAllocationGranularity)");
  }
  if (properties->allocFlags.gpuDirectRDMACapable != 0 &&
      AttributeOf(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED) == 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, kCall,
                  "allocFlags.gpuDirectRDMACapable is set and "
                  "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0");
  }
  return DriverState::Get().memory().Create(
      handle, size, *properties,
      DriverState::Get().devices().at(properties->location.id).total_memory);
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* properties,
                                                CUmemGenericAllocationHandle handle) {
  constexpr const char* kCall = "cuMemGetAllocationPropertiesFromHandle";
  if (CUresult result = CheckInitialized(kCall); result != CUDA_SUCCESS) return result;
  if (properties == nullptr) return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "prop is NULL");
  return DriverState::Get().memory().Properties(properties, handle);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (CUresult result = CheckInitialized("cuMemRelease"); result != CUDA_SUCCESS) return result;
  return DriverState::Get().memory().Release(handle);
}

CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type,
                                      unsigned long long flags) {  // NOLINT(google-runtime-int)
  constexpr const char* kCall = "cuMemExportToShareableHandle";
  if (CUresult result = CheckInitialized(kCall); result != CUDA_SUCCESS) return result;
  if (CUresult result = CheckPosixHandleType(kCall, type); result != CUDA_SUCCESS) return result;
  if (shareable == nullptr || flags != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "shareableHandle is NULL or flags is not 0");
  }
  return DriverState::Get().memory().Export(static_cast<int*>(shareable), handle);
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType type) {
  constexpr const char* kCall = "cuMemImportFromShareableHandle";
  if (CUresult result = CheckInitialized(kCall); result != CUDA_SUCCESS) return result;
  if (CUresult result = CheckPosixHandleType(kCall, type); result != CUDA_SUCCESS) return result;
  if (handle == nullptr) return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "handle is NULL");
  // The descriptor travels in the pointer's value.
  const auto fd = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
  return DriverState::Get().memory().Import(handle, fd);
}

CUresult cuMemAddressReserve(CUdeviceptr* address, std::size_t size, std::size_t alignment,
                             CUdeviceptr hint,
                             unsigned long long flags) {  // NOLINT(google-runtime-int)
  constexpr const char* kCall = "cuMemAddressReserve";
  if (CUresult result = CheckInitialized(kCall); result != CUDA_SUCCESS) return result;
  if (address == nullptr || flags != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "ptr is NULL or flags is not 0");
  }
  (void)hint;  // A hint only; softcuda takes what mmap gives.
  return DriverState::Get().memory().Reserve(address, size, alignment);
}

CUresult cuMemAddressFree(CUdeviceptr address, std::size_t size) {
  if (CUresult result = CheckInitialized("cuMemAddressFree"); result != CUDA_SUCCESS) return result;
  return DriverState::Get().memory().FreeAddress(address, size);
}

CUresult cuMemMap(CUdeviceptr address, std::size_t size, std::size_t offset,
                  CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {  // NOLINT(google-runtime-int)
  if (CUresult result = CheckInitialized("cuMemMap"); result != CUDA_SUCCESS) return result;
  if (flags != 0) return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemMap", "flags is not 0");
  return DriverState::Get().memory().Map(address, size, offset, handle);
}

CUresult cuMemUnmap(CUdeviceptr address, std::size_t size) {
  if (CUresult result = CheckInitialized("cuMemUnmap"); result != CUDA_SUCCESS) return result;
  return DriverState::Get().memory().Unmap(address, size);
}

CUresult cuMemSetAccess(CUdeviceptr address, std::size_t size, const CUmemAccessDesc* descriptions,
                        std::size_t count) {
  constexpr const char* kCall = "cuMemSetAccess";
  if (CUresult result = CheckInitialized(kCall); result != CUDA_SUCCESS) return result;
  if (descriptions == nullptr || count == 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "desc is NULL or count is 0");
  }
  // Every device reads through the same host mapping: it gets the widest access asked for.
  Access access = Access::kNone;
  for (std::size_t i = 0; i < count; ++i) {
    const CUmemAccessDesc& description = descriptions[i];
    if (description.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !DriverState::Get().devices().Valid(description.location.id)) {
      return Refuse(CUDA_ERROR_INVALID_DEVICE, kCall, "desc names no visible device");
    }
    if (description.flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      access = Access::kReadWrite;
    } else if (description.flags == CU_MEM_ACCESS_FLAGS_PROT_READ) {
      if (access == Access::kNone) access = Access::kRead;
    } else if (description.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
      return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "unknown access flags");
    }
  }
  return DriverState::Get().memory().SetAccess(address, size, access, descriptions, count);
}

CUresult cuMemGetAccess(unsigned long long* flags,  // NOLINT(google-runtime-int): cuda.h's type.
                        const CUmemLocation* location, CUdeviceptr address) {
  constexpr const char* kCall = "cuMemGetAccess";
  if (CUresult result = CheckInitialized(kCall); result != CUDA_SUCCESS) return result;
  if (flags == nullptr || location == nullptr) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "flags or location is NULL");
  }
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !DriverState::Get().devices().Valid(location->id)) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "location names no visible device");
  }
  return DriverState::Get().memory().GetAccess(flags, location->id, address);
}

CUresult cuMemHostRegister_v2(void* host, std::size_t size, unsigned int flags) {
  constexpr const char* kCall = "cuMemHostRegister";
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext(kCall, &context); result != CUDA_SUCCESS) return result;
  constexpr unsigned int kKnown = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                  CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if (host == nullptr || size == 0 || (flags & ~kKnown) != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "p is NULL, bytesize is 0 or Flags is unknown");
  }
  if ((flags & CU_MEMHOSTREGISTER_IOMEMORY) != 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, kCall, "softcuda has no I/O memory");
  }
  const bool read_only = (flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0;
  if (read_only && AttributeOf(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED) == 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, kCall,
                  "CU_MEMHOSTREGISTER_READ_ONLY needs READ_ONLY_HOST_REGISTER_SUPPORTED, which "
                  "is 0");
  }
  return DriverState::Get().memory().Register(host, size, read_only);
}

CUresult cuMemHostUnregister(void* host) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuMemHostUnregister", &context);
      result != CUDA_SUCCESS) {
    return result;
  }
  return DriverState::Get().memory().Unregister(host);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* address, void* host, unsigned int flags) {
  constexpr const char* kCall = "cuMemHostGetDevicePointer";
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext(kCall, &context); result != CUDA_SUCCESS) return result;
  if (address == nullptr || flags != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "pdptr is NULL or Flags is not 0");
  }
  return DriverState::Get().memory().DevicePointer(address, host);
}

CUresult cuMemAlloc_v2(CUdeviceptr* address, std::size_t size) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuMemAlloc", &context); result != CUDA_SUCCESS) {
    return result;
  }
  if (address == nullptr || size == 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc", "dptr is NULL or bytesize is 0");
  }
  return DriverState::Get().memory().Allocate(
      address, size, context->device,
      DriverState::Get().devices().at(context->device).total_memory);
}

CUresult cuMemFree_v2(CUdeviceptr address) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuMemFree", &context); result != CUDA_SUCCESS) {
    return result;
  }
  return DriverState::Get().memory().Free(address);
}

CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuMemGetInfo", &context); result != CUDA_SUCCESS) {
    return result;
  }
  if (free == nullptr || total == nullptr) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemGetInfo", "free or total is NULL");
  }
  *total = DriverState::Get().devices().at(context->device).total_memory;
  *free = *total - std::min(*total, softcuda::MemorySpace::LiveBytes(context->device));
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr destination, const void* source, std::size_t size) {
  return Submit("cuMemcpyHtoD", nullptr, destination, size, Access::kReadWrite, true,
                [=] { std::memcpy(HostPointer(destination), source, size); });
}

CUresult cuMemcpyDtoH_v2(void* destination, CUdeviceptr source, std::size_t size) {
  return Submit("cuMemcpyDtoH", nullptr, source, size, Access::kRead, true,
                [=] { std::memcpy(destination, HostPointer(source), size); });
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr destination, CUdeviceptr source, std::size_t size) {
  constexpr const char* kCall = "cuMemcpyDtoD";
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext(kCall, &context); result != CUDA_SUCCESS) return result;
  if (size != 0) {
    if (CUresult result = softcuda::CheckDeviceAccess(kCall, source, size, Access::kRead);
        result != CUDA_SUCCESS) {
      return result;
    }
  }
  return Submit(kCall, nullptr, destination, size, Access::kReadWrite, true,
                [=] { std::memmove(HostPointer(destination), HostPointer(source), size); });
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr destination, const void* source, std::size_t size,
                              CUstream stream) {
  return Submit("cuMemcpyHtoDAsync", stream, destination, size, Access::kReadWrite, false,
                [=] { std::memcpy(HostPointer(destination), source, size); });
}

CUresult cuMemcpyDtoHAsync_v2(void* destination, CUdeviceptr source, std::size_t size,
                              CUstream stream) {
  return Submit("cuMemcpyDtoHAsync", stream, source, size, Access::kRead, false,
                [=] { std::memcpy(destination, HostPointer(source), size); });
}

CUresult cuMemsetD8_v2(CUdeviceptr destination, unsigned char value, std::size_t count) {
  return Submit("cuMemsetD8", nullptr, destination, count, Access::kReadWrite, true,
                [=] { std::memset(HostPointer(destination), value, count); });
}

CUresult cuMemsetD8Async(CUdeviceptr destination, unsigned char value, std::size_t count,
                         CUstream stream) {
  return Submit("cuMemsetD8Async", stream, destination, count, Access::kReadWrite, false,
                [=] { std::memset(HostPointer(destination), value, count); });
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr address) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuIpcGetMemHandle", &context);
      result != CUDA_SUCCESS) {
    return result;
  }
  if (handle == nullptr)
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuIpcGetMemHandle", "pHandle is NULL");
  return DriverState::Get().memory().IpcGet(handle, address);
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* address, CUipcMemHandle handle, unsigned int flags) {
  constexpr const char* kCall = "cuIpcOpenMemHandle";
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext(kCall, &context); result != CUDA_SUCCESS) return result;
  if (address == nullptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  "pdptr is NULL or Flags is not CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS");
  }
  return DriverState::Get().memory().IpcOpen(address, handle);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr address) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuIpcCloseMemHandle", &context);
      result != CUDA_SUCCESS) {
    return result;
  }
  return DriverState::Get().memory().IpcClose(address);
}
