// The DeviceMemoryMapper of this process's CUDA driver (CreateCudaDeviceMemoryMapper).
#include <fmt/format.h>

#include "device/device_memory_mapper.h"

#if HURRAY_HAVE_CUDA

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "hurray/cuda/driver.h"

namespace hurray::client_internal {
namespace {

// Makes device `device_ordinal`'s primary context current for a scope, and the caller's
// context current again afterwards: the client never changes which context a caller's
// thread works in. Not copyable.
class ScopedDeviceContext {
 public:
  ScopedDeviceContext(const cuda::DriverApi& api, CUcontext context) : api_(api) {
    (void)api_.CtxGetCurrent(&previous_);
    (void)api_.CtxSetCurrent(context);
  }
  ~ScopedDeviceContext() { (void)api_.CtxSetCurrent(previous_); }
  ScopedDeviceContext(const ScopedDeviceContext&) = delete;
  ScopedDeviceContext& operator=(const ScopedDeviceContext&) = delete;

 private:
  const cuda::DriverApi& api_;
  CUcontext previous_ = nullptr;
};

CUdeviceptr Pointer(DeviceAddress address) { return static_cast<CUdeviceptr>(address); }

class CudaDeviceMemoryMapper final : public DeviceMemoryMapper {
 public:
  explicit CudaDeviceMemoryMapper(const cuda::DriverApi& api) : api_(api) {}
  ~CudaDeviceMemoryMapper() override;

  Result<int> DeviceOrdinalOf(std::string_view device_uuid) override;
  Result<std::uint64_t> DeviceMemoryBytes(int device_ordinal) override;
  Result<MappedSlab> ImportAndMap(const SlabToImport& slab) override;
  void Unmap(const MappedSlab& slab) override;
  Result<DeviceAddress> RegisterHostMemory(void* host, std::uint64_t size, int device_ordinal,
                                           bool read_only) override;
  void UnregisterHostMemory(void* host) override;
  Status WaitValue(void* stream, int device_ordinal, DeviceAddress address,
                   std::uint64_t value) override;
  Status WriteValue(void* stream, int device_ordinal, DeviceAddress address,
                    std::uint64_t value) override;
  Result<void*> RecordEventAfterWait(int device_ordinal, DeviceAddress address,
                                     std::uint64_t value) override;
  void DestroyEvent(void* event) override;
  Status RelayValue(int device_ordinal, DeviceAddress wait_address, std::uint64_t wait_value,
                    DeviceAddress write_address, std::uint64_t write_value) override;
  Status LaunchHostFunction(void* stream, int device_ordinal, void (*function)(void*),
                            void* data) override;

 private:
  struct Device {
    CUdevice device = 0;
    CUcontext context = nullptr;  // The retained primary context.
  };
  // Device `device_ordinal`, its primary context retained on first use.
  Result<Device*> DeviceAt(int device_ordinal);
  // The context work on `stream` runs in: the stream's own (cuStreamGetCtx), or for the null
  // stream and the other special handles device `device_ordinal`'s primary context.
  Result<CUcontext> ContextOf(void* stream, int device_ordinal);
  // The context `key` (a registered host address, an event) was made in, forgotten; null
  // when it is not known.
  CUcontext TakeContext(std::map<const void*, CUcontext>& contexts, const void* key);
  Result<MappedSlab> MapVmm(const SlabToImport& slab);
  Status SetAccess(CUdeviceptr address, std::uint64_t size, int device_ordinal, bool read_only);
  // A new non-blocking stream of the current context, destroyed with this.
  struct OwnStream {
    OwnStream(const cuda::DriverApi& driver, CUstream created) : api(&driver), stream(created) {}
    OwnStream(OwnStream&& other) noexcept
        : api(other.api), stream(std::exchange(other.stream, nullptr)) {}
    OwnStream(const OwnStream&) = delete;
    OwnStream& operator=(const OwnStream&) = delete;
    OwnStream& operator=(OwnStream&&) = delete;
    ~OwnStream();
    const cuda::DriverApi* api;
    CUstream stream;
  };
  [[nodiscard]] Result<OwnStream> CreateOwnStream() const;

  const cuda::DriverApi& api_;
  std::mutex mutex_;
  std::map<int, Device> devices_;  // Guarded by mutex_.
  // The context of each live host registration and event: the driver ends them only in it
  // (CUDA_ERROR_INVALID_CONTEXT without one). Guarded by mutex_.
  std::map<const void*, CUcontext> registrations_;
  std::map<const void*, CUcontext> events_;
};

CudaDeviceMemoryMapper::~CudaDeviceMemoryMapper() {
  for (auto& [ordinal, device] : devices_) (void)api_.DevicePrimaryCtxRelease(device.device);
}

Result<CudaDeviceMemoryMapper::Device*> CudaDeviceMemoryMapper::DeviceAt(int device_ordinal) {
  std::lock_guard lock(mutex_);
  if (auto found = devices_.find(device_ordinal); found != devices_.end()) return &found->second;
  Device device;
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api_, "cuDeviceGet", api_.DeviceGet(&device.device, device_ordinal)));
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api_, "cuDevicePrimaryCtxRetain",
                      api_.DevicePrimaryCtxRetain(&device.context, device.device)));
  return &devices_.emplace(device_ordinal, device).first->second;
}

