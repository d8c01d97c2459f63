#include "registry/registry.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "random_hex.h"
#include "registry/registry_errors.h"

namespace hurray::daemon {
namespace {

constexpr std::size_t kSessionTokenBytes = 16;  // 128 bits: a token nobody can guess.

// One fence table per CUDA pool, with the k-th one's segment ids from
// kFirstFenceSegmentId + (k << 32).
std::map<const Pool*, std::unique_ptr<FenceTable>> MakeFenceTables(const PoolSet& pools,
                                                                   const std::string& prefix) {
  std::map<const Pool*, std::unique_ptr<FenceTable>> tables;
  std::uint64_t k = 0;
  for (const auto& [name, pool] : pools.pools()) {
    if (pool->device_tag() != DeviceTag::Cuda()) continue;
    tables.emplace(pool.get(),
                   std::make_unique<FenceTable>(FenceTable::Options{
                       .pool_name = name,
                       .shm_prefix = prefix,
                       .first_segment_id = kFirstFenceSegmentId + (k++ << kFenceSegmentIdShift)}));
  }
  return tables;
}

}  // namespace

Registry::Registry(const PoolSet& pools, boost::asio::io_context& io, Options options)
    : pools_(pools),
      io_(io),
      options_(std::move(options)),
      access_(options_.access != nullptr ? options_.access
                                         : std::make_shared<const AccessPolicy>(::geteuid())),
      started_(std::chrono::steady_clock::now()),
      fence_tables_(MakeFenceTables(pools, options_.fence_shm_prefix)),
      uid_quotas_(options_.uid_quota),
      wait_timer_(io),
      rescan_timer_(io),
      rescan_delay_(options_.fast_path.rescan_interval) {
  // Under mutex_, as every reclaim is. A poisoned version whose producer's process lives
  // goes to that session's quarantine hold, its charge with it.
  versions_.set_buffer_keeper([this](TensorVersion& version) {
    if (version.quarantine_hold == 0) return false;
    const bool kept =
        quarantine_.Add(version.quarantine_hold, *version.pool, version.buffers,
                        RangeQuarantine::Charge{.uid = version.charged_uid(),
                                                .bytes = version.charged_bytes,
                                                .kind = RangeQuarantine::ChargeKind::kPublished});
    if (!kept) version.quarantine_hold = 0;  // The process has exited: freed now.
    return kept;
  });
  versions_.set_reclaim_observer([this](const TensorVersion& version) {
    // A kept version's charge goes when its hold is released.
    if (version.quarantine_hold == 0) {
      uid_quotas_.RemovePublished(version.charged_uid(), version.charged_bytes);
    }
    // Until this, a restarted daemon would keep its memory out of use for earlier clients.
    if (options_.journal != nullptr) options_.journal->RecordFreed(*version.name, version.number);
  });
  versions_.set_max_entries_per_uid(options_.fast_path.max_entries_per_uid);
  // A pinned version counts against its pinner, not its publisher.
  versions_.set_charge_observer(
      [this](const TensorVersion& version, std::uint32_t from, std::uint32_t to) {
        uid_quotas_.RemovePublished(from, version.charged_bytes);
        uid_quotas_.AddPublished(to, version.charged_bytes);
      });
  versions_.set_presence_observer(
      [this](const std::string& name, bool present) { waits_.SetPublished(name, present); });
  versions_.set_fast_path(options_.fast_path.directory.get(),
                          [this](const TensorVersion& version) -> std::optional<std::uint32_t> {
                            std::optional<uid_t> pinner =
                                lease_pages_.Names(version.fast_path_id, version.granted_uids);
                            if (pinner) ArmRescanLocked();
                            return pinner;
                          });
}

// NOLINTNEXTLINE(bugprone-exception-escape): a mutex or timer that fails here is fatal anyway.
Registry::~Registry() {
  std::lock_guard lock(mutex_);
  wait_timer_.cancel();  // A handler not yet begun sees operation_aborted.
  rescan_timer_.cancel();
  // The daemon stops: what waits for a process to exit goes back to the pools, which outlive
  // the registry (the processes lose their sessions' segments with the daemon anyway).
  for (std::uint64_t hold : quarantine_.hold_ids()) ReleaseQuarantineLocked(hold);
  exit_watches_.clear();
}

Result<SessionGrant> Registry::OpenSession(const PeerCredentials& peer,
                                           std::string_view client_name) {
  HURRAY_ASSIGN_OR_RETURN(std::string token, RandomHex(kSessionTokenBytes));
  Session session{.peer = peer, .client_name = std::string(client_name), .token = token};
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  const Session& opened = sessions_.Open(id, std::move(session));
  uid_quotas_.AddSession(peer.uid);
  spdlog::debug("session {} opened: pid {} uid {} \"{}\"", id, peer.pid, peer.uid,
                opened.client_name);
  return SessionGrant{.session_id = id, .token = std::move(token)};
}

void Registry::SetPeerProcess(std::uint64_t session_id, UniqueFd process) {
  std::lock_guard lock(mutex_);
  if (Session* session = sessions_.Find(session_id)) session->process = std::move(process);
}

void Registry::ConnectionRefused(const PeerCredentials&, const Error&) {
  refused_connections_.fetch_add(1, std::memory_order_relaxed);
}

void Registry::CloseSession(std::uint64_t session_id) {
  std::unique_lock lock(mutex_);
  Session* session = sessions_.Find(session_id);
  if (session == nullptr) return;
  const std::vector<std::uint64_t> leases(session->leases.begin(), session->leases.end());
  const std::vector<std::uint64_t> allocations(session->allocations.begin(),
                                               session->allocations.end());
  ++closed_sessions_.sessions;
  closed_sessions_.leases += leases.size();
  closed_sessions_.allocations += allocations.size();
  for (std::uint64_t allocation_id : allocations) {
    // Buffer bytes, as Stats names them (pending_bytes counts what the quotas charge).
    const Allocation* allocation = allocations_.FindOfSession(allocation_id, session_id);
    if (allocation != nullptr) closed_sessions_.allocation_bytes += allocation->byte_size;
  }
  // A reader writes nothing: its leases end now.
  for (std::uint64_t lease_id : leases) ReleaseLeaseLocked(lease_id);
  // What it could still write waits for its process to exit (see "Quarantine").
  const bool may_write = !allocations.empty() || !session->unsignalled.empty();
  const std::uint64_t hold = session->process && may_write ? session_id : 0;
  bool device_memory = false;
  if (hold != 0) {
    quarantine_.Open(hold);
    for (std::uint64_t allocation_id : allocations) {
      const Allocation* allocation = allocations_.FindOfSession(allocation_id, session_id);
      if (allocation != nullptr && allocation->pool->device_tag() == DeviceTag::Cuda()) {
        device_memory = true;
      }
    }
  }
  for (std::uint64_t allocation_id : allocations) FreeAllocationLocked(allocation_id, hold);
  const std::vector<v1::WatchEvent> deleted = DeleteUnsignalledLocked(session_id, *session, hold);
  if (hold != 0) {
    if (allocations.empty() && deleted.empty()) {
      (void)quarantine_.Release(hold);  // Its unsignalled versions were all reached: empty.
    } else {
      // Event-mode versions live in CUDA pools only.
      WatchQuarantineLocked(hold, std::move(session->process), device_memory || !deleted.empty());
    }
  }
  std::vector<Wait> ended = waits_.TakeSession(session_id);
  if (const std::uint32_t slots = lease_pages_.Remove(session_id); slots != 0) {
    uid_quotas_.RemoveLeases(session->peer.uid, slots);
    RescanPinnedLocked();  // What only its page named is freed now.
  }
  uid_quotas_.RemoveSession(session->peer.uid);
  sessions_.Close(session_id);
  spdlog::debug("session {} closed: {} leases released, {} allocations {}", session_id,
                leases.size(), allocations.size(), hold != 0 ? "quarantined" : "freed");
  watches_.Deliver(lock, deleted);  // Releases the lock.
  for (Wait& wait : ended) wait.fail(CancelledError("the session ended while waiting").error());
}

void Registry::WatchQuarantineLocked(std::uint64_t hold, UniqueFd process, bool device_memory) {
  Result<ProcessExitWatch> watch = ProcessExitWatch::Start(
      io_, std::move(process),
      device_memory ? options_.cuda_quarantine_grace : std::chrono::milliseconds(0),
      [this, hold] { OnQuarantinedProcessExited(hold); });
  if (!watch) {
    spdlog::warn("session {}: {}; what it could still write is freed now", hold,
                 watch.error().ToString());
    ReleaseQuarantineLocked(hold);
    return;
  }
  spdlog::debug(
      "session {}: what it could still write is quarantined until its process has "
      "exited",
      hold);
  exit_watches_.insert_or_assign(hold, std::move(*watch));
}

void Registry::OnQuarantinedProcessExited(std::uint64_t hold) {
  std::lock_guard lock(mutex_);
  if (!quarantine_.IsOpen(hold)) return;  // Released already (the registry is going).
  ReleaseQuarantineLocked(hold);
}

void Registry::ReleaseQuarantineLocked(std::uint64_t hold) {
  RangeQuarantine::Released released = quarantine_.Release(hold);
  std::uint64_t bytes = 0;
  for (const RangeQuarantine::HeldRange& held : released.ranges) {
    held.pool->Free(held.range);
    bytes += held.range.size;
  }
  for (const RangeQuarantine::Charge& charge : released.charges) {
    if (charge.kind == RangeQuarantine::ChargeKind::kPending) {
      uid_quotas_.RemovePending(charge.uid, charge.bytes);
    } else {
      uid_quotas_.RemovePublished(charge.uid, charge.bytes);
    }
  }
  spdlog::debug("session {}: its process has exited; {} quarantined bytes in {} ranges freed", hold,
                bytes, released.ranges.size());
  exit_watches_.erase(hold);  // May be the watch whose callback runs this: it allows that.
}

std::vector<v1::WatchEvent> Registry::DeleteUnsignalledLocked(std::uint64_t session_id,
                                                              Session& session,
                                                              std::uint64_t hold) {
  std::vector<v1::WatchEvent> events;
  for (const std::weak_ptr<TensorVersion>& weak : session.unsignalled) {
    const std::shared_ptr<TensorVersion> version = weak.lock();
    // A version superseded and unleased is reclaimed already (a reply being built may still
    // hold it): its fence retires with it.
    const bool reclaimed = version != nullptr && version->superseded && version->lease_count == 0;
    if (version == nullptr || reclaimed || version->deleted ||
        version->fence.State() == FenceState::kReady) {
      continue;
    }
    FenceTable::Poison(version->fence.slot());
    const std::string name = *version->name;  // The entry may go with the version.
    spdlog::warn(
        "{} version {} deleted: session {} ended before its fence was reached (segment {} "
        "offset {} value {}); the fence is poisoned",
        ShownName(name), version->number, session_id, version->fence.slot().segment_id,
        version->fence.slot().offset, version->fence.slot().value);
    (void)versions_.MarkDeleted(name, version->number);
    if (options_.journal != nullptr) options_.journal->RecordRemoval(name, version->number);
    events.push_back(Event(v1::WatchEvent::KIND_DELETED, name, version->number));
    version->quarantine_hold = hold;  // Its producer's late GPU writes may still land.
    versions_.ReclaimIfUnused(version.get());
  }
  session.unsignalled.clear();
  return events;
}

Registry::SegmentUse Registry::SegmentUseLocked(const Session& session,
                                                std::uint64_t segment_id) const {
  SegmentUse use;
  for (std::uint64_t allocation_id : session.allocations) {
    const Allocation& allocation = allocations_.Get(allocation_id);
    for (const auto& buffer : allocation.buffers) {
      if (buffer.segment_id() == segment_id) {
        use.in_allocation = true;
        use.pool = allocation.pool;
      }
    }
    if (allocation.fence && allocation.fence.slot().segment_id == segment_id) {
      use.in_allocation = true;
      use.fences = FencesOf(allocation.pool);
    }
  }
  for (std::uint64_t lease_id : session.leases) {
    const TensorVersion& version = *leases_.Find(lease_id)->version;
    for (const PoolRange& buffer : version.buffers) {
      if (buffer.segment_id == segment_id) {
        use.in_lease = true;
        use.pool = version.pool;
      }
    }
    if (version.fence && version.fence.slot().segment_id == segment_id) {
      use.in_lease = true;
      use.fences = FencesOf(version.pool);
    }
  }
  return use;
}

FenceTable* Registry::FencesOf(const Pool* pool) const {
  auto found = fence_tables_.find(pool);
  return found == fence_tables_.end() ? nullptr : found->second.get();
}

bool Registry::SegmentExists(std::uint64_t segment_id) const {
  if (pools_.FindBySegment(segment_id) != nullptr) return true;
  return std::ranges::any_of(fence_tables_, [segment_id](const auto& table) {
    return table.second->SegmentSize(segment_id).has_value();
  });
}

Result<SegmentAccess> Registry::GrantSegment(std::uint64_t session_id, std::uint64_t segment_id,
                                             bool writable) {
  SegmentUse use;
  {
    std::lock_guard lock(mutex_);
    const Session* session = sessions_.Find(session_id);
    if (session == nullptr) return std::unexpected(SessionEnded(session_id));
    use = SegmentUseLocked(*session, segment_id);
  }
  if (writable && !use.in_allocation) {
    return PermissionDeniedError(
        fmt::format("segment {}: write access needs an unpublished allocation in it", segment_id));
  }
  if (!use.in_allocation && !use.in_lease) {
    if (!SegmentExists(segment_id)) {
      return NotFoundError(fmt::format("segment {} does not exist", segment_id));
    }
    return PermissionDeniedError(
        fmt::format("segment {}: the session holds no lease or allocation in it", segment_id));
  }
  // Opening the descriptor is a system call: done outside the lock.
  Result<SegmentAccess> access = use.fences != nullptr
                                     ? use.fences->OpenSegment(segment_id, writable)
                                     : use.pool->OpenSegment(segment_id, writable);
  if (access) {
    std::lock_guard lock(mutex_);
    if (Session* session = sessions_.Find(session_id)) {
      session->granted_segments.insert(segment_id);
    }
  }
  return access;
}

Status Registry::SlabMapped(std::uint64_t session_id, std::uint64_t segment_id, SlabUse use) {
  const Pool* pool = pools_.FindBySegment(segment_id);
  if (pool == nullptr) {
    if (!SegmentExists(segment_id)) {
      return NotFoundError(fmt::format("segment_id {} does not exist", segment_id));
    }
    return InvalidArgumentError(
        fmt::format("segment_id {} is a fence segment, not a CUDA slab", segment_id));
  }
  if (pool->device_tag() != DeviceTag::Cuda()) {
    return InvalidArgumentError(fmt::format(
        "segment_id {} is in pool {}, which is not a CUDA pool: only slabs are reported",
        segment_id, pool->name()));
  }
  std::lock_guard lock(mutex_);
  Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::unexpected(SessionEnded(session_id));
  if (!session->granted_segments.contains(segment_id)) {
    return PermissionDeniedError(
        fmt::format("segment_id {}: the session was never granted it", segment_id));
  }
  if (use == SlabUse::kUnmapped) {
    session->slab_mappings.erase(segment_id);
  } else {
    session->slab_mappings.insert_or_assign(
        segment_id, SlabMapping{.pool = pool, .read_only = use == SlabUse::kReadOnly});
  }
  return {};
}

std::set<std::uint64_t> Registry::MappedSlabs() const {
  std::set<std::uint64_t> mapped;
  std::lock_guard lock(mutex_);
  for (const auto& [id, session] : sessions_.sessions()) {
    for (const auto& [segment_id, mapping] : session.slab_mappings) mapped.insert(segment_id);
  }
  return mapped;
}

Result<std::uint64_t> Registry::Authenticate(std::string_view token) const {
  std::lock_guard lock(mutex_);
  if (std::optional<std::uint64_t> id = sessions_.FindByToken(token)) return *id;
  if (token.empty()) return UnauthenticatedError("no session token");
  return UnauthenticatedError("unknown session token");
}

std::optional<PeerCredentials> Registry::SessionPeer(std::uint64_t session_id) const {
  std::lock_guard lock(mutex_);
  const Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::nullopt;
  return session->peer;
}

std::uint64_t Registry::PoisonUnreachedFences() {
  std::uint64_t poisoned = 0;
  for (const auto& [pool, table] : fence_tables_) poisoned += table->PoisonUnreached();
  if (poisoned != 0) {
    spdlog::warn("{} fences not reached were poisoned: their tensors are lost", poisoned);
  }
  return poisoned;
}

std::uint64_t Registry::Watch(std::string prefix, WatchCallback callback,
                              const PeerCredentials* viewer) {
  std::optional<PeerCredentials> who;
  if (viewer != nullptr) who = *viewer;
  return watches_.Watch(std::move(prefix),
                        [this, who, callback = std::move(callback)](const v1::WatchEvent& event) {
                          if (access_->MayRead(event.name(), who ? &*who : nullptr))
                            callback(event);
                        });
}

void Registry::Unwatch(std::uint64_t watch_id) { watches_.Unwatch(watch_id); }

}  // namespace hurray::daemon
