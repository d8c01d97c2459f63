#include "hurray/cuda/driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>
#include <mutex>
#include <utility>

namespace hurray::cuda {
namespace {

// The ABI every entry point is resolved at: calls as CUDA 12.0 defined them.
constexpr int kMinimumDriverVersion = 12000;
// cuDeviceGetUuid as CUDA 11.0 defined it: the physical GPU's UUID, also under MIG.
constexpr int kPhysicalUuidVersion = 11000;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

struct Loaded {
  DriverApi api;
  GetProcAddress get_proc_address = nullptr;
  Status status;
};

template <typename Function>
Status Resolve(GetProcAddress get_proc_address, const char* symbol, int version, Function& out) {
  void* pointer = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult result =
      get_proc_address(symbol, &pointer, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);
  if (result != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || pointer == nullptr) {
    return FailedPreconditionError(fmt::format(
        "libcuda.so.1 has no {} of CUDA {}.{} (cuGetProcAddress: result {}, status {})", symbol,
        version / 1000, version % 1000 / 10, static_cast<int>(result), static_cast<int>(found)));
  }
  out = reinterpret_cast<Function>(pointer);  // NOLINT: dlsym-style lookup returns void*.
  return {};
}

// Resolve, leaving `out` null when the driver lacks the entry point: for the calls hurray can
// do without (DriverApi says which).
template <typename Function>
void ResolveOptional(GetProcAddress get_proc_address, const char* symbol, int version,
                     Function& out) {
  if (!Resolve(get_proc_address, symbol, version, out)) out = nullptr;
}

Status ResolveAll(GetProcAddress get, DriverApi& api) {
  constexpr int v = kMinimumDriverVersion;
#define HURRAY_RESOLVE(member, symbol) HURRAY_RETURN_IF_ERROR(Resolve(get, symbol, v, api.member))
  HURRAY_RESOLVE(GetErrorName, "cuGetErrorName");
  HURRAY_RESOLVE(GetErrorString, "cuGetErrorString");
  HURRAY_RESOLVE(DeviceGetCount, "cuDeviceGetCount");
  HURRAY_RESOLVE(DeviceGet, "cuDeviceGet");
  HURRAY_RESOLVE(DeviceGetName, "cuDeviceGetName");
  HURRAY_RESOLVE(DeviceGetUuid, "cuDeviceGetUuid");
  HURRAY_RESOLVE(DeviceGetAttribute, "cuDeviceGetAttribute");
  HURRAY_RESOLVE(DeviceTotalMem, "cuDeviceTotalMem");
  HURRAY_RESOLVE(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  HURRAY_RESOLVE(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease");
  HURRAY_RESOLVE(CtxSetCurrent, "cuCtxSetCurrent");
  HURRAY_RESOLVE(CtxGetCurrent, "cuCtxGetCurrent");
  HURRAY_RESOLVE(CtxGetDevice, "cuCtxGetDevice");
  HURRAY_RESOLVE(CtxSynchronize, "cuCtxSynchronize");
  HURRAY_RESOLVE(StreamCreate, "cuStreamCreate");
  HURRAY_RESOLVE(StreamDestroy, "cuStreamDestroy");
  HURRAY_RESOLVE(StreamSynchronize, "cuStreamSynchronize");
  HURRAY_RESOLVE(StreamGetCtx, "cuStreamGetCtx");
  HURRAY_RESOLVE(LaunchHostFunc, "cuLaunchHostFunc");
  HURRAY_RESOLVE(StreamWaitValue64, "cuStreamWaitValue64");
  HURRAY_RESOLVE(StreamWriteValue64, "cuStreamWriteValue64");
  HURRAY_RESOLVE(EventCreate, "cuEventCreate");
  HURRAY_RESOLVE(EventRecord, "cuEventRecord");
  HURRAY_RESOLVE(EventDestroy, "cuEventDestroy");
  HURRAY_RESOLVE(EventQuery, "cuEventQuery");
  HURRAY_RESOLVE(MemGetAllocationGranularity, "cuMemGetAllocationGranularity");
  HURRAY_RESOLVE(MemCreate, "cuMemCreate");
  HURRAY_RESOLVE(MemRelease, "cuMemRelease");
  HURRAY_RESOLVE(MemExportToShareableHandle, "cuMemExportToShareableHandle");
  HURRAY_RESOLVE(MemImportFromShareableHandle, "cuMemImportFromShareableHandle");
  HURRAY_RESOLVE(MemAddressReserve, "cuMemAddressReserve");
  HURRAY_RESOLVE(MemAddressFree, "cuMemAddressFree");
  HURRAY_RESOLVE(MemMap, "cuMemMap");
  HURRAY_RESOLVE(MemUnmap, "cuMemUnmap");
  HURRAY_RESOLVE(MemSetAccess, "cuMemSetAccess");
  HURRAY_RESOLVE(MemHostRegister, "cuMemHostRegister");
  HURRAY_RESOLVE(MemHostUnregister, "cuMemHostUnregister");
  HURRAY_RESOLVE(MemHostGetDevicePointer, "cuMemHostGetDevicePointer");
  HURRAY_RESOLVE(MemAlloc, "cuMemAlloc");
  HURRAY_RESOLVE(MemFree, "cuMemFree");
  HURRAY_RESOLVE(MemcpyDtoH, "cuMemcpyDtoH");
#undef HURRAY_RESOLVE
  // Optional: a driver without the legacy IPC calls (as on WSL2) still serves VMM pools, and
  // one without the 11.0 cuDeviceGetUuid still names its devices.
  ResolveOptional(get, "cuIpcGetMemHandle", v, api.IpcGetMemHandle);
  ResolveOptional(get, "cuIpcOpenMemHandle", v, api.IpcOpenMemHandle);
  ResolveOptional(get, "cuIpcCloseMemHandle", v, api.IpcCloseMemHandle);
  if (api.IpcGetMemHandle == nullptr || api.IpcOpenMemHandle == nullptr ||
      api.IpcCloseMemHandle == nullptr) {
    api.IpcGetMemHandle = nullptr;
    api.IpcOpenMemHandle = nullptr;
    api.IpcCloseMemHandle = nullptr;
  }
  ResolveOptional(get, "cuDeviceGetUuid", kPhysicalUuidVersion, api.DeviceGetPhysicalUuid);
  return {};
}

Loaded Load() {
  Loaded loaded;
  // RTLD_NODELETE: the entry points stay valid for the life of the process.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): glibc keeps dlerror's text per thread.
    const char* why = dlerror();
    loaded.status = FailedPreconditionError(
        fmt::format("the NVIDIA driver is not installed (dlopen libcuda.so.1: {})",
                    why != nullptr ? why : "unknown error"));
    return loaded;
  }
  using DriverGetVersion = CUresult (*)(int*);
  using Init = CUresult (*)(unsigned int);
  auto get_version = reinterpret_cast<DriverGetVersion>(dlsym(library, "cuDriverGetVersion"));
  auto get_proc_address = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<Init>(dlsym(library, "cuInit"));
  if (get_version == nullptr || get_proc_address == nullptr || init == nullptr) {
    loaded.status = FailedPreconditionError(
        "libcuda.so.1 lacks cuDriverGetVersion, cuGetProcAddress_v2 or cuInit: a driver older "
        "than CUDA 12.0, which hurray needs");
    return loaded;
  }
  int version = 0;
  if (get_version(&version) != CUDA_SUCCESS || version < kMinimumDriverVersion) {
    loaded.status = FailedPreconditionError(
        fmt::format("libcuda.so.1 of CUDA {}.{} is older than 12.0, which hurray needs",
                    version / 1000, version % 1000 / 10));
    return loaded;
  }
  loaded.api.driver_version = version;
  loaded.get_proc_address = get_proc_address;
  if (Status resolved = ResolveAll(get_proc_address, loaded.api); !resolved) {
    loaded.status = resolved;
    return loaded;
  }
  if (const CUresult result = init(0); result != CUDA_SUCCESS) {
    Error error = CudaError(&loaded.api, "cuInit", result);
    loaded.status = std::unexpected(Error(StatusCode::kFailedPrecondition, error.message()));
  }
  return loaded;
}

const Loaded& LoadOnce() {
  static const Loaded loaded = Load();
  return loaded;
}

}  // namespace

Result<const DriverApi*> LoadDriver() {
  const Loaded& loaded = LoadOnce();
  if (!loaded.status) return std::unexpected(loaded.status.error());
  return &loaded.api;
}

Result<void*> DriverEntryPoint(const char* symbol, int version) {
  HURRAY_RETURN_IF_ERROR(LoadDriver());
  void* pointer = nullptr;
  HURRAY_RETURN_IF_ERROR(Resolve(LoadOnce().get_proc_address, symbol, version, pointer));
  return pointer;
}

Error CudaError(const DriverApi* api, std::string_view call, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api != nullptr) {
    if (api->GetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
    if (api->GetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  }
  const std::string shown =
      name != nullptr ? std::string(name) : fmt::format("CUresult {}", static_cast<int>(result));
  StatusCode code = StatusCode::kInternal;
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      code = StatusCode::kResourceExhausted;
      break;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_PERMITTED:
      code = StatusCode::kFailedPrecondition;
      break;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      code = StatusCode::kInvalidArgument;
      break;
    default:
      break;
  }
  return {code, text != nullptr ? fmt::format("{}: {} ({})", call, shown, text)
                                : fmt::format("{}: {}", call, shown)};
}

Status CheckCuda(const DriverApi& api, std::string_view call, CUresult result) {
  if (result == CUDA_SUCCESS) return {};
  return std::unexpected(CudaError(&api, call, result));
}

Result<DeviceUuids> ReadDeviceUuids(const DriverApi& api, CUdevice device) {
  CUuuid uuid{};
  HURRAY_RETURN_IF_ERROR(CheckCuda(api, "cuDeviceGetUuid_v2", api.DeviceGetUuid(&uuid, device)));
  CUuuid physical = uuid;  // Without the 11.0 call: as if a whole GPU.
  if (api.DeviceGetPhysicalUuid != nullptr) {
    HURRAY_RETURN_IF_ERROR(
        CheckCuda(api, "cuDeviceGetUuid", api.DeviceGetPhysicalUuid(&physical, device)));
  }
  const auto bytes_of = [](const CUuuid& value) {
    std::array<unsigned char, 16> bytes{};
    std::memcpy(bytes.data(), value.bytes, bytes.size());
    return bytes;
  };
  if (std::memcmp(uuid.bytes, physical.bytes, sizeof(uuid.bytes)) == 0) {
    return DeviceUuids{.uuid = FormatDeviceUuid(bytes_of(uuid))};
  }
  return DeviceUuids{.uuid = FormatDeviceUuid(bytes_of(uuid), "MIG-"),
                     .parent_uuid = FormatDeviceUuid(bytes_of(physical))};
}

std::string FormatDeviceUuid(const std::array<unsigned char, 16>& bytes, std::string_view prefix) {
  std::string text(prefix);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += fmt::format("{:02x}", bytes[i]);
  }
  return text;
}

}  // namespace hurray::cuda
