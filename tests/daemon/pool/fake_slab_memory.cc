#include "fake_slab_memory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hurray::daemon::testing {

Result<std::uint64_t> FakeSlabMemory::Create(std::uint64_t bytes) {
  if (bytes == 0 || bytes % granularity_ != 0) {
    return InvalidArgumentError(
        fmt::format("fake slab: {} bytes is not a multiple of {}", bytes, granularity_));
  }
  const std::lock_guard lock(state_.mutex);
  if (state_.create_failures > 0) {
    --state_.create_failures;
    return ResourceExhaustedError(
        fmt::format("cuMemCreate of {} bytes: CUDA_ERROR_OUT_OF_MEMORY (injected)", bytes));
  }
  UniqueFd memory(::memfd_create("hurray-fake-slab", MFD_CLOEXEC));
  if (!memory || ::ftruncate(memory.get(), static_cast<off_t>(bytes)) != 0) {
    return InternalError(
        fmt::format("fake slab: memfd of {} bytes: {}", bytes, std::strerror(errno)));
  }
  const std::uint64_t handle = next_handle_++;
  state_.slabs.emplace(handle, std::move(memory));
  ++state_.creates;
  return handle;
}

Result<SlabExport> FakeSlabMemory::Export(std::uint64_t handle) const {
  const std::lock_guard lock(state_.mutex);
  if (state_.fail_exports) {
    return InternalError("cuMemExportToShareableHandle: CUDA_ERROR_UNKNOWN (injected)");
  }
  const auto slab = state_.slabs.find(handle);
  if (slab == state_.slabs.end()) {
    return InvalidArgumentError(fmt::format("fake slab: no handle {}", handle));
  }
  ++state_.exports;
  SlabExport exported;
  if (mechanism_ == SlabMechanism::kVmm) {
    exported.fd = UniqueFd(::fcntl(slab->second.get(), F_DUPFD_CLOEXEC, 0));
    if (!exported.fd) return InternalError("fake slab: dup failed");
  } else {
    exported.legacy_ipc_handle.fill(static_cast<std::uint8_t>(handle));
  }
  return exported;
}

void FakeSlabMemory::Release(std::uint64_t handle) {
  const std::lock_guard lock(state_.mutex);
  if (state_.slabs.erase(handle) == 1) ++state_.releases;
}

}  // namespace hurray::daemon::testing
