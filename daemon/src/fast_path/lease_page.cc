#include "fast_path/lease_page.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon::fast_path {
namespace {

// The name a page shows in /proc/PID/maps and /proc/PID/fd ("memfd:hurray-lease-page").
constexpr const char* kMemfdName = "hurray-lease-page";
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

}  // namespace

Result<LeasePage> LeasePage::Create(std::uint32_t slot_count) {
  if (slot_count == 0 || slot_count > kMaxSlots) {
    return InvalidArgumentError(
        fmt::format("fast_path.lease_slots {}: must be 1 to {}", slot_count, kMaxSlots));
  }
  UniqueFd fd(::memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return ErrnoFailure("memfd_create", kMemfdName, errno);
  if (::ftruncate(fd.get(), kLeasePageBytes) != 0) {
    return ErrnoFailure("ftruncate", kMemfdName, errno);
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, kSeals) != 0) {
    return ErrnoFailure("fcntl(F_ADD_SEALS)", kMemfdName, errno);
  }
  HURRAY_ASSIGN_OR_RETURN(SharedMapping mapping,
                          SharedMapping::Map(fd.get(), kLeasePageBytes, PROT_READ, kMemfdName));
  return LeasePage(std::move(fd), std::move(mapping), slot_count);
}

}  // namespace hurray::daemon::fast_path
