#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hurray/buffer_handle.h"
#include "hurray/descriptor_codec.h"
#include "registry/namespace_owner.h"
#include "registry/registry.h"
#include "registry/registry_errors.h"
#include "registry/tensor_name.h"

namespace hurray::daemon {
namespace {

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

Error NotPendingAllocation(std::uint64_t allocation_id) {
  return NotFoundError(fmt::format("allocation_id {} is not a pending allocation of this session",
                                   allocation_id))
      .error();
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
  return fmt::format("items[{}] ({})", index, ShownName(request.items(index).name()));
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
    if (valid && item.allocate_next()) {
      valid = InvalidArgumentError("allocate_next: a batch item cannot allocate; Publish can");
    }
    if (!valid) {
      return ItemError{.index = i, .error = valid.error().WithContext(ItemContext(request, i))};
    }
  }
  return std::nullopt;
}

// A publish's next allocation (PublishRequest.allocate_next): the answer, or the refusal.
void FillNextAllocation(Result<v1::AllocateResponse> allocated, v1::NextAllocation& next) {
  if (allocated) {
    *next.mutable_allocation() = std::move(*allocated);
    return;
  }
  v1::AllocationError& error = *next.mutable_error();
  error.set_code(static_cast<std::uint32_t>(allocated.error().code()));
  error.set_message(allocated.error().message());
}

}  // namespace

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
                  ShownName(name), victim->number, victim->byte_size, pool.name(), byte_size);
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
    HURRAY_RETURN_IF_ERROR(options_.journal->RecordPublish(
        JournalRecord{.kind = JournalRecord::Kind::kPublish,
                      .name = request.name(),
                      .number = version->number,
                      .publisher_uid = version->publisher_uid,
                      .namespace_owner_uid = version->namespace_owner_uid,
                      .evictable = version->evictable,
                      .info_without_name = version->info_without_name}));
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
  // The next allocation is an Allocate of this one's descriptor in its pool, taken before
  // the publish turns `pending` into a version.
  std::optional<v1::AllocateRequest> next_request;
  if (request.allocate_next()) {
    next_request.emplace();
    *next_request->mutable_tensor_descriptor() = pending->descriptor;
    next_request->set_pool(std::string(pending->pool->name()));
  }
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
  HURRAY_RETURN_IF_ERROR(CommitJournal([&] {
    return fmt::format("{} version {} is published", ShownName(request.name()), number);
  }));
  if (next_request)
    FillNextAllocation(Allocate(session_id, *next_request), *response.mutable_next());
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
      return NotFoundError(fmt::format("{} has no versions", ShownName(request.name())));
    }
    return NotFoundError(
        fmt::format("{} has no version {}", ShownName(request.name()), request.version()));
  }
  v1::DeleteResponse response;
  response.set_versions_deleted(static_cast<std::uint32_t>(deleted));
  response.set_daemon_epoch(options_.daemon_epoch);
  watches_.Deliver(lock, events);
  // As for a removal the journal cannot record: logged, and the delete stands.
  if (Status committed =
          CommitJournal([&] { return fmt::format("{} is deleted", ShownName(request.name())); });
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

}  // namespace hurray::daemon
