// DeviceMemoryMapper: the CUDA calls the client makes on device memory, behind a narrow
// interface so that the logic above it (DeviceSlabCache, fences) is tested on the CPU with a
// fake. The real implementation (cuda_device_memory_mapper.h) goes through the driver API
// loaded at run time (hurray/cuda/driver.h); this header needs no CUDA headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "hurray/v1/session.pb.h"

namespace hurray::client_internal {

// An address in this process's device address space (a CUdeviceptr's value); 0 is none.
using DeviceAddress = std::uint64_t;

// A CUDA slab to import, as the daemon granted it (client::GrantedSegment). Borrows the
// descriptor and the handle for the call.
struct SlabToImport {
  std::uint64_t segment_id = 0;
  v1::SegmentKind kind = v1::SEGMENT_KIND_CUDA_VMM;
  // SEGMENT_KIND_CUDA_VMM: the POSIX file descriptor (not consumed).
  int fd = -1;
  // SEGMENT_KIND_CUDA_LEGACY_IPC: the cudaIpcMemHandle_t's 64 bytes.
  std::string_view legacy_ipc_handle;
  // Bytes of the slab, and the device's allocation granularity (0: ask the driver).
  std::uint64_t size = 0;
  std::uint64_t granularity = 0;
  // This process's ordinal of the slab's device.
  int device_ordinal = 0;
  // Map read-only where the driver allows it (a consumer's grant).
  bool read_only = false;
};

// A slab mapped into this process. A plain record: DeviceMemoryMapper::Unmap undoes it.
struct MappedSlab {
  DeviceAddress address = 0;
  // Bytes of device address space the mapping takes.
  std::uint64_t size = 0;
  v1::SegmentKind kind = v1::SEGMENT_KIND_CUDA_VMM;
  int device_ordinal = 0;
  // Whether the mapping really is read-only: false when read-write was asked for, when the
  // driver refused read-only access (then mapped read-write), and for legacy handles.
  bool read_only = false;
  // The GPU's UUID, as the daemon granted it (set by DeviceSlabCache).
  std::string device_uuid;
};

// Thread-safe: the real implementation serializes nothing itself but every call is safe
// from any thread (the driver's calls are). Streams are the caller's (CudaStream values:
// a CUstream, null for the legacy default stream of the current context).
class DeviceMemoryMapper {
 public:
  virtual ~DeviceMemoryMapper() = default;

  // This process's CUDA ordinal of the device whose UUID is `device_uuid` ("GPU-..." or
  // "MIG-..."). FAILED_PRECONDITION "GPU <uuid> is not visible to this process
  // (CUDA_VISIBLE_DEVICES=...)" when no visible device has it.
  [[nodiscard]] virtual Result<int> DeviceOrdinalOf(std::string_view device_uuid) = 0;
  // Bytes of memory of device `device_ordinal`.
  [[nodiscard]] virtual Result<std::uint64_t> DeviceMemoryBytes(int device_ordinal) = 0;

  // Imports a slab and maps it on its device, readable (and writable unless read-only
  // access was granted) from every context of the device. The driver's error, with
  // nothing left imported or reserved.
  [[nodiscard]] virtual Result<MappedSlab> ImportAndMap(const SlabToImport& slab) = 0;
  // Unmaps a slab ImportAndMap mapped (the device memory stays the daemon's).
  virtual void Unmap(const MappedSlab& slab) = 0;

  // Page-locks host memory [host, host + size) of this process for the device and returns
  // its device address (registered for every context: portable). `read_only`: the memory is
  // mapped read-only (CU_MEMHOSTREGISTER_READ_ONLY); FAILED_PRECONDITION when the device
  // does not support read-only registrations.
  [[nodiscard]] virtual Result<DeviceAddress> RegisterHostMemory(void* host, std::uint64_t size,
                                                                 int device_ordinal,
                                                                 bool read_only) = 0;
  // Ends a registration of RegisterHostMemory, in the context it was made in, from any
  // thread (whatever context is current there).
  virtual void UnregisterHostMemory(void* host) = 0;

  // Enqueues on `stream` a wait until the 64-bit word at `address` reaches `value`
  // (cuStreamWaitValue64, GEQ: the cyclic compare of FenceWordReaches), or a write of
  // `value` there (cuStreamWriteValue64) after the work already queued. Enqueued in the
  // stream's own context (cuStreamGetCtx); for the null stream (0, or CU_STREAM_LEGACY or
  // CU_STREAM_PER_THREAD), in the primary context
  // of device `device_ordinal`, the device of the tensor: never in whatever context the
  // calling thread happens to have current.
  [[nodiscard]] virtual Status WaitValue(void* stream, int device_ordinal, DeviceAddress address,
                                         std::uint64_t value) = 0;
  [[nodiscard]] virtual Status WriteValue(void* stream, int device_ordinal, DeviceAddress address,
                                          std::uint64_t value) = 0;

  // A new event (a CUevent) of device `device_ordinal`, recorded on a stream of its own
  // of the device after a wait until the word at `address` is >= `value` (no wait when
  // `address` is 0): it completes once the data is ready. Destroy it with DestroyEvent, from
  // any thread: it is destroyed in its device's context.
  [[nodiscard]] virtual Result<void*> RecordEventAfterWait(int device_ordinal,
                                                           DeviceAddress address,
                                                           std::uint64_t value) = 0;
  virtual void DestroyEvent(void* event) = 0;

  // Enqueues, on a stream of its own of device `device_ordinal`, a wait until the word at
  // `wait_address` reaches `wait_value` (the cyclic compare), then a write of `write_value`
  // at `write_address`; returns at once. The stream goes once its work is done.
  [[nodiscard]] virtual Status RelayValue(int device_ordinal, DeviceAddress wait_address,
                                          std::uint64_t wait_value, DeviceAddress write_address,
                                          std::uint64_t write_value) = 0;

  // Enqueues on `stream` (its context as WaitValue's) a call of `function(data)` on a driver
  // thread once the work queued before it is done (cuLaunchHostFunc). `function` must make
  // no CUDA call.
  [[nodiscard]] virtual Status LaunchHostFunction(void* stream, int device_ordinal,
                                                  void (*function)(void*), void* data) = 0;
};

// The real mapper over this process's CUDA driver. FAILED_PRECONDITION with the reason
// when there is none (hurray::cuda::LoadDriver's), or when the client was built without
// CUDA support.
[[nodiscard]] Result<std::unique_ptr<DeviceMemoryMapper>> CreateCudaDeviceMemoryMapper();

}  // namespace hurray::client_internal
