#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "registry/registry.h"
#include "registry/registry_errors.h"

namespace hurray::daemon {

Result<DirectoryAccess> Registry::GrantDirectory(std::uint64_t session_id) {
  const std::shared_ptr<fast_path::DirectorySegment>& directory = options_.fast_path.directory;
  {
    std::lock_guard lock(mutex_);
    if (sessions_.Find(session_id) == nullptr) return std::unexpected(SessionEnded(session_id));
  }
  if (directory == nullptr) {
    return FailedPreconditionError("the fast path is off ([fast_path] enabled = false)");
  }
  // Opening the descriptor is a system call: done outside the lock.
  HURRAY_ASSIGN_OR_RETURN(UniqueFd fd, directory->OpenReadOnly());
  return DirectoryAccess{.fd = std::move(fd),
                         .size = directory->size_bytes(),
                         .entry_count = directory->entry_count()};
}

Status Registry::CheckLeasePageLocked(std::uint64_t session_id) const {
  const Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::unexpected(SessionEnded(session_id));
  if (options_.fast_path.directory == nullptr) {
    return FailedPreconditionError("the fast path is off ([fast_path] enabled = false)");
  }
  if (lease_pages_.Has(session_id)) {
    return FailedPreconditionError(
        fmt::format("session {} has its lease page already: one per session", session_id));
  }
  Status quota = uid_quotas_.CheckLeases(session->peer.uid, options_.fast_path.lease_slots);
  if (!quota) {
    return std::unexpected(
        quota.error().WithContext("map_lease_page: the lease page's slots count as leases"));
  }
  return {};
}

Result<LeasePageAccess> Registry::GrantLeasePage(std::uint64_t session_id) {
  {
    std::lock_guard lock(mutex_);
    HURRAY_RETURN_IF_ERROR(CheckLeasePageLocked(session_id));
  }
  // Making the page takes system calls: done outside the lock, then checked again.
  HURRAY_ASSIGN_OR_RETURN(fast_path::LeasePage page,
                          fast_path::LeasePage::Create(options_.fast_path.lease_slots));
  LeasePageAccess access{.fd = page.TakeClientDescriptor(),
                         .size = fast_path::kLeasePageBytes,
                         .slot_count = page.slot_count()};
  std::lock_guard lock(mutex_);
  HURRAY_RETURN_IF_ERROR(CheckLeasePageLocked(session_id));
  uid_quotas_.AddLeases(sessions_.Find(session_id)->peer.uid, page.slot_count());
  lease_pages_.Add(session_id, sessions_.Find(session_id)->peer.uid, std::move(page));
  return access;
}

void Registry::ArmRescanLocked() {
  if (rescan_armed_) return;
  rescan_armed_ = true;
  rescan_timer_.expires_after(rescan_delay_);
  rescan_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) OnRescanTimer();
  });
}

std::size_t Registry::RescanPinnedLocked() {
  lease_pages_.BeginRescan();  // Each page is read once.
  const std::size_t pinned = versions_.RescanPinned();
  lease_pages_.EndRescan();
  return pinned;
}

void Registry::OnRescanTimer() {
  std::lock_guard lock(mutex_);
  // rescan_armed_ stays set through the rescan, so that the pins it finds arm nothing: the
  // next rescan is armed below, once its delay is known.
  const std::size_t before = versions_.pinned_count();
  const std::size_t pinned = RescanPinnedLocked();
  // The next rescan comes after rescan_interval while this one freed something, and later
  // and later (up to kMaxRescanBackoff times it) while pins only stay: pins held for long
  // cost ever fewer scans.
  const auto interval = options_.fast_path.rescan_interval;
  rescan_delay_ =
      pinned < before ? interval : std::min(rescan_delay_ * 2, interval * kMaxRescanBackoff);
  rescan_armed_ = false;
  if (pinned != 0) ArmRescanLocked();
}

std::uint64_t Registry::NextFastPathIdLocked(const TensorVersion& version) {
  if (options_.fast_path.directory == nullptr || version.fence ||
      version.pool->device_tag() != DeviceTag::Cpu()) {
    return 0;
  }
  return next_id_++;
}

}  // namespace hurray::daemon
