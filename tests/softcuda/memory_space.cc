#include "memory_space.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "refusal.h"

namespace softcuda {
namespace {

constexpr std::size_t kMaxDevices = 64;
constexpr std::size_t kPageSize = 4096;
constexpr const char* kMemfdName = "softcuda";

// Bytes made by this process and alive, per device and in all.
std::array<std::atomic<std::size_t>, kMaxDevices> live_bytes{};
std::atomic<std::size_t> total_live_bytes{0};

// What a legacy IPC handle carries in CUipcMemHandle::reserved.
struct IpcPayload {
  std::array<char, 8> magic;
  std::int32_t pid;
  std::int32_t fd;
  std::uint64_t inode;
  std::uint64_t size;
};
static_assert(sizeof(IpcPayload) <= CU_IPC_HANDLE_SIZE);
constexpr std::array<char, 8> kIpcMagic{'s', 'o', 'f', 't', 'c', 'u', 'd', 'a'};

std::string Hex(std::uintptr_t value) {
  std::array<char, 24> text{};
  (void)std::snprintf(text.data(), text.size(), "0x%zx", static_cast<std::size_t>(value));
  return text.data();
}

void* AddressOf(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr): the API's.
}

// Whether [address, address + size) is mapped in this process, and writable: nullopt when
// some of it is not mapped at all.
std::optional<bool> HostRangeWritable(std::uintptr_t address, std::size_t size) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::uintptr_t covered = address;
  bool writable = true;
  const std::uintptr_t end = address + size;
  while (covered < end && std::getline(maps, line)) {
    std::uintptr_t start = 0;
    std::uintptr_t stop = 0;
    std::array<char, 5> permissions{};
    if (std::sscanf(line.c_str(), "%zx-%zx %4s", &start, &stop, permissions.data()) != 3) continue;
    if (stop <= covered || start > covered) continue;
    if (permissions[0] != 'r') return std::nullopt;
    writable = writable && permissions[1] == 'w';
    covered = stop;
  }
  if (covered < end) return std::nullopt;
  return writable;
}

int Protection(Access access) {
  switch (access) {
    case Access::kRead:
      return PROT_READ;
    case Access::kReadWrite:
      return PROT_READ | PROT_WRITE;
    case Access::kNone:
      break;
  }
  return PROT_NONE;
}

}  // namespace