Result<CUcontext> CudaDeviceMemoryMapper::ContextOf(void* stream, int device_ordinal) {
  // The special handles stand for a stream of whatever context is current (cuStreamGetCtx
  // answers that one): the tensor's device's primary context is made current instead.
  const bool special =
      stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
  if (!special) {
    CUcontext context = nullptr;
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
        api_, "cuStreamGetCtx", api_.StreamGetCtx(static_cast<CUstream>(stream), &context)));
    return context;
  }
  HURRAY_ASSIGN_OR_RETURN(const Device* device, DeviceAt(device_ordinal));
  return device->context;
}

CUcontext CudaDeviceMemoryMapper::TakeContext(std::map<const void*, CUcontext>& contexts,
                                              const void* key) {
  std::lock_guard lock(mutex_);
  auto found = contexts.find(key);
  if (found == contexts.end()) return nullptr;
  CUcontext context = found->second;
  contexts.erase(found);
  return context;
}

Result<int> CudaDeviceMemoryMapper::DeviceOrdinalOf(std::string_view device_uuid) {
  int count = 0;
  HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(api_, "cuDeviceGetCount", api_.DeviceGetCount(&count)));
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(api_, "cuDeviceGet", api_.DeviceGet(&device, ordinal)));
    // The names PoolStats gives the daemon's devices ("MIG-..." for a MIG instance).
    HURRAY_ASSIGN_OR_RETURN(const cuda::DeviceUuids names, cuda::ReadDeviceUuids(api_, device));
    if (names.uuid == device_uuid) return ordinal;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the client never changes its environment.
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return FailedPreconditionError(
      fmt::format("GPU {} is not visible to this process (CUDA_VISIBLE_DEVICES={})", device_uuid,
                  visible == nullptr ? "<unset>" : visible));
}

Result<std::uint64_t> CudaDeviceMemoryMapper::DeviceMemoryBytes(int device_ordinal) {
  HURRAY_ASSIGN_OR_RETURN(const Device* device, DeviceAt(device_ordinal));
  std::size_t bytes = 0;
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api_, "cuDeviceTotalMem", api_.DeviceTotalMem(&bytes, device->device)));
  return bytes;
}

Status CudaDeviceMemoryMapper::SetAccess(CUdeviceptr address, std::uint64_t size,
                                         int device_ordinal, bool read_only) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_ordinal;
  access.flags = read_only ? CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return cuda::CheckCuda(api_, "cuMemSetAccess", api_.MemSetAccess(address, size, &access, 1));
}

Result<MappedSlab> CudaDeviceMemoryMapper::MapVmm(const SlabToImport& slab) {
  CUmemGenericAllocationHandle handle = 0;
  // The driver API takes the descriptor's value in the pointer.
  void* shareable = reinterpret_cast<void*>(static_cast<std::intptr_t>(slab.fd));  // NOLINT
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api_, "cuMemImportFromShareableHandle",
                      api_.MemImportFromShareableHandle(&handle, shareable,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)));
  // Mapped, the memory keeps itself alive: the handle is released either way.
  struct ReleaseHandle {
    const cuda::DriverApi& api;
    CUmemGenericAllocationHandle handle;
    ~ReleaseHandle() { (void)api.MemRelease(handle); }
  } release{api_, handle};
  std::size_t granularity = slab.granularity;
  if (granularity == 0) {
    CUmemAllocationProp properties{};
    properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    properties.location = {CU_MEM_LOCATION_TYPE_DEVICE, slab.device_ordinal};
    properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    HURRAY_RETURN_IF_ERROR(
        cuda::CheckCuda(api_, "cuMemGetAllocationGranularity",
                        api_.MemGetAllocationGranularity(&granularity, &properties,
                                                         CU_MEM_ALLOC_GRANULARITY_MINIMUM)));
  }
  CUdeviceptr address = 0;
  HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
      api_, "cuMemAddressReserve", api_.MemAddressReserve(&address, slab.size, granularity, 0, 0)));
  Status mapped = cuda::CheckCuda(api_, "cuMemMap", api_.MemMap(address, slab.size, 0, handle, 0));
  bool read_only = slab.read_only;
  if (mapped) {
    mapped = SetAccess(address, slab.size, slab.device_ordinal, read_only);
    if (!mapped && read_only) {
      // Drivers without read-only device mappings refuse PROT_READ: map read-write, and
      // say so (MappedSlab::read_only, reported to the daemon's Stats).
      read_only = false;
      mapped = SetAccess(address, slab.size, slab.device_ordinal, false);
    }
    if (!mapped) (void)api_.MemUnmap(address, slab.size);
  }
  if (!mapped) {
    (void)api_.MemAddressFree(address, slab.size);
    return std::unexpected(mapped.error().WithContext(fmt::format("slab {}", slab.segment_id)));
  }
  return MappedSlab{.address = address,
                    .size = slab.size,
                    .kind = slab.kind,
                    .device_ordinal = slab.device_ordinal,
                    .read_only = read_only};
}

