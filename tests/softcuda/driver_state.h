// softcuda: a software stand-in for the CUDA driver, libcuda.so.1, for tests. It is never a
// GPU: device memory is host memory (memfd), streams are threads, kernels do not exist. It
// implements the driver API subset hurray calls and keeps the rules the CUDA 13.0 cuda.h
// documents for them; misuse is refused with the documented error and a "softcuda:" line on
// stderr (refusal.h). Product code must not know it exists: tests put its directory first on
// LD_LIBRARY_PATH and product code dlopens it as the real driver.
//
// This header: the state of the driver in this process (devices, primary contexts, live
// streams and events, memory) and the checks every entry point starts with.
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

#include "device_table.h"
#include "memory_space.h"
#include "stream.h"

// cuDeviceGetUuid as CUDA 9.2 to 11.3 defined it; cuda.h names only the _v2 (MIG-aware) call.
#undef cuDeviceGetUuid
extern "C" CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device);

// A device's primary context. Guarded by DriverState::mutex().
struct CUctx_st {
  CUdevice device = 0;
  int retains = 0;                        // Active while above 0.
  CUstream_st* default_stream = nullptr;  // The NULL stream; made on first use, never freed.
};

namespace softcuda {

// The driver's version: CUDA 13.0 unless HURRAY_SOFTCUDA_DRIVER_VERSION says another (an
// older driver than a program's CUDA runtime needs: cuDriverGetVersion says it, and
// cuGetProcAddress refuses newer versions).
inline constexpr int kDriverVersion = 13000;
[[nodiscard]] int DriverVersion();

// Thread-safe: every member is guarded by mutex(), except the device table and the memory
// space, which are built once by cuInit and thread-safe themselves.
class DriverState {
 public:
  // The one state of the process; never destroyed (stream threads may outlive main).
  static DriverState& Get();

  // cuInit: reads the environment once; CUDA_ERROR_NO_DEVICE without devices.
  CUresult Initialize();
  [[nodiscard]] bool initialized() const;

  // Valid once initialized.
  [[nodiscard]] const DeviceTable& devices() const { return devices_; }
  [[nodiscard]] MemorySpace& memory() { return *memory_; }
  [[nodiscard]] CUctx_st* PrimaryContext(CUdevice device) { return &contexts_.at(device); }
  [[nodiscard]] bool IsContext(CUcontext context) const;

  std::mutex& mutex() { return mutex_; }
  // The registries of live handles; callers hold mutex().
  std::set<CUstream>& streams() { return streams_; }
  std::set<CUevent>& events() { return events_; }

 private:
  DriverState() = default;

  mutable std::mutex mutex_;
  std::once_flag initialized_once_;
  CUresult initialize_result_ = CUDA_ERROR_NOT_INITIALIZED;  // Written once, under the flag.
  DeviceTable devices_;
  std::unique_ptr<MemorySpace> memory_;
  std::vector<CUctx_st> contexts_;  // One per device; never resized after cuInit.
  std::set<CUstream> streams_;      // Guarded by mutex_.
  std::set<CUevent> events_;        // Guarded by mutex_.
};

// The calling thread's current context (null: none).
CUcontext& CurrentContext();

// CUDA_SUCCESS once cuInit succeeded; else CUDA_ERROR_NOT_INITIALIZED, refused for `call`.
CUresult CheckInitialized(std::string_view call);
// Whether this thread runs a host function (cuLaunchHostFunc) now: every call is refused.
bool& InHostFunction();
// CheckInitialized, then the current context, which must be active: else
// CUDA_ERROR_INVALID_CONTEXT, refused for `call`.
CUresult CheckCurrentContext(std::string_view call, CUcontext* context);
// CheckInitialized, then `device` must be valid: else CUDA_ERROR_INVALID_DEVICE.
CUresult CheckDevice(std::string_view call, CUdevice device);
// The stream `stream` names: a live stream, or for NULL, CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD, the current context's default stream (which needs a current
// context). CUDA_ERROR_INVALID_HANDLE for a stream that is not live.
CUresult ResolveStream(std::string_view call, CUstream stream, CUstream_st** resolved);
// Whether a device may `access` [address, address + size): else CUDA_ERROR_INVALID_VALUE.
CUresult CheckDeviceAccess(std::string_view call, CUdeviceptr address, std::size_t size,
                           Access access);
// The device attribute's value, for checks of "supported" attributes.
int AttributeOf(CUdevice_attribute attribute);

}  // namespace softcuda
