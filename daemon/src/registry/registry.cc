#include "registry/registry.h"

#include <fmt/format.h>
#include <pwd.h>
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
#include <unordered_map>
#include <utility>
#include <vector>

#include "hurray/buffer_handle.h"
#include "hurray/descriptor_codec.h"
#include "hurray/ipc/session_protocol.h"
#include "random_hex.h"
#include "registry/adopted_version.h"
#include "registry/inspection.h"
#include "registry/namespace_owner.h"
#include "registry/tensor_name.h"
#include "session/acquire_reply_encoder.h"

namespace hurray::daemon {
namespace {

constexpr std::size_t kSessionTokenBytes = 16;  // 128 bits: a token nobody can guess.
constexpr std::size_t kShownNameBytes = 200;    // Of a tensor name in a message.

std::string_view Shown(std::string_view name) { return name.substr(0, kShownNameBytes); }

std::int64_t NowNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status ValidateHandoff(const v1::SyncHandoff& handoff, const v1::TensorDescriptor& descriptor) {
  constexpr std::uint32_t kProducerSynced = SyncModeToByte(SyncMode::kProducerSynced);
  constexpr std::uint32_t kEvent = SyncModeToByte(SyncMode::kEvent);
  const std::uint32_t mode = handoff.sync_mode();
  if (mode != kProducerSynced && mode != kEvent) {
    return InvalidArgumentError(fmt::format(
        "handoff.sync_mode {} is neither {} ({}) nor {} ({})", mode, kProducerSynced,
        SyncModeName(SyncMode::kProducerSynced), kEvent, SyncModeName(SyncMode::kEvent)));
  }
  // Every buffer must declare the mode the handoff delivers (ConsumerStream cannot cross
  // processes: the producer cannot enqueue onto another process's stream).
  for (int i = 0; i < descriptor.buffers_size(); ++i) {
    if (descriptor.buffers(i).sync_mode() != mode) {
      return InvalidArgumentError(fmt::format(
          "handoff.sync_mode {} differs from tensor_descriptor.buffers[{}].sync_mode {}", mode, i,
          descriptor.buffers(i).sync_mode()));
    }
  }
  return {};
}

// The sum of the buffers' sizes, when every buffer of `descriptor` may live in `pool`.
Result<std::uint64_t> CheckBuffersFitPool(const TensorDescriptor& descriptor, const Pool& pool) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < descriptor.buffers().size(); ++i) {
    const BufferHandle& buffer = descriptor.buffers()[i];
    if (buffer.device_tag() != pool.device_tag()) {
      return FailedPreconditionError(
          fmt::format("tensor_descriptor.buffers[{}].device_tag {} does not match pool {} ({})", i,
                      buffer.device_tag().Name(), pool.name(), pool.device_tag().Name()));
    }
    if (buffer.memory_class() != MemoryClass::Standard()) {
      return FailedPreconditionError(fmt::format(
          "tensor_descriptor.buffers[{}].memory_class {}: pool {} holds standard memory", i,
          buffer.memory_class().Name(), pool.name()));
    }
    if (buffer.alignment() > pool.page_size()) {
      return InvalidArgumentError(
          fmt::format("tensor_descriptor.buffers[{}].alignment {} is above pool {}'s page size {}",
                      i, buffer.alignment(), pool.name(), pool.page_size()));
    }
    if (__builtin_add_overflow(total, buffer.byte_size(), &total)) {
      return ResourceExhaustedError(
          "tensor_descriptor: the buffers' sizes add up to more than 2^64 bytes");
    }
  }
  return total;
}

// Whether an allocation of `descriptor` in a pool takes a fence: when its buffers all
// declare sync mode Event. FAILED_PRECONDITION when one does and the pool has no fences
// (`has_fences` false).
Result<bool> NeedsFence(const TensorDescriptor& descriptor, const Pool& pool, bool has_fences) {
  const std::vector<BufferHandle>& buffers = descriptor.buffers();
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].sync_mode() == SyncMode::kEvent && !has_fences) {
      return FailedPreconditionError(fmt::format(
          "tensor_descriptor.buffers[{}].sync_mode {} ({}) needs a fence, which only CUDA pools "
          "give: pool {} is not one",
          i, SyncModeToByte(SyncMode::kEvent), SyncModeName(SyncMode::kEvent), pool.name()));
    }
  }
  return !buffers.empty() && std::ranges::all_of(buffers, [](const BufferHandle& buffer) {
    return buffer.sync_mode() == SyncMode::kEvent;
  });
}

void FillFence(const FenceSlot& slot, v1::Fence& fence) {
  fence.set_segment_id(slot.segment_id);
  fence.set_segment_size(slot.segment_size);
  fence.set_offset(slot.offset);
  fence.set_value(slot.value);
}

// The handoff a version keeps: the mode, and the allocation's fence in Event mode (whatever
// fence the request carried).
v1::SyncHandoff StoredHandoff(std::uint32_t sync_mode, const ReservedFence& fence) {
  v1::SyncHandoff handoff;
  handoff.set_sync_mode(sync_mode);
  if (fence) FillFence(fence.slot(), *handoff.mutable_fence());
  return handoff;
}

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

// Adds `version` (just published in Event mode) to the session's unsignalled versions,
// unless its fence is already reached. The entries that are gone or reached are dropped
// whenever the list has doubled since they last were: amortized constant time per publish.
void NoteUnsignalled(Session& session, const std::shared_ptr<TensorVersion>& version) {
  constexpr std::size_t kMinPruneSize = 16;
  if (version->fence.State() == FenceState::kReady) return;
  if (session.unsignalled.size() >= session.unsignalled_prune_at) {
    std::erase_if(session.unsignalled, [](const std::weak_ptr<TensorVersion>& weak) {
      const std::shared_ptr<TensorVersion> live = weak.lock();
      return live == nullptr || live->deleted || live->fence.State() == FenceState::kReady;
    });
    session.unsignalled_prune_at = std::max(kMinPruneSize, 2 * session.unsignalled.size());
  }
  session.unsignalled.push_back(version);
}

Error SessionEnded(std::uint64_t session_id) {
  return UnauthenticatedError(fmt::format("session {} ended", session_id)).error();
}

Error NotPendingAllocation(std::uint64_t allocation_id) {
  return NotFoundError(fmt::format("allocation_id {} is not a pending allocation of this session",
                                   allocation_id))
      .error();
}

Status CheckWaitTimeout(std::uint32_t wait_timeout_ms, std::uint32_t max_wait_ms) {
  if (wait_timeout_ms <= max_wait_ms) return {};
  return InvalidArgumentError(
      fmt::format("wait_timeout_ms {} is above the limit {}", wait_timeout_ms, max_wait_ms));
}