// A memfd holding device memory; closed when the last handle, mapping or allocation that
// uses it is gone. Counted against the budget when this process made it.
class MemoryFile {
 public:
  MemoryFile(int fd, std::size_t size, CUdevice device, bool exportable, bool counted)
      : fd_(fd), size_(size), device_(device), exportable_(exportable), counted_(counted) {
    if (counted_) {
      live_bytes.at(static_cast<std::size_t>(device_)) += size_;
      total_live_bytes += size_;
    }
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  ~MemoryFile() {
    (void)close(fd_);
    if (counted_) {
      live_bytes.at(static_cast<std::size_t>(device_)) -= size_;
      total_live_bytes -= size_;
    }
  }

  // A new memfd of `size` bytes; null when the system refuses.
  static std::shared_ptr<MemoryFile> Make(std::size_t size, CUdevice device, bool exportable) {
    const int fd = memfd_create(kMemfdName, MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      (void)close(fd);
      return nullptr;
    }
    return std::make_shared<MemoryFile>(fd, size, device, exportable, true);
  }

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool exportable() const { return exportable_; }

 private:
  const int fd_;
  const std::size_t size_;
  const CUdevice device_;
  const bool exportable_;
  const bool counted_;
};

MemorySpace::MemorySpace()
    : process_limit_(
          static_cast<std::size_t>(EnvironmentNumber("HURRAY_SOFTCUDA_OOM_AFTER_BYTES", 0))) {}

std::size_t MemorySpace::LiveBytes(CUdevice device) {
  return live_bytes.at(static_cast<std::size_t>(device)).load();
}

CUresult MemorySpace::CheckBudget(std::string_view call, std::size_t size, CUdevice device,
                                  std::size_t limit) const {
  if (static_cast<std::size_t>(device) >= kMaxDevices) {
    return Refuse(CUDA_ERROR_INVALID_DEVICE, call, "softcuda has at most 64 devices");
  }
  if (LiveBytes(device) + size > limit) {
    return Refuse(CUDA_ERROR_OUT_OF_MEMORY, call,
                  std::to_string(size) + " bytes more do not fit in device " +
                      std::to_string(device) + " (" + std::to_string(LiveBytes(device)) + " of " +
                      std::to_string(limit) + " bytes in use)");
  }
  if (process_limit_ != 0 && total_live_bytes.load() + size > process_limit_) {
    return Refuse(CUDA_ERROR_OUT_OF_MEMORY, call,
                  "injected: HURRAY_SOFTCUDA_OOM_AFTER_BYTES=" + std::to_string(process_limit_) +
                      " and " + std::to_string(total_live_bytes.load()) + " bytes are live");
  }
  return CUDA_SUCCESS;
}

const MemorySpace::Range* MemorySpace::Find(const std::map<std::uintptr_t, Range>& table,
                                            std::uintptr_t address, std::size_t size) {
  auto after = table.upper_bound(address);
  if (after == table.begin()) return nullptr;
  const auto& [base, range] = *std::prev(after);
  if (address + size > base + range.size || address + size < address) return nullptr;
  return &range;
}

CUresult MemorySpace::Create(CUmemGenericAllocationHandle* handle, std::size_t size,
                             const CUmemAllocationProp& properties, std::size_t limit) {
  const CUdevice device = properties.location.id;
  const bool exportable =
      properties.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  std::lock_guard lock(mutex_);
  if (CUresult budget = CheckBudget("cuMemCreate", size, device, limit); budget != CUDA_SUCCESS) {
    return budget;
  }
  std::shared_ptr<MemoryFile> file = MemoryFile::Make(size, device, exportable);
  if (file == nullptr) {
    return Refuse(CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate", "memfd_create failed");
  }
  *handle = next_handle_++;
  handles_[*handle] = std::move(file);
  created_[*handle] = properties;
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Release(CUmemGenericAllocationHandle handle) {
  std::lock_guard lock(mutex_);
  // Mappings hold the memory themselves: it lives on until they are unmapped.
  if (handles_.erase(handle) == 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemRelease",
                  "handle " + Hex(handle) + " is not a live allocation handle (released twice?)");
  }
  created_.erase(handle);
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Properties(CUmemAllocationProp* properties,
                                 CUmemGenericAllocationHandle handle) const {
  constexpr const char* kCall = "cuMemGetAllocationPropertiesFromHandle";
  std::lock_guard lock(mutex_);
  if (!handles_.contains(handle)) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  "handle " + Hex(handle) + " is not a live allocation handle");
  }
  const auto found = created_.find(handle);
  if (found == created_.end()) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, kCall,
                  "handle " + Hex(handle) +
                      " was imported: softcuda knows the properties only of allocations this "
                      "process created");
  }
  *properties = found->second;
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Export(int* fd, CUmemGenericAllocationHandle handle) {
  std::lock_guard lock(mutex_);
  const auto found = handles_.find(handle);
  if (found == handles_.end()) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemExportToShareableHandle",
                  "handle " + Hex(handle) + " is not a live allocation handle");
  }
  if (!found->second->exportable()) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemExportToShareableHandle",
                  "the allocation was created without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
                  "in requestedHandleTypes");
  }
  *fd = fcntl(found->second->fd(), F_DUPFD_CLOEXEC, 0);
  if (*fd < 0) {
    return Refuse(CUDA_ERROR_OUT_OF_MEMORY, "cuMemExportToShareableHandle", "dup failed");
  }
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Import(CUmemGenericAllocationHandle* handle, int fd) {
  constexpr const char* kCall = "cuMemImportFromShareableHandle";
  std::array<char, 256> target{};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t length = readlink(link.c_str(), target.data(), target.size() - 1);
  if (length < 0 || !std::string_view(target.data()).starts_with("/memfd:softcuda")) {
    return Refuse(
        CUDA_ERROR_INVALID_VALUE, kCall,
        "descriptor " + std::to_string(fd) + " is not one cuMemExportToShareableHandle returned");
  }
  struct stat status{};
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0 || fstat(copy, &status) != 0) {
    if (copy >= 0) (void)close(copy);
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "cannot dup descriptor " + std::to_string(fd));
  }
  std::lock_guard lock(mutex_);
  *handle = next_handle_++;
  // Imported memory belongs to the exporter's budget. The device is unknown: 0.
  handles_[*handle] =
      std::make_shared<MemoryFile>(copy, static_cast<std::size_t>(status.st_size), 0, true, false);
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Reserve(CUdeviceptr* address, std::size_t size, std::size_t alignment) {
  constexpr const char* kCall = "cuMemAddressReserve";
  if (size == 0 || size % kGranularity != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  "size " + std::to_string(size) +
                      " is not a nonzero multiple of the "
                      "granularity " +
                      std::to_string(kGranularity));
  }
  if (alignment == 0) alignment = kGranularity;
  if ((alignment & (alignment - 1)) != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  "alignment " + std::to_string(alignment) + " is not a power of two");
  }
  const std::size_t span = size + alignment;
  void* mapped = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) return Refuse(CUDA_ERROR_OUT_OF_MEMORY, kCall, "mmap failed");
  const auto start = reinterpret_cast<std::uintptr_t>(mapped);
  const std::uintptr_t aligned = (start + alignment - 1) & ~(alignment - 1);
  if (aligned > start) (void)munmap(mapped, aligned - start);
  if (aligned + size < start + span) {
    (void)munmap(AddressOf(aligned + size), start + span - aligned - size);
  }
  std::lock_guard lock(mutex_);
  reservations_[aligned] = size;
  *address = aligned;
  return CUDA_SUCCESS;
}