Result<MappedSlab> CudaDeviceMemoryMapper::ImportAndMap(const SlabToImport& slab) {
  HURRAY_ASSIGN_OR_RETURN(const Device* device, DeviceAt(slab.device_ordinal));
  ScopedDeviceContext current(api_, device->context);
  if (slab.kind == v1::SEGMENT_KIND_CUDA_VMM) return MapVmm(slab);
  CUipcMemHandle handle{};
  if (slab.legacy_ipc_handle.size() != sizeof(handle.reserved)) {
    return InternalError(fmt::format("slab {}: legacy IPC handle of {} bytes, not {}",
                                     slab.segment_id, slab.legacy_ipc_handle.size(),
                                     sizeof(handle.reserved)));
  }
  std::memcpy(handle.reserved, slab.legacy_ipc_handle.data(), sizeof(handle.reserved));
  if (api_.IpcOpenMemHandle == nullptr) {
    return FailedPreconditionError(
        fmt::format("slab {} is shared through legacy IPC, and this process's CUDA driver has no "
                    "cuIpcOpenMemHandle",
                    slab.segment_id));
  }
  CUdeviceptr address = 0;
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api_, "cuIpcOpenMemHandle",
                      api_.IpcOpenMemHandle(&address, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)));
  // Legacy handles open read-write only.
  return MappedSlab{.address = address,
                    .size = slab.size,
                    .kind = slab.kind,
                    .device_ordinal = slab.device_ordinal,
                    .read_only = false};
}

void CudaDeviceMemoryMapper::Unmap(const MappedSlab& slab) {
  auto device = DeviceAt(slab.device_ordinal);
  if (!device) return;
  ScopedDeviceContext current(api_, (*device)->context);
  if (slab.kind == v1::SEGMENT_KIND_CUDA_LEGACY_IPC) {
    if (api_.IpcCloseMemHandle != nullptr) (void)api_.IpcCloseMemHandle(Pointer(slab.address));
    return;
  }
  (void)api_.MemUnmap(Pointer(slab.address), slab.size);
  (void)api_.MemAddressFree(Pointer(slab.address), slab.size);
}

Result<DeviceAddress> CudaDeviceMemoryMapper::RegisterHostMemory(void* host, std::uint64_t size,
                                                                 int device_ordinal,
                                                                 bool read_only) {
  HURRAY_ASSIGN_OR_RETURN(const Device* device, DeviceAt(device_ordinal));
  ScopedDeviceContext current(api_, device->context);
  unsigned int flags = CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE;
  if (read_only) {
    int supported = 0;
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
        api_, "cuDeviceGetAttribute",
        api_.DeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED,
                                device->device)));
    if (supported == 0) {
      return FailedPreconditionError(fmt::format(
          "device {} cannot register read-only host memory, which a consumer's fence needs "
          "(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED is 0)",
          device_ordinal));
    }
    flags |= CU_MEMHOSTREGISTER_READ_ONLY;
  }
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api_, "cuMemHostRegister", api_.MemHostRegister(host, size, flags)));
  CUdeviceptr address = 0;
  if (Status found = cuda::CheckCuda(api_, "cuMemHostGetDevicePointer",
                                     api_.MemHostGetDevicePointer(&address, host, 0));
      !found) {
    (void)api_.MemHostUnregister(host);
    return std::unexpected(found.error());
  }
  std::lock_guard lock(mutex_);
  registrations_[host] = device->context;
  return address;
}

void CudaDeviceMemoryMapper::UnregisterHostMemory(void* host) {
  CUcontext context = TakeContext(registrations_, host);
  if (context == nullptr) return;
  ScopedDeviceContext current(api_, context);
  (void)api_.MemHostUnregister(host);
}

Status CudaDeviceMemoryMapper::WaitValue(void* stream, int device_ordinal, DeviceAddress address,
                                         std::uint64_t value) {
  HURRAY_ASSIGN_OR_RETURN(CUcontext context, ContextOf(stream, device_ordinal));
  ScopedDeviceContext current(api_, context);
  return cuda::CheckCuda(api_, "cuStreamWaitValue64",
                         api_.StreamWaitValue64(static_cast<CUstream>(stream), Pointer(address),
                                                value, CU_STREAM_WAIT_VALUE_GEQ));
}