Status ValidateBatchAcquire(const v1::BatchAcquireRequest& request, std::size_t max_names) {
  if (static_cast<std::size_t>(request.names_size()) > max_names) {
    return InvalidArgumentError(
        fmt::format("names has {} entries, above the limit {}", request.names_size(), max_names));
  }
  if (request.names_size() == 0 && request.prefix().empty()) {
    return InvalidArgumentError("names and prefix are both empty: nothing to acquire");
  }
  for (int i = 0; i < request.names_size(); ++i) {
    HURRAY_RETURN_IF_ERROR(ValidateTensorName(request.names(i), fmt::format("names[{}]", i)));
  }
  return {};
}

bool IsEventHandoff(const v1::SyncHandoff& handoff) {
  return handoff.sync_mode() == SyncModeToByte(SyncMode::kEvent);
}

Status CheckBatchSize(const v1::PublishBatchRequest& request, std::size_t max_items) {
  if (request.items_size() == 0) return InvalidArgumentError("items is empty: nothing to publish");
  if (static_cast<std::size_t>(request.items_size()) > max_items) {
    return InvalidArgumentError(
        fmt::format("items has {} entries, above the limit {}", request.items_size(), max_items));
  }
  return {};
}

// How a refusal names item `index` of a batch: "items[3] (model/w3)".
std::string ItemContext(const v1::PublishBatchRequest& request, int index) {
  return fmt::format("items[{}] ({})", index, Shown(request.items(index).name()));
}

// A batch item that breaks a rule, and its refusal.
struct ItemError {
  int index = 0;
  Error error;
};

// The first item of a batch with a bad name, or a name or allocation_id listed before it.
std::optional<ItemError> FirstMalformedItem(const v1::PublishBatchRequest& request) {
  std::unordered_map<std::string_view, int> names;
  std::unordered_map<std::uint64_t, int> allocations;
  names.reserve(static_cast<std::size_t>(request.items_size()));
  allocations.reserve(static_cast<std::size_t>(request.items_size()));
  for (int i = 0; i < request.items_size(); ++i) {
    const v1::PublishRequest& item = request.items(i);
    Status valid = ValidateTensorName(item.name());
    if (const auto [first, added] = names.emplace(item.name(), i); valid && !added) {
      valid = InvalidArgumentError(fmt::format("name already listed as items[{}]", first->second));
    }
    if (const auto [first, added] = allocations.emplace(item.allocation_id(), i); valid && !added) {
      valid = InvalidArgumentError(fmt::format("allocation_id {} already listed in items[{}]",
                                               item.allocation_id(), first->second));
    }
    if (!valid) {
      return ItemError{.index = i, .error = valid.error().WithContext(ItemContext(request, i))};
    }
  }
  return std::nullopt;
}

// The user name of `uid` on this host; empty when it has none.
std::string UserName(std::uint32_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return "";
  }
  return entry.pw_name;
}