CUresult MemorySpace::FreeAddress(CUdeviceptr address, std::size_t size) {
  std::lock_guard lock(mutex_);
  const auto found = reservations_.find(address);
  if (found == reservations_.end() || found->second != size) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree",
                  Hex(address) + " + " + std::to_string(size) +
                      " is not a range cuMemAddressReserve returned");
  }
  const auto mapped = mappings_.lower_bound(address);
  if (mapped != mappings_.end() && mapped->first < address + size) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree",
                  "the range is still mapped at " + Hex(mapped->first) + ": cuMemUnmap first");
  }
  (void)munmap(AddressOf(address), size);
  reservations_.erase(found);
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Map(CUdeviceptr address, std::size_t size, std::size_t offset,
                          CUmemGenericAllocationHandle handle) {
  constexpr const char* kCall = "cuMemMap";
  std::lock_guard lock(mutex_);
  const auto found = handles_.find(handle);
  if (found == handles_.end()) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  "handle " + Hex(handle) + " is not a live allocation handle");
  }
  const std::shared_ptr<MemoryFile>& file = found->second;
  if (offset != 0 || size != file->size()) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, kCall,
                  "softcuda maps whole allocations only (offset 0, size " +
                      std::to_string(file->size()) + ")");
  }
  auto reservation = reservations_.upper_bound(address);
  if (reservation == reservations_.begin() ||
      address + size > std::prev(reservation)->first + std::prev(reservation)->second) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  Hex(address) + " + " + std::to_string(size) +
                      " is not inside a range cuMemAddressReserve returned");
  }
  const auto next = mappings_.lower_bound(address);
  if ((next != mappings_.end() && next->first < address + size) ||
      Find(mappings_, address, 1) != nullptr) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "the range is already mapped");
  }
  if (mmap(AddressOf(address), size, PROT_NONE, MAP_SHARED | MAP_FIXED, file->fd(), 0) ==
      MAP_FAILED) {
    return Refuse(CUDA_ERROR_OUT_OF_MEMORY, kCall, "mmap failed");
  }
  mappings_[address] = Range{.size = size, .access = Access::kNone, .file = file};
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Unmap(CUdeviceptr address, std::size_t size) {
  std::lock_guard lock(mutex_);
  const auto found = mappings_.find(address);
  if (found == mappings_.end() || found->second.size != size) {
    return Refuse(
        CUDA_ERROR_INVALID_VALUE, "cuMemUnmap",
        Hex(address) + " + " + std::to_string(size) + " is not exactly a range cuMemMap mapped");
  }
  // Back to a PROT_NONE reservation.
  (void)mmap(AddressOf(address), size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  mappings_.erase(found);
  return CUDA_SUCCESS;
}

CUresult MemorySpace::SetAccess(CUdeviceptr address, std::size_t size, Access access,
                                const CUmemAccessDesc* descriptions, std::size_t count) {
  std::lock_guard lock(mutex_);
  const auto found = mappings_.find(address);
  if (found == mappings_.end() || found->second.size != size) {
    return Refuse(
        CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess",
        Hex(address) + " + " + std::to_string(size) + " is not exactly a range cuMemMap mapped");
  }
  if (mprotect(AddressOf(address), size, Protection(access)) != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess", "mprotect failed");
  }
  found->second.access = access;
  for (std::size_t i = 0; i < count; ++i) {
    found->second.device_flags[descriptions[i].location.id] = descriptions[i].flags;
  }
  return CUDA_SUCCESS;
}

CUresult MemorySpace::GetAccess(unsigned long long* flags,  // NOLINT(google-runtime-int)
                                CUdevice device, CUdeviceptr address) const {
  std::lock_guard lock(mutex_);
  const Range* range = Find(mappings_, address, 1);
  if (range == nullptr) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemGetAccess",
                  Hex(address) + " is not in a range cuMemMap mapped");
  }
  const auto found = range->device_flags.find(device);
  *flags = found == range->device_flags.end() ? CU_MEM_ACCESS_FLAGS_PROT_NONE : found->second;
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Allocate(CUdeviceptr* address, std::size_t size, CUdevice device,
                               std::size_t limit) {
  constexpr const char* kCall = "cuMemAlloc";
  const std::size_t rounded = (size + kPageSize - 1) / kPageSize * kPageSize;
  std::lock_guard lock(mutex_);
  if (CUresult budget = CheckBudget(kCall, rounded, device, limit); budget != CUDA_SUCCESS) {
    return budget;
  }
  std::shared_ptr<MemoryFile> file = MemoryFile::Make(rounded, device, false);
  if (file == nullptr) return Refuse(CUDA_ERROR_OUT_OF_MEMORY, kCall, "memfd_create failed");
  void* mapped = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, file->fd(), 0);
  if (mapped == MAP_FAILED) return Refuse(CUDA_ERROR_OUT_OF_MEMORY, kCall, "mmap failed");
  *address = reinterpret_cast<std::uintptr_t>(mapped);
  allocations_[*address] = Range{.size = rounded, .access = Access::kReadWrite, .file = file};
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Free(CUdeviceptr address) {
  std::lock_guard lock(mutex_);
  const auto found = allocations_.find(address);
  if (found == allocations_.end()) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemFree",
                  Hex(address) + " is not the base of a cuMemAlloc allocation");
  }
  (void)munmap(AddressOf(address), found->second.size);
  allocations_.erase(found);
  return CUDA_SUCCESS;
}

