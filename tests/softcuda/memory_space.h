// The software device memory of this process. Device pointers are plain host addresses;
// device memory is memfd memory, so that it can be shared with other processes:
// - VMM: cuMemCreate makes a memfd; exporting dups it; importing takes such a descriptor
//   from any process; cuMemAddressReserve is a PROT_NONE reservation; cuMemMap maps the
//   memfd over it (still PROT_NONE) and cuMemSetAccess opens it for reading, or reading and
//   writing, so that a write through a read-only mapping faults as on a GPU.
// - cuMemAlloc: a memfd mapped read-write. Its legacy IPC handle names the exporting
//   process and descriptor; the importer opens /proc/<pid>/fd/<n>. Limitation: the two
//   processes must be allowed to read each other's /proc/<pid>/fd (same user), and the
//   exporter must be alive when the handle is opened.
// - Registered host memory, visible to streams at its own address.
//
// Each call refuses misuse (refusal.h) and returns the driver's documented error; budgets:
// a device's total memory, and HURRAY_SOFTCUDA_OOM_AFTER_BYTES for all of them together.
// Thread-safe: one mutex guards every table.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

namespace softcuda {

// The granularity of every allocation and reservation (MINIMUM and RECOMMENDED), as on Hopper.
inline constexpr std::size_t kGranularity = std::size_t{2} << 20;

// Who may touch a range of device addresses.
enum class Access : std::uint8_t { kNone, kRead, kReadWrite };

class MemoryFile;

class MemorySpace {
 public:
  MemorySpace();

  // VMM. `limit` is the device's total memory; `properties` were checked by the caller.
  CUresult Create(CUmemGenericAllocationHandle* handle, std::size_t size,
                  const CUmemAllocationProp& properties, std::size_t limit);
  CUresult Release(CUmemGenericAllocationHandle handle);
  // cuMemGetAllocationPropertiesFromHandle: the properties `handle` was created with.
  // CUDA_ERROR_NOT_SUPPORTED for an imported handle (softcuda does not carry them across
  // processes).
  CUresult Properties(CUmemAllocationProp* properties, CUmemGenericAllocationHandle handle) const;
  CUresult Export(int* fd, CUmemGenericAllocationHandle handle);
  CUresult Import(CUmemGenericAllocationHandle* handle, int fd);
  CUresult Reserve(CUdeviceptr* address, std::size_t size, std::size_t alignment);
  CUresult FreeAddress(CUdeviceptr address, std::size_t size);
  CUresult Map(CUdeviceptr address, std::size_t size, std::size_t offset,
               CUmemGenericAllocationHandle handle);
  CUresult Unmap(CUdeviceptr address, std::size_t size);
  // cuMemSetAccess: the mapping opens for `access` (for every device: they share it), and
  // remembers the flags of each of `descriptions` for its device, for GetAccess.
  CUresult SetAccess(CUdeviceptr address, std::size_t size, Access access,
                     const CUmemAccessDesc* descriptions, std::size_t count);
  // cuMemGetAccess: the flags cuMemSetAccess last set for `device` on the mapping that holds
  // `address` (CU_MEM_ACCESS_FLAGS_PROT_NONE before any); CUDA_ERROR_INVALID_VALUE where
  // nothing is mapped.
  CUresult GetAccess(unsigned long long* flags,  // NOLINT(google-runtime-int): cuda.h's type.
                     CUdevice device, CUdeviceptr address) const;

  // cuMemAlloc, cuMemFree and legacy IPC.
  CUresult Allocate(CUdeviceptr* address, std::size_t size, CUdevice device, std::size_t limit);
  CUresult Free(CUdeviceptr address);
  CUresult IpcGet(CUipcMemHandle* handle, CUdeviceptr address);
  CUresult IpcOpen(CUdeviceptr* address, const CUipcMemHandle& handle);
  CUresult IpcClose(CUdeviceptr address);

  // Registered host memory.
  CUresult Register(void* host, std::size_t size, bool read_only);
  CUresult Unregister(void* host);
  CUresult DevicePointer(CUdeviceptr* address, void* host);

  // What a stream may do with [address, address + size): the access of the one mapping,
  // allocation or registration that holds all of it.
  [[nodiscard]] Access AccessOf(CUdeviceptr address, std::size_t size) const;
  // Bytes of device `device` made by this process and still alive.
  [[nodiscard]] static std::size_t LiveBytes(CUdevice device);

 private:
  struct Range {
    std::size_t size = 0;
    Access access = Access::kNone;
    std::shared_ptr<MemoryFile> file;  // Null for registered host memory.
    // VMM mappings: the flags cuMemSetAccess set, per device (absent: PROT_NONE).
    std::map<CUdevice, CUmemAccess_flags> device_flags;
  };
  struct IpcKey {
    std::int32_t pid;
    std::int32_t fd;
    std::uint64_t inode;
    auto operator<=>(const IpcKey&) const = default;
  };
  struct IpcMapping {
    std::size_t size = 0;
    IpcKey key{};
    int references = 0;
  };

  CUresult CheckBudget(std::string_view call, std::size_t size, CUdevice device,
                       std::size_t limit) const;
  static const Range* Find(const std::map<std::uintptr_t, Range>& table, std::uintptr_t address,
                           std::size_t size);

  const std::size_t process_limit_;  // HURRAY_SOFTCUDA_OOM_AFTER_BYTES; 0: none.
  mutable std::mutex mutex_;
  CUmemGenericAllocationHandle next_handle_ = 0x5000;  // Guarded by mutex_.
  std::map<CUmemGenericAllocationHandle, std::shared_ptr<MemoryFile>> handles_;  // mutex_.
  // What cuMemCreate was given, for the live handles it made. Guarded by mutex_.
  std::map<CUmemGenericAllocationHandle, CUmemAllocationProp> created_;
  std::map<std::uintptr_t, std::size_t> reservations_;  // Guarded by mutex_.
  std::map<std::uintptr_t, Range> mappings_;            // Guarded by mutex_.
  std::map<std::uintptr_t, Range> allocations_;         // Guarded by mutex_.
  std::map<std::uintptr_t, Range> registrations_;       // Guarded by mutex_.
  std::map<std::uintptr_t, IpcMapping> ipc_mappings_;   // Guarded by mutex_.
};

}  // namespace softcuda