Status CudaDeviceMemoryMapper::WriteValue(void* stream, int device_ordinal, DeviceAddress address,
                                          std::uint64_t value) {
  HURRAY_ASSIGN_OR_RETURN(CUcontext context, ContextOf(stream, device_ordinal));
  ScopedDeviceContext current(api_, context);
  return cuda::CheckCuda(api_, "cuStreamWriteValue64",
                         api_.StreamWriteValue64(static_cast<CUstream>(stream), Pointer(address),
                                                 value, CU_STREAM_WRITE_VALUE_DEFAULT));
}

CudaDeviceMemoryMapper::OwnStream::~OwnStream() {
  if (stream != nullptr) (void)api->StreamDestroy(stream);
}

Result<CudaDeviceMemoryMapper::OwnStream> CudaDeviceMemoryMapper::CreateOwnStream() const {
  // A stream of its own for each wait: on a shared one, each wait would start only after
  // every earlier one, and one fence that is never reached would hold up every later ready
  // tensor of the device. Destroyed at once: the driver releases it once its work is done.
  CUstream stream = nullptr;
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api_, "cuStreamCreate", api_.StreamCreate(&stream, CU_STREAM_NON_BLOCKING)));
  return OwnStream(api_, stream);
}

Status CudaDeviceMemoryMapper::RelayValue(int device_ordinal, DeviceAddress wait_address,
                                          std::uint64_t wait_value, DeviceAddress write_address,
                                          std::uint64_t write_value) {
  HURRAY_ASSIGN_OR_RETURN(Device * device, DeviceAt(device_ordinal));
  ScopedDeviceContext current(api_, device->context);
  HURRAY_ASSIGN_OR_RETURN(const OwnStream own, CreateOwnStream());
  HURRAY_RETURN_IF_ERROR(WaitValue(own.stream, device_ordinal, wait_address, wait_value));
  return WriteValue(own.stream, device_ordinal, write_address, write_value);
}

Status CudaDeviceMemoryMapper::LaunchHostFunction(void* stream, int device_ordinal,
                                                  void (*function)(void*), void* data) {
  HURRAY_ASSIGN_OR_RETURN(CUcontext context, ContextOf(stream, device_ordinal));
  ScopedDeviceContext current(api_, context);
  return cuda::CheckCuda(api_, "cuLaunchHostFunc",
                         api_.LaunchHostFunc(static_cast<CUstream>(stream), function, data));
}

Result<void*> CudaDeviceMemoryMapper::RecordEventAfterWait(int device_ordinal,
                                                           DeviceAddress address,
                                                           std::uint64_t value) {
  HURRAY_ASSIGN_OR_RETURN(Device * device, DeviceAt(device_ordinal));
  ScopedDeviceContext current(api_, device->context);
  HURRAY_ASSIGN_OR_RETURN(const OwnStream own, CreateOwnStream());
  CUstream stream = own.stream;
  if (address != 0) HURRAY_RETURN_IF_ERROR(WaitValue(stream, device_ordinal, address, value));
  CUevent event = nullptr;
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api_, "cuEventCreate", api_.EventCreate(&event, CU_EVENT_DISABLE_TIMING)));
  if (Status recorded = cuda::CheckCuda(api_, "cuEventRecord", api_.EventRecord(event, stream));
      !recorded) {
    (void)api_.EventDestroy(event);
    return std::unexpected(recorded.error());
  }
  std::lock_guard lock(mutex_);
  events_[event] = device->context;
  return static_cast<void*>(event);
}

void CudaDeviceMemoryMapper::DestroyEvent(void* event) {
  CUcontext context = TakeContext(events_, event);
  if (context == nullptr) return;
  ScopedDeviceContext current(api_, context);
  (void)api_.EventDestroy(static_cast<CUevent>(event));
}

}  // namespace

Result<std::unique_ptr<DeviceMemoryMapper>> CreateCudaDeviceMemoryMapper() {
  HURRAY_ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::LoadDriver());
  return std::unique_ptr<DeviceMemoryMapper>(new CudaDeviceMemoryMapper(*api));
}

}  // namespace hurray::client_internal

#else  // !HURRAY_HAVE_CUDA

namespace hurray::client_internal {

Result<std::unique_ptr<DeviceMemoryMapper>> CreateCudaDeviceMemoryMapper() {
  return FailedPreconditionError(
      "this hurray client was built without CUDA support (no CUDA toolkit at build time)");
}

}  // namespace hurray::client_internal

#endif  // HURRAY_HAVE_CUDA