// True when an acquire that failed with `result` should wait for a publish.
template <typename T>
bool ShouldWait(const Result<T>& result, std::uint32_t wait_timeout_ms) {
  return !result && result.error().code() == StatusCode::kNotFound && wait_timeout_ms != 0;
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

// ---- Sessions ----

Result<SessionGrant> Registry::OpenSession(const PeerCredentials& peer,
                                           std::string_view client_name) {
  HURRAY_ASSIGN_OR_RETURN(std::string token, RandomHex(kSessionTokenBytes));
  Session session{.peer = peer,
                  .client_name = std::string(client_name.substr(0, kMaxSessionClientNameBytes)),
                  .token = token};
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
        Shown(name), version->number, session_id, version->fence.slot().segment_id,
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

Result<v1::SlabMappedAck> Registry::SlabMapped(std::uint64_t session_id,
                                               const v1::SlabMapped& request) {
  const std::uint64_t segment_id = request.segment_id();
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
  if (request.unmapped()) {
    session->slab_mappings.erase(segment_id);
  } else {
    session->slab_mappings.insert_or_assign(
        segment_id, SlabMapping{.pool = pool, .read_only = request.read_only()});
  }
  return v1::SlabMappedAck();
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
  if (token.empty()) {
    return UnauthenticatedError(
        fmt::format("no session token: send {} metadata", kSessionMetadataKey));
  }
  return UnauthenticatedError("unknown session token");
}

std::optional<PeerCredentials> Registry::SessionPeer(std::uint64_t session_id) const {
  std::lock_guard lock(mutex_);
  const Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::nullopt;
  return session->peer;
}

// ---- Allocate / publish ----

Result<v1::AllocateResponse> Registry::Allocate(std::uint64_t session_id,
                                                const v1::AllocateRequest& request) {
  auto descriptor = DescriptorFromProto(request.tensor_descriptor());
  if (!descriptor) return std::unexpected(descriptor.error().WithContext("tensor_descriptor"));
  const std::string_view pool_name = request.pool().empty() ? kDefaultPoolName : request.pool();
  HURRAY_ASSIGN_OR_RETURN(Pool* const pool, pools_.Resolve(pool_name));
  HURRAY_ASSIGN_OR_RETURN(const std::uint64_t total, CheckBuffersFitPool(*descriptor, *pool));
  FenceTable* fences = FencesOf(pool);
  HURRAY_ASSIGN_OR_RETURN(const bool needs_fence,
                          NeedsFence(*descriptor, *pool, /*has_fences=*/fences != nullptr));
  // Copied before the lock is taken: nothing else needs the mutex to wait for it.
  Allocation allocation{
      .session_id = session_id,
      .pool = pool,
      .descriptor = request.tensor_descriptor(),
      .buffers = {},
      .byte_size = total,
      .charged_bytes = ChargedBytes(total, request.tensor_descriptor().ByteSizeLong())};
  std::unique_lock lock(mutex_);
  std::vector<v1::WatchEvent> evictions;
  auto response = AllocateLocked(session_id, *descriptor, needs_fence ? fences : nullptr,
                                 allocation, evictions);
  if (!evictions.empty()) watches_.Deliver(lock, evictions);
  return response;
}

Result<v1::AllocateResponse> Registry::AllocateLocked(std::uint64_t session_id,
                                                      const TensorDescriptor& descriptor,
                                                      FenceTable* fences, Allocation& allocation,
                                                      std::vector<v1::WatchEvent>& evictions) {
  Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::unexpected(SessionEnded(session_id));
  const std::uint64_t quota = options_.session_quota_bytes;
  const std::uint64_t total = allocation.charged_bytes;
  if (quota != 0 && (total > quota || session->pending_bytes > quota - total)) {
    return ResourceExhaustedError(
        fmt::format("session quota: {} more bytes would exceed {} ({} pending)", total, quota,
                    session->pending_bytes));
  }
  HURRAY_RETURN_IF_ERROR(uid_quotas_.CheckPending(session->peer.uid, total));
  HURRAY_ASSIGN_OR_RETURN(
      allocation.buffers,
      PlaceBuffersEvictingLocked(*allocation.pool, descriptor, allocation.byte_size, evictions));
  if (fences != nullptr) {
    // Last, so that no failure after it could retire the fresh fence.
    auto fence = fences->Reserve();
    if (!fence) {
      FreeBuffers(*allocation.pool, allocation.buffers);
      return std::unexpected(std::move(fence).error());
    }
    allocation.fence = std::move(*fence);
  }
  const std::uint64_t id = next_id_++;
  v1::AllocateResponse response;
  response.set_allocation_id(id);
  for (const auto& location : allocation.buffers) *response.add_buffers() = location;
  if (allocation.fence) FillFence(allocation.fence.slot(), *response.mutable_fence());
  response.set_daemon_epoch(options_.daemon_epoch);
  session->allocations.insert(id);
  session->pending_bytes += total;
  uid_quotas_.AddPending(session->peer.uid, total);
  allocations_.Add(id, std::move(allocation));
  return response;
}

Result<std::vector<v1::BufferLocation>> Registry::PlaceBuffersEvictingLocked(
    Pool& pool, const TensorDescriptor& descriptor, std::uint64_t byte_size,
    std::vector<v1::WatchEvent>& evictions) {
  auto placed = PlaceBuffers(pool, descriptor);
  // Evicting cannot help an allocation larger than the whole pool.
  if (!placed && byte_size > pool.Usage().capacity_bytes) return placed;
  while (!placed && placed.error().code() == StatusCode::kResourceExhausted) {
    TensorVersion* victim = versions_.EvictionCandidate(&pool);
    if (victim == nullptr) return placed;
    const std::string name = *victim->name;
    spdlog::debug("evicting {} version {} ({} bytes) from pool {} for an allocation of {} bytes",
                  Shown(name), victim->number, victim->byte_size, pool.name(), byte_size);
    ++evicted_.tensors;
    evicted_.bytes += victim->byte_size;
    RemoveVersionsLocked(name, victim->number, v1::WatchEvent::KIND_EVICTED, evictions);
    placed = PlaceBuffers(pool, descriptor);
  }
  return placed;
}

Result<v1::CancelAllocationResponse> Registry::CancelAllocation(
    std::uint64_t session_id, const v1::CancelAllocationRequest& request) {
  std::lock_guard lock(mutex_);
  if (allocations_.FindOfSession(request.allocation_id(), session_id) == nullptr) {
    return std::unexpected(NotPendingAllocation(request.allocation_id()));
  }
  FreeAllocationLocked(request.allocation_id());
  v1::CancelAllocationResponse response;
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

void Registry::FreeAllocationLocked(std::uint64_t allocation_id, std::uint64_t hold) {
  std::optional<Allocation> allocation = allocations_.Take(allocation_id);
  if (!allocation) return;
  Session* session = sessions_.Find(allocation->session_id);
  bool quarantined = false;
  if (hold != 0 && session != nullptr) {
    std::vector<PoolRange> ranges;
    ranges.reserve(allocation->buffers.size());
    for (const v1::BufferLocation& buffer : allocation->buffers) {
      ranges.push_back(PoolRange{.segment_id = buffer.segment_id(),
                                 .offset = buffer.offset(),
                                 .size = buffer.byte_size()});
    }
    quarantined =
        quarantine_.Add(hold, *allocation->pool, ranges,
                        RangeQuarantine::Charge{.uid = session->peer.uid,
                                                .bytes = allocation->charged_bytes,
                                                .kind = RangeQuarantine::ChargeKind::kPending});
  }
  if (!quarantined) FreeBuffers(*allocation->pool, allocation->buffers);
  if (session != nullptr) {
    session->allocations.erase(allocation_id);
    session->pending_bytes -= allocation->charged_bytes;
    // A quarantined allocation's charge goes when its hold is released.
    if (!quarantined) uid_quotas_.RemovePending(session->peer.uid, allocation->charged_bytes);
  }
}

std::shared_ptr<TensorVersion> Registry::MakeVersion(const std::string& name,
                                                     const Allocation& allocation,
                                                     const v1::SyncHandoff& handoff) const {
  auto version = std::make_shared<TensorVersion>();
  version->number = versions_.NextNumber(name);
  version->published_at_ns = NowNanoseconds();
  version->byte_size = allocation.byte_size;
  version->charged_bytes = allocation.charged_bytes;
  version->element_type = allocation.descriptor.element_type();
  version->shape.assign(allocation.descriptor.shape().begin(), allocation.descriptor.shape().end());
  version->pool = allocation.pool;
  for (const auto& location : allocation.buffers) {
    version->buffers.push_back(PoolRange{.segment_id = location.segment_id(),
                                         .offset = location.offset(),
                                         .size = location.byte_size()});
  }
  v1::TensorInfo info;  // Without the name: see TensorVersion::info_without_name.
  info.set_version(version->number);
  *info.mutable_tensor_descriptor() = allocation.descriptor;
  for (const auto& location : allocation.buffers) *info.add_buffers() = location;
  *info.mutable_handoff() = StoredHandoff(handoff.sync_mode(), allocation.fence);
  info.set_pool(std::string(allocation.pool->name()));
  info.set_published_at_ns(version->published_at_ns);
  info.SerializeToString(&version->info_without_name);
  return version;
}

Result<Allocation*> Registry::PendingForPublishLocked(std::uint64_t session_id,
                                                      const v1::PublishRequest& request) {
  Allocation* pending = allocations_.FindOfSession(request.allocation_id(), session_id);
  if (pending == nullptr) return std::unexpected(NotPendingAllocation(request.allocation_id()));
  HURRAY_RETURN_IF_ERROR(access_->Check(AccessVerb::kPublish, request.name(),
                                        &sessions_.Find(session_id)->peer,
                                        NamespaceOwner(versions_, request.name())));
  HURRAY_RETURN_IF_ERROR(access_->CheckPool(pending->pool->name(), request.name()));
  HURRAY_RETURN_IF_ERROR(ValidateHandoff(request.handoff(), pending->descriptor));
  if (IsEventHandoff(request.handoff()) && !pending->fence) {
    return FailedPreconditionError(fmt::format(
        "allocation_id {} has no fence (pool {}): sync mode Event needs an allocation whose "
        "buffers all declare sync mode Event in a CUDA pool",
        request.allocation_id(), pending->pool->name()));
  }
  HURRAY_RETURN_IF_ERROR(SealBuffers(*pending));
  return pending;
}

void Registry::ForgetJournaledLocked(const v1::PublishBatchRequest& request,
                                     const std::vector<std::shared_ptr<TensorVersion>>& versions) {
  // Journaled but never published: their memory stays the pending allocations', so the
  // journal must neither serve nor keep them.
  for (std::size_t j = 0; j < versions.size(); ++j) {
    const std::string& name = request.items(static_cast<int>(j)).name();
    options_.journal->RecordRemoval(name, versions[j]->number);
    options_.journal->RecordFreed(name, versions[j]->number);
  }
}

Result<std::shared_ptr<TensorVersion>> Registry::PrepareVersionLocked(
    const Session& session, const v1::PublishRequest& request, const Allocation& pending) {
  std::shared_ptr<TensorVersion> version = MakeVersion(request.name(), pending, request.handoff());
  version->publisher_uid = session.peer.uid;
  version->namespace_owner_uid =
      NamespaceOwner(versions_, request.name()).value_or(session.peer.uid);
  version->evictable = request.evictable();
  if (options_.journal != nullptr) {
    HURRAY_RETURN_IF_ERROR(options_.journal->RecordPublish(request.name(), *version));
  }
  return version;
}

std::uint64_t Registry::CommitPublishLocked(Session& session, const v1::PublishRequest& request,
                                            Allocation& pending,
                                            std::shared_ptr<TensorVersion> version) {
  // The allocation becomes the version: its memory now belongs to the daemon.
  session.allocations.erase(request.allocation_id());
  session.pending_bytes -= pending.charged_bytes;
  uid_quotas_.RemovePending(session.peer.uid, pending.charged_bytes);
  uid_quotas_.AddPublished(session.peer.uid, pending.charged_bytes);
  version->fence = std::move(pending.fence);
  allocations_.Remove(request.allocation_id());
  if (!lost_.empty()) lost_.erase(request.name());
  if (IsEventHandoff(request.handoff())) NoteUnsignalled(session, version);
  version->fast_path_id = NextFastPathIdLocked(*version);
  const std::uint64_t number = version->number;
  versions_.Add(request.name(), std::move(version));
  return number;
}

Result<v1::PublishResponse> Registry::Publish(std::uint64_t session_id,
                                              const v1::PublishRequest& request) {
  HURRAY_RETURN_IF_ERROR(ValidateTensorName(request.name()));
  std::unique_lock lock(mutex_);
  HURRAY_ASSIGN_OR_RETURN(Allocation* const pending, PendingForPublishLocked(session_id, request));
  Session& session = *sessions_.Find(session_id);
  HURRAY_RETURN_IF_ERROR(uid_quotas_.CheckPublished(session.peer.uid, pending->charged_bytes));
  HURRAY_ASSIGN_OR_RETURN(std::shared_ptr<TensorVersion> version,
                          PrepareVersionLocked(session, request, *pending));
  const std::uint64_t number = CommitPublishLocked(session, request, *pending, std::move(version));

  Deferred deferred;
  waits_.Wake(request.name(), deferred);
  v1::PublishResponse response;
  response.set_name(request.name());
  response.set_version(number);
  response.set_daemon_epoch(options_.daemon_epoch);
  watches_.Deliver(lock, {Event(v1::WatchEvent::KIND_PUBLISHED, request.name(), number)});
  for (auto& action : deferred) action();
  HURRAY_RETURN_IF_ERROR(CommitJournal(
      [&] { return fmt::format("{} version {} is published", Shown(request.name()), number); }));
  return response;
}

Result<v1::PublishBatchResponse> Registry::PublishBatch(std::uint64_t session_id,
                                                        const v1::PublishBatchRequest& request) {
  HURRAY_RETURN_IF_ERROR(CheckBatchSize(request, options_.max_batch_names));
  // Names and repeats need no mutex; the items before the first malformed one are checked
  // against the state below, so that the refusal names the first offender either way.
  std::optional<ItemError> malformed = FirstMalformedItem(request);
  const int checked_end = malformed ? malformed->index : request.items_size();
  std::unique_lock lock(mutex_);
  std::vector<Allocation*> pending;
  pending.reserve(static_cast<std::size_t>(checked_end));
  for (int i = 0; i < checked_end; ++i) {
    auto found = PendingForPublishLocked(session_id, request.items(i));
    if (!found) return std::unexpected(found.error().WithContext(ItemContext(request, i)));
    pending.push_back(*found);
  }
  if (malformed) return std::unexpected(std::move(malformed->error));

  // Every item is valid and journaled (or none is): all versions go in before any wait or
  // watcher hears of one.
  Session& session = *sessions_.Find(session_id);
  std::uint64_t batch_bytes = 0;
  for (const Allocation* item : pending) batch_bytes += item->charged_bytes;
  HURRAY_RETURN_IF_ERROR(uid_quotas_.CheckPublished(session.peer.uid, batch_bytes));
  std::vector<std::shared_ptr<TensorVersion>> versions;
  versions.reserve(pending.size());
  for (int i = 0; i < request.items_size(); ++i) {
    auto version =
        PrepareVersionLocked(session, request.items(i), *pending[static_cast<std::size_t>(i)]);
    if (!version) {
      ForgetJournaledLocked(request, versions);
      return std::unexpected(version.error().WithContext(ItemContext(request, i)));
    }
    versions.push_back(std::move(*version));
  }
  v1::PublishBatchResponse response;
  std::vector<v1::WatchEvent> events;
  events.reserve(pending.size());
  for (int i = 0; i < request.items_size(); ++i) {
    const v1::PublishRequest& item = request.items(i);
    const auto index = static_cast<std::size_t>(i);
    const std::uint64_t number =
        CommitPublishLocked(session, item, *pending[index], std::move(versions[index]));
    v1::PublishResponse& published = *response.add_items();
    published.set_name(item.name());
    published.set_version(number);
    events.push_back(Event(v1::WatchEvent::KIND_PUBLISHED, item.name(), number));
  }
  Deferred deferred;
  for (const v1::PublishRequest& item : request.items()) waits_.Wake(item.name(), deferred);
  response.set_daemon_epoch(options_.daemon_epoch);
  watches_.Deliver(lock, events);
  for (auto& action : deferred) action();
  // One commit for the whole batch.
  HURRAY_RETURN_IF_ERROR(CommitJournal(
      [&] { return fmt::format("the batch's {} tensors are published", request.items_size()); }));
  return response;
}

Status Registry::CommitJournal(const std::function<std::string()>& done) const {
  if (options_.journal == nullptr) return {};
  Status committed = options_.journal->Commit();
  if (!committed) {
    return std::unexpected(committed.error().WithContext(
        done() + ", but the journal could not sync it (a crash of the machine may lose it)"));
  }
  return {};
}

v1::WatchEvent Registry::Event(v1::WatchEvent::Kind kind, const std::string& name,
                               std::uint64_t version) const {
  v1::WatchEvent event;
  event.set_kind(kind);
  event.set_name(name);
  event.set_version(version);
  event.set_daemon_epoch(options_.daemon_epoch);
  return event;
}

// ---- Acquire ----

Result<Registry::Grant> Registry::AcquireLocked(std::uint64_t session_id, const std::string& name,
                                                std::uint64_t version_number) {
  Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::unexpected(SessionEnded(session_id));
  // Before the lookup: a refusal says nothing of whether the name is published.
  HURRAY_RETURN_IF_ERROR(access_->Check(AccessVerb::kRead, name, &session->peer, std::nullopt));
  std::shared_ptr<TensorVersion> version = versions_.Find(name, version_number);
  if (version == nullptr) {
    if (version_number != 0) {
      const std::uint64_t next = versions_.NextNumber(name);
      return NotFoundError(
          fmt::format("{} version {} is not published{}", Shown(name), version_number,
                      version_number < next
                          ? fmt::format(" (no longer: the name's versions reached {})", next - 1)
                          : ""));
    }
    if (auto lost = lost_.find(name); lost != lost_.end()) {
      return NotFoundError(fmt::format("{} is lost: {}", Shown(name), lost->second));
    }
    return NotFoundError(fmt::format("{} is not published", Shown(name)));
  }
  if (version->fence && version->fence.State() == FenceState::kFailed) {
    return NotFoundError(fmt::format(
        "{} version {} is lost: its fence was poisoned (its producer ended before signalling "
        "it, or the daemon is stopping)",
        Shown(name), version->number));
  }
  HURRAY_RETURN_IF_ERROR(uid_quotas_.CheckLease(session->peer.uid));
  const std::uint64_t lease_id = next_id_++;
  uid_quotas_.AddLease(session->peer.uid);
  leases_.Add(lease_id, Lease{.session_id = session_id, .version = version.get()});
  session->leases.insert(lease_id);
  ++version->lease_count;
  // Its identity goes to this session in the reply: from now its uid's lease pages may pin it.
  if (version->fast_path_id != 0) version->Grant(session->peer.uid);
  versions_.MarkUsed(version.get());
  return Grant{.lease_id = lease_id, .version = std::move(version)};
}

void Registry::FillAcquireResponse(const std::string& name, const Grant& grant,
                                   v1::AcquireResponse& response) const {
  response.set_lease_id(grant.lease_id);
  grant.version->FillTensorInfo(name, *response.mutable_tensor());
  if (grant.version->fence) {
    response.mutable_tensor()->mutable_handoff()->set_ready(grant.version->fence.State() ==
                                                            FenceState::kReady);
  }
  response.set_daemon_epoch(options_.daemon_epoch);
  if (grant.version->fast_path_id != 0) {
    response.set_version_id(grant.version->fast_path_id);
    response.set_directory_entry(grant.version->directory_entry);
  }
}

Result<v1::AcquireResponse> Registry::AcquireReply(const std::string& name,
                                                   Result<Grant> grant) const {
  if (!grant) return std::unexpected(std::move(grant.error()));
  v1::AcquireResponse response;
  FillAcquireResponse(name, *grant, response);
  return response;
}

std::uint64_t Registry::Acquire(std::uint64_t session_id, const v1::AcquireRequest& request,
                                AcquireDone done) {
  Status valid = CheckWaitTimeout(request.wait_timeout_ms(), options_.max_wait_ms);
  if (valid) valid = ValidateTensorName(request.name());
  if (!valid) {
    done(std::unexpected(std::move(valid).error()));
    return 0;
  }
  std::unique_lock lock(mutex_);
  auto grant = AcquireLocked(session_id, request.name(), request.version());
  // A version published and gone is not waited for: it will not be published again.
  const bool wait =
      ShouldWait(grant, request.wait_timeout_ms()) &&
      !(request.version() != 0 && request.version() < versions_.NextNumber(request.name()));
  if (!wait) {
    lock.unlock();
    done(AcquireReply(request.name(), std::move(grant)));
    return 0;
  }
  auto shared_done = std::make_shared<AcquireDone>(std::move(done));
  auto try_complete = [this, session_id, name = request.name(), version = request.version(),
                       shared_done](Deferred& deferred) {
    auto retry = AcquireLocked(session_id, name, version);
    if (!retry && retry.error().code() == StatusCode::kNotFound) return false;
    deferred.emplace_back([this, shared_done, name, retry = std::move(retry)]() mutable {
      (*shared_done)(AcquireReply(name, std::move(retry)));
    });
    return true;
  };
  auto fail = [shared_done](Error error) { (*shared_done)(std::unexpected(std::move(error))); };
  return StartWaitLocked(lock, session_id, {request.name()}, Wait::WakeOn::kEveryPublish,
                         request.wait_timeout_ms(), std::move(try_complete), std::move(fail));
}

Result<v1::AcquireResponse> Registry::AcquireNow(std::uint64_t session_id,
                                                 const v1::AcquireRequest& request) {
  if (request.wait_timeout_ms() != 0) {
    return InvalidArgumentError(fmt::format(
        "wait_timeout_ms {}: an acquire that waits goes through gRPC", request.wait_timeout_ms()));
  }
  std::optional<Result<v1::AcquireResponse>> result;
  Acquire(session_id, request,
          [&result](Result<v1::AcquireResponse> done) { result = std::move(done); });
  // Without a wait, Acquire completes before it returns.
  return std::move(*result);  // NOLINT(bugprone-unchecked-optional-access)
}

Status Registry::AcquireNowEncoded(std::uint64_t session_id, const v1::AcquireRequest& request,
                                   std::string& reply) {
  if (request.wait_timeout_ms() != 0) {
    return InvalidArgumentError(fmt::format(
        "wait_timeout_ms {}: an acquire that waits goes through gRPC", request.wait_timeout_ms()));
  }
  HURRAY_RETURN_IF_ERROR(ValidateTensorName(request.name()));
  Result<Grant> grant;
  {
    std::lock_guard lock(mutex_);
    grant = AcquireLocked(session_id, request.name(), request.version());
  }
  if (!grant) return std::unexpected(std::move(grant.error()));
  const TensorVersion& version = *grant->version;
  const bool fast_path = version.fast_path_id != 0;
  AppendAcquireResponse(
      AcquireReplyParts{.lease_id = grant->lease_id,
                        .name = request.name(),
                        .info_without_name = version.info_without_name,
                        .ready = version.fence && version.fence.State() == FenceState::kReady,
                        .daemon_epoch = options_.daemon_epoch,
                        .version_id = fast_path ? version.fast_path_id : 0,
                        .directory_entry = fast_path ? version.directory_entry : 0},
      reply);
  return {};
}

Result<std::vector<Registry::NamedGrant>> Registry::BatchAcquireLocked(
    std::uint64_t session_id, const v1::BatchAcquireRequest& request) {
  // First find every version, then take the leases: all or none.
  std::vector<std::string> wanted(request.names().begin(), request.names().end());
  std::set<std::string, std::less<>> listed(wanted.begin(), wanted.end());
  const Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::unexpected(SessionEnded(session_id));
  if (!request.prefix().empty()) {
    const VersionStore::Names& names = versions_.names();
    std::size_t visited = 0;
    for (auto it = names.lower_bound(request.prefix());
         it != names.end() && HasPrefix(it->first, request.prefix()); ++it) {
      // The walk under the mutex is bounded as a list of names is, readable or not.
      if (++visited > options_.max_batch_names) {
        return InvalidArgumentError(
            fmt::format("prefix {} covers more than max_batch_names {} names: use a longer prefix",
                        Shown(request.prefix()), options_.max_batch_names));
      }
      // A prefix takes only the names the session may read; listed names are checked below.
      if (it->second.Latest() != nullptr && access_->MayRead(it->first, &session->peer) &&
          listed.insert(it->first).second) {
        wanted.push_back(it->first);
      }
    }
  }
  for (const std::string& name : wanted) {
    // Before the lookup, as AcquireLocked: a refusal says nothing of whether it is published.
    HURRAY_RETURN_IF_ERROR(access_->Check(AccessVerb::kRead, name, &session->peer, std::nullopt));
    if (versions_.Find(name, 0) == nullptr) {
      return NotFoundError(fmt::format("{} is not published", Shown(name)));
    }
  }
  std::vector<NamedGrant> grants;
  grants.reserve(wanted.size());
  std::set<std::string, std::less<>> done;
  for (std::string& name : wanted) {
    if (!done.insert(name).second) continue;  // Listed twice: one lease.
    auto acquired = AcquireLocked(session_id, name, 0);
    if (!acquired) {
      for (const auto& taken : grants) ReleaseLeaseLocked(taken.grant.lease_id);
      return std::unexpected(acquired.error());
    }
    grants.push_back(NamedGrant{.name = std::move(name), .grant = std::move(*acquired)});
  }
  return grants;
}

Result<v1::BatchAcquireResponse> Registry::BatchAcquireReply(
    Result<std::vector<NamedGrant>> grants) const {
  if (!grants) return std::unexpected(std::move(grants.error()));
  v1::BatchAcquireResponse response;
  response.mutable_tensors()->Reserve(static_cast<int>(grants->size()));
  for (const NamedGrant& named : *grants) {
    FillAcquireResponse(named.name, named.grant, *response.add_tensors());
  }
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

std::uint64_t Registry::BatchAcquire(std::uint64_t session_id,
                                     const v1::BatchAcquireRequest& request,
                                     BatchAcquireDone done) {
  Status valid = CheckWaitTimeout(request.wait_timeout_ms(), options_.max_wait_ms);
  if (valid) valid = ValidateBatchAcquire(request, options_.max_batch_names);
  if (!valid) {
    done(std::unexpected(std::move(valid).error()));
    return 0;
  }
  std::unique_lock lock(mutex_);
  auto grants = BatchAcquireLocked(session_id, request);
  if (!ShouldWait(grants, request.wait_timeout_ms())) {
    lock.unlock();
    done(BatchAcquireReply(std::move(grants)));
    return 0;
  }
  auto shared_done = std::make_shared<BatchAcquireDone>(std::move(done));
  auto try_complete = [this, session_id, request, shared_done](Deferred& deferred) {
    auto retry = BatchAcquireLocked(session_id, request);
    if (!retry && retry.error().code() == StatusCode::kNotFound) return false;
    deferred.emplace_back([this, shared_done, retry = std::move(retry)]() mutable {
      (*shared_done)(BatchAcquireReply(std::move(retry)));
    });
    return true;
  };
  auto fail = [shared_done](Error error) { (*shared_done)(std::unexpected(std::move(error))); };
  return StartWaitLocked(lock, session_id, {request.names().begin(), request.names().end()},
                         Wait::WakeOn::kAllPublished, request.wait_timeout_ms(),
                         std::move(try_complete), std::move(fail));
}

// ---- Waits ----

std::uint64_t Registry::StartWaitLocked(std::unique_lock<std::mutex>& lock,
                                        std::uint64_t session_id, std::vector<std::string> names,
                                        Wait::WakeOn wake_on, std::uint32_t timeout_ms,
                                        std::function<bool(Deferred&)> try_complete,
                                        std::function<void(Error)> fail) {
  const Session* session = sessions_.Find(session_id);
  const std::uint32_t uid = session != nullptr ? session->peer.uid : 0;
  if (const std::size_t waiting = waits_.UidWaits(uid);
      options_.max_waits_per_uid != 0 && waiting >= options_.max_waits_per_uid) {
    lock.unlock();
    fail(ResourceExhaustedError(
             fmt::format("uid {}: max_waits_per_uid {} reached ({} acquires of its sessions are "
                         "already waiting)",
                         uid, options_.max_waits_per_uid, waiting))
             .error());
    return 0;
  }
  const std::uint64_t id = next_id_++;
  const bool earliest =
      waits_.Add(id,
                 Wait{.session_id = session_id,
                      .uid = uid,
                      .names = std::move(names),
                      .wake_on = wake_on,
                      .deadline = Wait::Clock::now() + std::chrono::milliseconds(timeout_ms),
                      .try_complete = std::move(try_complete),
                      .fail = std::move(fail)},
                 [this](std::string_view name) { return versions_.Find(name, 0) != nullptr; });
  if (earliest) ArmWaitTimerLocked();
  return id;
}

void Registry::ArmWaitTimerLocked() {
  const std::optional<Wait::Clock::time_point> next = waits_.NextDeadline();
  if (!next) return;  // A wait still armed finds nothing expired when it fires.
  // A timer armed for this deadline or an earlier one stays: when it fires it fails what has
  // expired and arms for the next deadline. Re-arming it for every new wait (a consumer that
  // waits for each next version, its earlier wait answered) cost the daemon a wake-up of the
  // io_context's thread and a timerfd_settime per wait.
  if (wait_timer_armed_ && *wait_timer_armed_ <= *next) return;
  wait_timer_armed_ = *next;
  // Cancels the wait armed before (its handler sees operation_aborted).
  wait_timer_.expires_at(*next);
  wait_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) OnWaitTimer();
  });
}

void Registry::OnWaitTimer() {
  // Each expired wait with its message, which names what was still missing (a bounded
  // excerpt: a batch may list 100,000 names).
  std::vector<std::pair<Wait, std::string>> expired;
  {
    std::lock_guard lock(mutex_);
    wait_timer_armed_.reset();
    for (Wait& wait : waits_.TakeExpired(Wait::Clock::now())) {
      constexpr std::size_t kShownNames = 8;
      std::string names;
      std::size_t missing = 0;
      for (const std::string& name : wait.names) {
        // A kEveryPublish wait may want a version of a published name: name it regardless.
        if (wait.wake_on == Wait::WakeOn::kAllPublished && versions_.Find(name, 0) != nullptr) {
          continue;
        }
        if (++missing > kShownNames) continue;
        if (!names.empty()) names += ", ";
        names += Shown(name);
      }
      if (missing > kShownNames) names += fmt::format(" and {} more", missing - kShownNames);
      expired.emplace_back(std::move(wait), names.empty() ? "prefix" : std::move(names));
    }
    ArmWaitTimerLocked();
  }
  for (auto& [wait, names] : expired) {
    wait.fail(
        DeadlineExceededError(fmt::format("not published before the wait timed out: {}", names))
            .error());
  }
}

bool Registry::CancelWait(std::uint64_t wait_id) {
  std::lock_guard lock(mutex_);
  return waits_.Remove(wait_id).has_value();
}

// ---- Release / delete ----

void Registry::ReleaseLeaseLocked(std::uint64_t lease_id) {
  const Lease* lease = leases_.Find(lease_id);
  if (lease == nullptr) return;
  TensorVersion* version = lease->version;
  if (Session* session = sessions_.Find(lease->session_id)) {
    session->leases.erase(lease_id);
    uid_quotas_.RemoveLease(session->peer.uid);
  }
  leases_.Remove(lease_id);
  --version->lease_count;
  versions_.ReclaimIfUnused(version);
}

Result<v1::ReleaseResponse> Registry::Release(std::uint64_t session_id,
                                              const v1::ReleaseRequest& request) {
  std::lock_guard lock(mutex_);
  for (std::uint64_t lease_id : request.lease_ids()) {
    const Lease* lease = leases_.Find(lease_id);
    if (lease == nullptr || lease->session_id != session_id) {
      return NotFoundError(fmt::format("lease_id {} is not a lease of this session", lease_id));
    }
    ReleaseLeaseLocked(lease_id);
  }
  v1::ReleaseResponse response;
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

Result<v1::DeleteResponse> Registry::Delete(std::uint64_t session_id,
                                            const v1::DeleteRequest& request) {
  HURRAY_RETURN_IF_ERROR(ValidateTensorName(request.name()));
  std::unique_lock lock(mutex_);
  const Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::unexpected(SessionEnded(session_id));
  HURRAY_RETURN_IF_ERROR(access_->Check(AccessVerb::kDelete, request.name(), &session->peer,
                                        NamespaceOwner(versions_, request.name())));
  std::vector<v1::WatchEvent> events;
  const std::size_t deleted =
      RemoveVersionsLocked(request.name(), request.version(), v1::WatchEvent::KIND_DELETED, events);
  if (deleted == 0) {
    if (request.version() == 0) {
      return NotFoundError(fmt::format("{} has no versions", Shown(request.name())));
    }
    return NotFoundError(
        fmt::format("{} has no version {}", Shown(request.name()), request.version()));
  }
  v1::DeleteResponse response;
  response.set_versions_deleted(static_cast<std::uint32_t>(deleted));
  response.set_daemon_epoch(options_.daemon_epoch);
  watches_.Deliver(lock, events);
  // As for a removal the journal cannot record: logged, and the delete stands.
  if (Status committed =
          CommitJournal([&] { return fmt::format("{} is deleted", Shown(request.name())); });
      !committed) {
    spdlog::error("{}", committed.error().message());
  }
  return response;
}

std::size_t Registry::RemoveVersionsLocked(const std::string& name, std::uint64_t number,
                                           v1::WatchEvent::Kind kind,
                                           std::vector<v1::WatchEvent>& events) {
  const std::vector<TensorVersion*> removed = versions_.MarkDeleted(name, number);
  for (const TensorVersion* version : removed) {
    if (options_.journal != nullptr) options_.journal->RecordRemoval(name, version->number);
    events.push_back(Event(kind, name, version->number));
  }
  for (TensorVersion* version : removed) versions_.ReclaimIfUnused(version);  // May end the name.
  return removed.size();
}

// ---- Inspection ----

Result<v1::ListResponse> Registry::List(const v1::ListRequest& request,
                                        const PeerCredentials* viewer) const {
  v1::ListResponse response;
  const auto visible = [this, viewer](std::string_view name) {
    return access_->MayRead(name, viewer);
  };
  {
    std::lock_guard lock(mutex_);
    FillListPage(versions_, request, visible, response);
  }
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

Result<v1::DescribeResponse> Registry::Describe(const v1::DescribeRequest& request,
                                                const PeerCredentials* viewer) const {
  HURRAY_RETURN_IF_ERROR(ValidateTensorName(request.name()));
  HURRAY_RETURN_IF_ERROR(access_->Check(AccessVerb::kRead, request.name(), viewer, std::nullopt));
  v1::DescribeResponse response;
  std::shared_ptr<const TensorVersion> version;
  {
    std::lock_guard lock(mutex_);
    version = versions_.Find(request.name(), request.version());
    if (version == nullptr) {
      if (request.version() == 0) {
        return NotFoundError(fmt::format("{} is not published", Shown(request.name())));
      }
      return NotFoundError(
          fmt::format("{} version {} is not published", Shown(request.name()), request.version()));
    }
    FillVersionInfos(*versions_.FindEntry(request.name()), response);
  }
  version->FillTensorInfo(request.name(), *response.mutable_tensor());
  if (version->fence) {
    response.mutable_tensor()->mutable_handoff()->set_ready(version->fence.State() ==
                                                            FenceState::kReady);
  }
  response.mutable_owner()->set_uid(version->namespace_owner_uid);
  response.mutable_owner()->set_user(UserName(version->namespace_owner_uid));
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

v1::StatsResponse Registry::Stats() const {
  v1::StatsResponse response;
  FillPoolStats(pools_, response);
  for (v1::PoolStats& pool : *response.mutable_pools()) {
    for (std::string& pattern : access_->PoolNamespaces(pool.name())) {
      pool.add_namespaces(std::move(pattern));
    }
  }
  std::map<const Pool*, RegistryPoolCounts> counts;
  for (const auto& [pool, table] : fence_tables_) {
    const FenceTable::Counts fences = table->counts();
    counts[pool].fences_in_use = fences.in_use;
    counts[pool].fences_retired = fences.retired;
  }
  {
    std::lock_guard lock(mutex_);
    FillQuarantineCountsLocked(counts, response);
    for (const auto& [id, session] : sessions_.sessions()) {
      for (const auto& [segment_id, mapping] : session.slab_mappings) {
        RegistryPoolCounts& pool = counts[mapping.pool];
        ++pool.slab_mappings;
        if (mapping.read_only) ++pool.read_only_slab_mappings;
      }
    }
    response.set_session_count(static_cast<std::uint32_t>(sessions_.size()));
    response.set_lease_count(leases_.size());
    response.set_tensor_count(versions_.TensorCount());
    response.set_version_count(versions_.version_count());
    response.set_pending_allocation_count(allocations_.size());
    response.set_published_bytes_total(versions_.published_bytes());
    response.set_reclaimed_bytes_total(versions_.reclaimed_bytes());
    response.set_closed_session_count(closed_sessions_.sessions);
    response.set_closed_session_lease_count(closed_sessions_.leases);
    response.set_closed_session_allocation_count(closed_sessions_.allocations);
    response.set_closed_session_allocation_bytes(closed_sessions_.allocation_bytes);
    response.set_evicted_tensor_count(evicted_.tensors);
    response.set_evicted_bytes_total(evicted_.bytes);
    response.set_refused_connection_count(refused_connections_.load(std::memory_order_relaxed));
    uid_quotas_.FillStats(response);
    response.set_lost_tensor_count(lost_count_);
    response.set_adopted_tensor_count(adopted_count_);
    if (const auto& directory = options_.fast_path.directory) {
      response.set_fast_path_directory_entries_used(directory->used_entries());
      response.set_fast_path_directory_entries(directory->entry_count());
    }
    response.set_fast_path_lease_pages(lease_pages_.page_count());
    response.set_fast_path_lease_slots(lease_pages_.slot_count());
    response.set_fast_path_pinned_versions(versions_.pinned_count());
    response.set_fast_path_pinned_bytes(versions_.pinned_bytes());
    response.set_fast_path_scans(lease_pages_.scans());
    response.set_fast_path_refused_names(versions_.refused_entries());
  }
  response.set_earlier_epoch_held_versions(versions_.earlier_held_count());
  response.set_earlier_epoch_held_bytes(versions_.earlier_held_bytes());
  FillRegistryPoolCounts(counts, response);
  response.set_daemon_epoch(options_.daemon_epoch);
  response.set_uptime_seconds(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count()));
  return response;
}

void Registry::FillQuarantineCountsLocked(std::map<const Pool*, RegistryPoolCounts>& counts,
                                          v1::StatsResponse& response) const {
  for (const auto& [name, pool] : pools_.pools()) {
    const RangeQuarantine::PoolTotals quarantined = quarantine_.Totals(pool.get());
    if (quarantined.ranges == 0) continue;
    counts[pool.get()].quarantined_bytes = quarantined.bytes;
    counts[pool.get()].quarantined_ranges = quarantined.ranges;
  }
  response.set_quarantined_sessions(quarantine_.hold_count());
}

Registry::Adoption Registry::Adopt(std::vector<JournalRecord> versions,
                                   const std::vector<JournalRecord>& retained,
                                   bool earlier_clients_may_map) {
  Adoption adoption;
  std::lock_guard lock(mutex_);
  versions_.set_earlier_epochs_held(earlier_clients_may_map);
  // First, so that each name's versions stay in number order. Without an earlier client,
  // their memory is simply free.
  for (const JournalRecord& record : retained) {
    if (!earlier_clients_may_map) break;
    Result<std::shared_ptr<TensorVersion>> version =
        AdoptVersion(record, pools_, AdoptedFor::kHolding);
    if (!version) {
      // A CPU range that is not free or a pool that is gone: nothing of it to hold.
      spdlog::warn("{} version {}, retired but still mapped when the daemon before ended: {}",
                   Shown(record.name), record.number, version.error().message());
      continue;
    }
    // Charged as it was when retired, and uncharged as it is freed (the reclaim observer).
    uid_quotas_.AddPublished((*version)->publisher_uid, (*version)->charged_bytes);
    versions_.AddRetained(record.name, std::move(*version));
    adoption.held.push_back(record);
  }
  for (JournalRecord& record : versions) {
    Result<std::shared_ptr<TensorVersion>> version = AdoptVersion(record, pools_);
    if (!version) {
      const std::string reason =
          fmt::format("version {} did not survive the restart of hurrayd: {}", record.number,
                      version.error().message());
      spdlog::warn("{} is lost: {}", Shown(record.name), reason);
      lost_.insert_or_assign(record.name, reason);
      ++adoption.lost;
      continue;
    }
    uid_quotas_.AddPublished((*version)->publisher_uid, (*version)->charged_bytes);
    (*version)->fast_path_id = NextFastPathIdLocked(**version);
    versions_.Add(record.name, std::move(*version));
    adoption.adopted.push_back(std::move(record));
  }
  adopted_count_ += adoption.adopted.size();
  lost_count_ += adoption.lost;
  return adoption;
}

std::size_t Registry::ReleaseEarlierEpochs() {
  std::lock_guard lock(mutex_);
  return versions_.ReleaseEarlierEpochs();
}

std::uint64_t Registry::PoisonUnreachedFences() {
  std::uint64_t poisoned = 0;
  for (const auto& [pool, table] : fence_tables_) poisoned += table->PoisonUnreached();
  if (poisoned != 0) {
    spdlog::warn("{} fences not reached were poisoned: their tensors are lost", poisoned);
  }
  return poisoned;
}

// ---- Watch ----

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
