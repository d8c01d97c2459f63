// SlabMemory: where a CUDA pool gets its device memory from, one slab at a time. The narrow
// interface every CUDA call of a pool sits behind, so that CudaPool's bookkeeping is tested
// on the CPU (tests/daemon/pool's memfd-backed fake) and the driver is needed only by
// CudaSlabMemory.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::daemon {

// How a slab reaches a client.
enum class SlabMechanism : std::uint8_t {
  // cuMemCreate memory exported as a POSIX file descriptor, a capability the daemon sends
  // over the session socket (SCM_RIGHTS).
  kVmm,
  // cuMemAlloc memory shared as a 64-byte cudaIpcMemHandle: any process that learns the
  // bytes can open the memory, so they travel only on the session socket. For devices that
  // cannot export file descriptors.
  kLegacyIpc,
};

// "vmm" or "legacy_ipc", as PoolStats.mechanism says it.
[[nodiscard]] constexpr std::string_view SlabMechanismName(SlabMechanism mechanism) {
  return mechanism == SlabMechanism::kVmm ? "vmm" : "legacy_ipc";
}

// The bytes of a cudaIpcMemHandle_t (CU_IPC_HANDLE_SIZE).
inline constexpr std::size_t kLegacyIpcHandleBytes = 64;
using LegacyIpcHandle = std::array<std::uint8_t, kLegacyIpcHandleBytes>;

// What a client is given to reach one slab: `fd` for kVmm, `legacy_ipc_handle` for
// kLegacyIpc (the other is left empty).
struct SlabExport {
  UniqueFd fd;
  LegacyIpcHandle legacy_ipc_handle{};
};

// Device memory of one device, in slabs that the daemon never maps. A slab is named by an
// opaque handle that only this object interprets (0 is never a handle).
//
// Thread-safe: every method may be called from any thread. A caller must not Export or
// Release a handle while another thread releases it (CudaPool calls every method with its
// own mutex held).
class SlabMemory {
 public:
  virtual ~SlabMemory() = default;

  [[nodiscard]] virtual SlabMechanism mechanism() const = 0;

  // Bytes every slab size is a multiple of: a power of two, at least 4096 (for VMM the
  // device's minimum allocation granularity, 2 MiB on current GPUs).
  [[nodiscard]] virtual std::uint64_t granularity() const = 0;

  // Slabs are allocated GPUDirect RDMA capable (kVmm on a device that supports it), so that
  // a client may register a tensor's memory with a NIC.
  [[nodiscard]] virtual bool gpu_direct_rdma() const = 0;

  // A new slab of `bytes` (> 0, a multiple of granularity()). RESOURCE_EXHAUSTED when the
  // device has no room for it; other errors name the failed call. Nothing is left behind on
  // failure.
  [[nodiscard]] virtual Result<std::uint64_t> Create(std::uint64_t bytes) = 0;

  // What a client gets to reach slab `handle`: for kVmm a fresh descriptor at each call
  // (the caller owns it; it carries no access mode: clients choose their mapping's
  // protection), for kLegacyIpc the handle's bytes. Errors name the failed call.
  [[nodiscard]] virtual Result<SlabExport> Export(std::uint64_t handle) const = 0;

  // Frees slab `handle` (CudaPool releases only slabs without live ranges). For kVmm, memory
  // that clients imported stays valid until they unmap it (the driver counts their
  // references). Failures are logged, never returned: nothing could follow them.
  virtual void Release(std::uint64_t handle) = 0;
};

}  // namespace hurray::daemon