CUresult MemorySpace::IpcGet(CUipcMemHandle* handle, CUdeviceptr address) {
  std::lock_guard lock(mutex_);
  const auto found = allocations_.find(address);
  if (found == allocations_.end()) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuIpcGetMemHandle",
                  Hex(address) + " is not the base of a cuMemAlloc allocation");
  }
  struct stat status{};
  (void)fstat(found->second.file->fd(), &status);
  const IpcPayload payload{.magic = kIpcMagic,
                           .pid = getpid(),
                           .fd = found->second.file->fd(),
                           .inode = status.st_ino,
                           .size = found->second.size};
  *handle = CUipcMemHandle{};
  std::memcpy(handle->reserved, &payload, sizeof payload);
  return CUDA_SUCCESS;
}

CUresult MemorySpace::IpcOpen(CUdeviceptr* address, const CUipcMemHandle& handle) {
  constexpr const char* kCall = "cuIpcOpenMemHandle";
  IpcPayload payload{};
  std::memcpy(&payload, handle.reserved, sizeof payload);
  if (payload.magic != kIpcMagic) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "not a handle cuIpcGetMemHandle made");
  }
  if (payload.pid == getpid()) {
    return Refuse(CUDA_ERROR_INVALID_CONTEXT, kCall,
                  "the handle was exported by this process: a process cannot open its own");
  }
  const IpcKey key{.pid = payload.pid, .fd = payload.fd, .inode = payload.inode};
  std::lock_guard lock(mutex_);
  for (auto& [base, mapping] : ipc_mappings_) {
    if (mapping.key != key) continue;
    ++mapping.references;  // Opened again in this context: the same address, counted.
    *address = base;
    return CUDA_SUCCESS;
  }
  const std::string path =
      "/proc/" + std::to_string(payload.pid) + "/fd/" + std::to_string(payload.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  struct stat status{};
  if (fd < 0 || fstat(fd, &status) != 0 || status.st_ino != payload.inode) {
    if (fd >= 0) (void)close(fd);
    return Refuse(CUDA_ERROR_INVALID_HANDLE, kCall,
                  "cannot open " + path +
                      ": the exporter freed the memory or exited, or is "
                      "another user's");
  }
  void* mapped = mmap(nullptr, payload.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  (void)close(fd);
  if (mapped == MAP_FAILED) return Refuse(CUDA_ERROR_MAP_FAILED, kCall, "mmap failed");
  *address = reinterpret_cast<std::uintptr_t>(mapped);
  ipc_mappings_[*address] = IpcMapping{.size = payload.size, .key = key, .references = 1};
  return CUDA_SUCCESS;
}

CUresult MemorySpace::IpcClose(CUdeviceptr address) {
  std::lock_guard lock(mutex_);
  const auto found = ipc_mappings_.find(address);
  if (found == ipc_mappings_.end()) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuIpcCloseMemHandle",
                  Hex(address) + " is not an address cuIpcOpenMemHandle returned");
  }
  if (--found->second.references == 0) {
    (void)munmap(AddressOf(address), found->second.size);
    ipc_mappings_.erase(found);
  }
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Register(void* host, std::size_t size, bool read_only) {
  constexpr const char* kCall = "cuMemHostRegister";
  const auto address = reinterpret_cast<std::uintptr_t>(host);
  const std::optional<bool> writable = HostRangeWritable(address, size);
  if (!writable) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  Hex(address) + " + " + std::to_string(size) + " is not mapped readable memory");
  }
  if (!*writable && !read_only) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall,
                  "memory mapped read-only needs CU_MEMHOSTREGISTER_READ_ONLY");
  }
  std::lock_guard lock(mutex_);
  const auto next = registrations_.lower_bound(address);
  if ((next != registrations_.end() && next->first < address + size) ||
      Find(registrations_, address, 1) != nullptr) {
    return Refuse(
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, kCall,
        Hex(address) + " + " + std::to_string(size) + " overlaps memory registered before");
  }
  registrations_[address] =
      Range{.size = size, .access = read_only ? Access::kRead : Access::kReadWrite, .file = {}};
  return CUDA_SUCCESS;
}

CUresult MemorySpace::Unregister(void* host) {
  std::lock_guard lock(mutex_);
  if (registrations_.erase(reinterpret_cast<std::uintptr_t>(host)) == 0) {
    return Refuse(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "cuMemHostUnregister",
        Hex(reinterpret_cast<std::uintptr_t>(host)) + " is not the base of registered host memory");
  }
  return CUDA_SUCCESS;
}

CUresult MemorySpace::DevicePointer(CUdeviceptr* address, void* host) {
  const auto base = reinterpret_cast<std::uintptr_t>(host);
  std::lock_guard lock(mutex_);
  if (Find(registrations_, base, 1) == nullptr) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuMemHostGetDevicePointer",
                  Hex(base) + " is not in registered host memory");
  }
  *address = base;  // Unified addressing: the device sees it at the host's address.
  return CUDA_SUCCESS;
}

Access MemorySpace::AccessOf(CUdeviceptr address, std::size_t size) const {
  std::lock_guard lock(mutex_);
  for (const auto* table : {&mappings_, &allocations_, &registrations_}) {
    if (const Range* range = Find(*table, address, size)) return range->access;
  }
  auto after = ipc_mappings_.upper_bound(address);
  if (after != ipc_mappings_.begin()) {
    const auto& [base, mapping] = *std::prev(after);
    if (address + size <= base + mapping.size) return Access::kReadWrite;
  }
  return Access::kNone;
}

}  // namespace softcuda
