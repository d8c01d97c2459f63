// Registry: the daemon's state and the exchange's rules, independent of any transport.
//
// It holds sessions, pending allocations, published tensors (names, versions), leases,
// waits and watchers, and answers every Exchange rpc with the same messages the gRPC
// service and the session socket carry (proto/hurray/v1/exchange.proto). Memory returns to
// its pool only when a version is deleted or superseded *and* its last lease has ended, or
// when an unpublished allocation is cancelled or its session ends.
//
// A version published with `evictable` may also be evicted: when an Allocate finds no room
// in its pool, the pool's evictable versions without a lease go least recently used
// (published or acquired) first, one at a time, until the allocation fits; each is removed
// as Delete removes it, and watchers see KIND_EVICTED. Nothing is evicted for an allocation
// that fits, nor for one larger than its pool.
//
// Each part of the state is a table of its own (SessionTable, AllocationTable, LeaseTable,
// VersionStore, WaitSet, WatchHub; List, Describe and Stats read them through
// inspection.h); the registry holds the one mutex that guards them and applies the rules
// that keep them in step.
//
// Each CUDA pool (device tag CUDA) gets a FenceTable when the registry is built: the fences
// of its Event-mode tensors (see v1::Fence). An allocation whose buffers all declare sync
// mode Event takes a fence; its version keeps it; a producer whose session ends before its
// fence is reached has the fence poisoned and the version deleted.
//
// Quarantine: a session that ends while it could still write somewhere
// (an unpublished allocation, or an Event-mode version whose fence it never reached) may
// belong to a process that still writes there: a dead producer's last GPU work lands after
// its socket closed, a live process that closed its socket keeps its mapping. When the
// session has a pidfd on its process (SetPeerProcess), those ranges are not freed when it
// ends but quarantined (RangeQuarantine, a hold per session) until the pidfd shows the process
// has exited, and in a hold with a range of a CUDA pool Options::cuda_quarantine_grace more
// (ProcessExitWatch on the io_context); a poisoned version still leased joins the hold when
// its last lease ends, or is freed at once once the hold is gone. Quarantined bytes stay in
// their pool's used_bytes (Stats: quarantined_bytes per pool) and stay charged to the uid, as
// pending or published bytes as they were, until freed. A session without a pidfd (none
// could be had, or the daemon's own) frees them at once. The destructor frees every hold.
//
// The fast path (ipc/include/hurray/ipc/fast_path_layout.h): with Options::fast_path's
// directory, each published CPU-pool version without a fence gets a fast_path_id from the
// id sequence (never 0, never reused) and its name a directory entry (VersionStore), and each
// session may map the directory and one lease page of its own, whose slots count against
// its uid's lease quota while the session lasts. A version retired with no lease is freed
// only once no lease page of a uid it was granted to names it; until then it is pinned (its
// charge moved to the pinning uid), scanned for again whenever a session ends (its page goes
// with it) and after rescan_interval, an interval that doubles (to kMaxRescanBackoff times
// it) while rescans free nothing. A rescan reads each page once.
//
// Thread-safe: every method may be called from any thread. One mutex guards the state;
// callbacks (acquire completions, watch events) never run while it is held, and neither
// does building the TensorInfo of an Acquire, BatchAcquire or Describe reply (each version
// keeps its TensorInfo serialized once; replies parse it).
//
// Its methods are defined in one file per part: registry.cc (sessions, segments, fences,
// watches), registry_publish.cc (allocate, publish, delete), registry_acquire.cc (acquire,
// batch acquire, release), registry_waits.cc (waits and their timer), registry_fast_path.cc
// (the directory, lease pages, rescans), inspection.cc (List, Describe, Stats) and
// adopted_version.cc (the journal's versions at start).
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "access/access_policy.h"
#include "fast_path/directory_segment.h"
#include "fast_path/lease_scanner.h"
#include "hurray/error.h"
#include "hurray/v1/exchange.pb.h"
#include "journal/journal_record.h"
#include "pool/pool_set.h"
#include "registry/allocation_table.h"
#include "registry/fence_table.h"
#include "registry/inspection.h"
#include "registry/lease_table.h"
#include "registry/process_exit_watch.h"
#include "registry/range_quarantine.h"
#include "registry/session_access.h"
#include "registry/session_table.h"
#include "registry/uid_quota_table.h"
#include "registry/version_journal.h"
#include "registry/version_store.h"
#include "registry/wait_set.h"
#include "registry/watch_hub.h"

namespace hurray::daemon {

class Registry final {
 public:
  struct Options {
    // Changes on every daemon start; in every reply.
    std::uint64_t daemon_epoch = 1;
    // Most bytes one session may hold in unpublished allocations; 0 means no limit.
    std::uint64_t session_quota_bytes = 0;
    // Longest acquire wait accepted, in milliseconds.
    std::uint32_t max_wait_ms = 3'600'000;
    // Most names one BatchAcquire may list, and most items of one PublishBatch. A batch
    // waits as one, each name counted once: a publish costs it O(1) until its last missing
    // name is published, when the whole batch is acquired under the mutex (and a
    // PublishBatch holds the mutex while it checks and adds every item).
    std::size_t max_batch_names = 100'000;
    // Most acquires (and batch acquires) the sessions of one uid may have waiting at once;
    // one more is RESOURCE_EXHAUSTED. 0: no limit.
    std::size_t max_waits_per_uid = 4096;
    // Fence segments are named "/<fence_shm_prefix>-<32 random hex digits>".
    std::string fence_shm_prefix = "hurray";
    // Who may publish, read and delete where (both channels); null: the default policy
    // (first publisher owns a namespace) for the daemon's effective uid.
    std::shared_ptr<const AccessPolicy> access;
    // The most each uid may hold, over all its sessions (UidQuotaTable).
    UidQuota uid_quota;
    // Told of every publish and delete before it is acknowledged (journal/); null: none.
    // Must outlive the registry.
    VersionJournal* journal = nullptr;
    // The fast path (see "The fast path" above).
    struct FastPath {
      // Null: no fast path (map_directory and map_lease_page are FAILED_PRECONDITION).
      std::shared_ptr<fast_path::DirectorySegment> directory;
      // Slots of each session's lease page (1 to LeasePage::kMaxSlots).
      std::uint32_t lease_slots = 64;
      // How soon pinned versions are scanned for again while there are some.
      std::chrono::milliseconds rescan_interval{1};
      // The most directory entries the names one uid published may hold (0: no limit).
      std::uint64_t max_entries_per_uid = 0;
    };
    FastPath fast_path;
    // How long the ranges of a quarantine hold with a range in a CUDA pool stay out of use
    // after the process has exited: its GPU channels are torn down as its files close, after
    // the pidfd may already read as exited, so its last kernels may still be draining.
    std::chrono::milliseconds cuda_quarantine_grace{100};
  };

  // `pools` and `io` (which runs acquire-wait timers) must outlive the registry.
  Registry(const PoolSet& pools, boost::asio::io_context& io, Options options);
  // Call it once no thread runs `io` (io.stop(), then join them), as the daemon does: its
  // timers' handlers capture the registry, and a handler that has begun (it waits on the
  // registry's mutex) is not stopped by cancelling its timer.
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // ---- Sessions ----
  //
  // The session socket reaches these through RegistrySessionHost (session/), gRPC through
  // ExchangeService; the registry knows neither.

  // Opens a session for the process `peer` describes. `client_name` is kept for logs and
  // Stats as it is: the caller bounds it (the session socket refuses a hello whose name is
  // over its limit).
  [[nodiscard]] Result<SessionGrant> OpenSession(const PeerCredentials& peer,
                                                 std::string_view client_name);
  // Releases the session's leases, frees its unpublished allocations and ends its waits
  // (they complete with CANCELLED). Every Event-mode version it published whose fence is
  // not reached is poisoned and deleted, as Delete does (watchers see KIND_DELETED; memory
  // returns after the last lease), with a warning naming tensor, version and session.
  // With a pidfd on its process, the allocations' ranges and those versions' are
  // quarantined instead of freed, until the process has exited (see "Quarantine" above).
  // Unknown ids are ignored.
  void CloseSession(std::uint64_t session_id);
  // Keeps `process` (a pidfd) with the session, for CloseSession's quarantine. Unknown ids:
  // the descriptor is closed.
  void SetPeerProcess(std::uint64_t session_id, UniqueFd process);
  // Counted in Stats' refused_connection_count.
  void ConnectionRefused(const PeerCredentials& peer, const Error& refusal);
  // A descriptor on a segment: writable only while the session has an unpublished
  // allocation in it; read-only while it has a lease or an allocation in it. For a fence
  // segment, "in it" means the allocation's fence, or the leased version's. PERMISSION_DENIED
  // otherwise, NOT_FOUND for an unknown segment.
  [[nodiscard]] Result<SegmentAccess> GrantSegment(std::uint64_t session_id,
                                                   std::uint64_t segment_id, bool writable);
  // A read-only descriptor on the fast path's directory. FAILED_PRECONDITION with the fast
  // path off.
  [[nodiscard]] Result<DirectoryAccess> GrantDirectory(std::uint64_t session_id);
  // The session's lease page, made on the first call: FAILED_PRECONDITION with the fast path
  // off or on a second call; RESOURCE_EXHAUSTED when its slots would pass the uid's lease
  // quota (they count as leases until the session ends).
  [[nodiscard]] Result<LeasePageAccess> GrantLeasePage(std::uint64_t session_id);
  // Records that the session mapped a CUDA slab (read-only or not), until it reports the slab
  // unmapped or the session ends.
  // NOT_FOUND for an unknown segment, INVALID_ARGUMENT for a segment that is not a CUDA slab,
  // PERMISSION_DENIED for one GrantSegment never opened for this session.
  // The slabs live sessions report mapped (SlabMapped), which CudaPool::ReleaseIdleSlabs
  // must keep.
  [[nodiscard]] std::set<std::uint64_t> MappedSlabs() const;
  // How a session maps a CUDA slab, as it reports it.
  enum class SlabUse : std::uint8_t { kReadWrite, kReadOnly, kUnmapped };
  [[nodiscard]] Status SlabMapped(std::uint64_t session_id, std::uint64_t segment_id, SlabUse use);

  // The session a token names; UNAUTHENTICATED for an unknown token.
  [[nodiscard]] Result<std::uint64_t> Authenticate(std::string_view token) const;
  // The credentials a session was opened with; nullopt for an unknown session.
  [[nodiscard]] std::optional<PeerCredentials> SessionPeer(std::uint64_t session_id) const;

  // ---- Exchange ----

  [[nodiscard]] Result<v1::AllocateResponse> Allocate(std::uint64_t session_id,
                                                      const v1::AllocateRequest& request);
  [[nodiscard]] Result<v1::CancelAllocationResponse> CancelAllocation(
      std::uint64_t session_id, const v1::CancelAllocationRequest& request);
  // With request.allocate_next, then allocates the next tensor of the published one's
  // descriptor in its pool, as Allocate would, once the publish took effect: its answer or
  // its refusal is the response's `next` (a refused allocation does not undo the publish).
  [[nodiscard]] Result<v1::PublishResponse> Publish(std::uint64_t session_id,
                                                    const v1::PublishRequest& request);
  // Publishes every item as Publish would, all under one hold of the mutex: each item is
  // checked first (Options::max_batch_names; names; no name or allocation_id twice; each
  // allocation pending and of this session; each handoff), then every version is added,
  // and only then are waits woken and watchers told (one event per item, in order). A
  // refusal changes nothing and names the first offender ("items[3] (model/w3): ...").
  [[nodiscard]] Result<v1::PublishBatchResponse> PublishBatch(
      std::uint64_t session_id, const v1::PublishBatchRequest& request);

  using AcquireDone = std::function<void(Result<v1::AcquireResponse>)>;
  using BatchAcquireDone = std::function<void(Result<v1::BatchAcquireResponse>)>;
  // A lease just taken, and what its reply is built from.
  struct LeaseGrant {
    std::uint64_t lease_id = 0;
    std::shared_ptr<const TensorVersion> version;
    // Event handoff: the version's fence was reached when the lease was taken.
    bool ready = false;
  };

  // Acquires now, or (with wait_timeout_ms) once the tensor is published. `done` runs
  // exactly once: on this thread before returning, or later on a publishing thread or the
  // io_context. Returns a wait id for CancelWait when the call is waiting, 0 otherwise.
  std::uint64_t Acquire(std::uint64_t session_id, const v1::AcquireRequest& request,
                        AcquireDone done);
  // All listed names (and prefix matches) or none, with the same waiting rules.
  std::uint64_t BatchAcquire(std::uint64_t session_id, const v1::BatchAcquireRequest& request,
                             BatchAcquireDone done);
  // Acquire without a wait: INVALID_ARGUMENT when wait_timeout_ms is not 0.
  [[nodiscard]] Result<v1::AcquireResponse> AcquireNow(std::uint64_t session_id,
                                                       const v1::AcquireRequest& request);
  // Takes a lease on `name`'s version `version_number` (0: the latest) now: the rules and
  // errors of an Acquire without a wait, and no reply built. The caller builds it from the
  // grant (the session socket encodes it from the version's stored bytes).
  [[nodiscard]] Result<LeaseGrant> AcquireLease(std::uint64_t session_id, const std::string& name,
                                                std::uint64_t version_number);
  // Drops a waiting acquire without running its `done`. False when it already completed
  // (or is completing): then `done` runs (or ran) as usual.
  bool CancelWait(std::uint64_t wait_id);

  [[nodiscard]] Result<v1::ReleaseResponse> Release(std::uint64_t session_id,
                                                    const v1::ReleaseRequest& request);
  // PERMISSION_DENIED when the access policy does not let the session's uid delete there.
  [[nodiscard]] Result<v1::DeleteResponse> Delete(std::uint64_t session_id,
                                                  const v1::DeleteRequest& request);

  // ---- Inspection (no session needed) ----
  //
  // Each shows only the names `viewer` may read (AccessPolicy; null: an anonymous caller).

  [[nodiscard]] Result<v1::ListResponse> List(const v1::ListRequest& request,
                                              const PeerCredentials* viewer) const;
  // PERMISSION_DENIED for a name the viewer may not read.
  [[nodiscard]] Result<v1::DescribeResponse> Describe(const v1::DescribeRequest& request,
                                                      const PeerCredentials* viewer) const;
  [[nodiscard]] v1::StatsResponse Stats() const;

  using WatchCallback = WatchHub::Callback;
  // Calls `callback` with every publish and delete of a name starting with `prefix` that
  // `viewer` may read, in order, until Unwatch. Callbacks run on publishing threads and
  // must not block or call back into the registry. Returns the watch id.
  std::uint64_t Watch(std::string prefix, WatchCallback callback, const PeerCredentials* viewer);
  void Unwatch(std::uint64_t watch_id);

  // Poisons every fence not reached yet (of pending allocations and of versions), so that
  // no consumer stream waits for a producer the stopping daemon no longer serves; returns
  // how many. The daemon calls it as it stops, once the sessions have ended.
  std::uint64_t PoisonUnreachedFences();

  // What Adopt restored: the records of the versions served again.
  struct Adoption {
    std::vector<JournalRecord> adopted;  // Served again.
    std::vector<JournalRecord> held;     // Retained versions whose memory is held.
    std::uint64_t lost = 0;
  };
  // At start, before any session: publishes again the versions (kPublish records) an
  // earlier daemon's journal kept, under their names and numbers, their buffers taken from
  // their pools (AdoptVersion). A version that cannot be (a GPU tensor) is lost: logged,
  // counted in Stats, and an Acquire of its name says so until the name is published again.
  //
  // With `earlier_clients_may_map` (an earlier daemon's epoch hold is still open: its
  // clients may still read views of its memory), the memory of the `retained` versions
  // (kRetained records: retired, but still mapped when that daemon ended) is taken from
  // their pools too and held, never served, and every adopted version keeps its memory when
  // retired, until ReleaseEarlierEpochs.
  //
  // The journal must then keep only `adopted` and `held` (TensorJournal::KeepOnly): the
  // memory of every other version is free in this daemon.
  Adoption Adopt(std::vector<JournalRecord> versions,
                 const std::vector<JournalRecord>& retained = {},
                 bool earlier_clients_may_map = false);
  // No client of an earlier daemon maps its memory any more: what Adopt held for them goes
  // back to the pools (unless this daemon's leases hold it). Returns the versions freed.
  std::size_t ReleaseEarlierEpochs();

  [[nodiscard]] std::uint64_t daemon_epoch() const { return options_.daemon_epoch; }

 private:
  // A lease of a batch, with the name it was taken under.
  struct NamedGrant {
    std::string name;
    LeaseGrant grant;
  };
  // Where a session may use a segment from, and the pool that holds it.
  struct SegmentUse {
    bool in_allocation = false;
    bool in_lease = false;
    Pool* pool = nullptr;
    const FenceTable* fences = nullptr;  // Set instead of `pool` for a fence segment.
  };

  // The rest of Allocate, under the mutex: the session's quota, then the pool's ranges,
  // then the fence from `fences` when not null. Takes `allocation` (its buffers and fence
  // filled in) on success.
  [[nodiscard]] Result<v1::AllocateResponse> AllocateLocked(std::uint64_t session_id,
                                                            const TensorDescriptor& descriptor,
                                                            FenceTable* fences,
                                                            Allocation& allocation,
                                                            std::vector<v1::WatchEvent>& evictions);
  // The pool's ranges for `descriptor` (`byte_size` bytes in all). While the pool has no room
  // (RESOURCE_EXHAUSTED), evicts its least recently used evictable version without a lease
  // and tries again, adding a KIND_EVICTED event per version evicted; returns the last
  // refusal when nothing is left to evict, or at once when `byte_size` exceeds the pool.
  [[nodiscard]] Result<std::vector<v1::BufferLocation>> PlaceBuffersEvictingLocked(
      Pool& pool, const TensorDescriptor& descriptor, std::uint64_t byte_size,
      std::vector<v1::WatchEvent>& evictions);
  // The removal path of Delete and eviction: marks the versions of `name` (all, or only
  // `number` when not 0) deleted, adds a `kind` event for each, and reclaims the unleased
  // ones. Returns how many it removed.
  std::size_t RemoveVersionsLocked(const std::string& name, std::uint64_t number,
                                   v1::WatchEvent::Kind kind, std::vector<v1::WatchEvent>& events);
  // The fence table of `pool`, or null for a pool without fences.
  [[nodiscard]] FenceTable* FencesOf(const Pool* pool) const;
  // True when a pool or a fence table holds `segment_id`.
  [[nodiscard]] bool SegmentExists(std::uint64_t segment_id) const;
  // CloseSession's part for Event-mode versions: poisons and deletes those of `session`
  // whose fence is not reached, each marked for the quarantine hold `hold` (0: none);
  // returns their watch events.
  [[nodiscard]] std::vector<v1::WatchEvent> DeleteUnsignalledLocked(std::uint64_t session_id,
                                                                    Session& session,
                                                                    std::uint64_t hold);
  // Watches the process of the quarantine hold `hold`, which releases it once the process
  // has exited (and, with `device_memory`, cuda_quarantine_grace more); releases it at once
  // when the pidfd cannot be watched.
  void WatchQuarantineLocked(std::uint64_t hold, UniqueFd process, bool device_memory);
  // The process of hold `hold` has exited: its ranges return to their pools.
  void OnQuarantinedProcessExited(std::uint64_t hold);
  // Frees what hold `hold` held into the pools, uncharges it, and ends its watch.
  void ReleaseQuarantineLocked(std::uint64_t hold);
  // Stats' quarantine figures: per pool into `counts`, and the holds into `response`.
  void FillQuarantineCountsLocked(std::map<const Pool*, RegistryPoolCounts>& counts,
                                  v1::StatsResponse& response) const;
  // Publish's checks of one request under the mutex: its allocation pending and of the
  // session, and its handoff. Returns the allocation.
  [[nodiscard]] Result<Allocation*> PendingForPublishLocked(std::uint64_t session_id,
                                                            const v1::PublishRequest& request);
  // Publishes a request PendingForPublishLocked accepted (`pending` is its allocation) as the
  // next version of its name; wakes no wait and tells no watcher. Returns the version number.
  // The version a publish of `pending` makes, recorded in the journal: nothing changes yet,
  // and a journal error refuses the publish.
  [[nodiscard]] Result<std::shared_ptr<TensorVersion>> PrepareVersionLocked(
      const Session& session, const v1::PublishRequest& request, const Allocation& pending);
  // A PublishBatch refused after PrepareVersionLocked journaled `versions` (its first items):
  // the journal forgets them (a removal, then their memory freed).
  void ForgetJournaledLocked(const v1::PublishBatchRequest& request,
                             const std::vector<std::shared_ptr<TensorVersion>>& versions);
  std::uint64_t CommitPublishLocked(Session& session, const v1::PublishRequest& request,
                                    Allocation& pending, std::shared_ptr<TensorVersion> version);
  // The version Publish makes of `allocation` under `name`, numbered next, without its
  // fence (CommitPublishLocked moves it in).
  [[nodiscard]] std::shared_ptr<TensorVersion> MakeVersion(const std::string& name,
                                                           const Allocation& allocation,
                                                           const v1::SyncHandoff& handoff) const;
  [[nodiscard]] SegmentUse SegmentUseLocked(const Session& session, std::uint64_t segment_id) const;
  // Takes a lease. The reply is built from the grant after the mutex is released.
  [[nodiscard]] Result<LeaseGrant> AcquireLocked(std::uint64_t session_id, const std::string& name,
                                                 std::uint64_t version);
  [[nodiscard]] Result<std::vector<NamedGrant>> BatchAcquireLocked(
      std::uint64_t session_id, const v1::BatchAcquireRequest& request);
  // Replies built from grants; called without the mutex.
  [[nodiscard]] Result<v1::AcquireResponse> AcquireReply(const std::string& name,
                                                         Result<LeaseGrant> grant) const;
  [[nodiscard]] Result<v1::BatchAcquireResponse> BatchAcquireReply(
      Result<std::vector<NamedGrant>> grants) const;
  // One tensor's acquire reply (lease, TensorInfo, epoch) from its grant; needs no mutex.
  void FillAcquireResponse(const std::string& name, const LeaseGrant& grant,
                           v1::AcquireResponse& response) const;
  void ReleaseLeaseLocked(std::uint64_t lease_id);
  // Why the session may not get a lease page now (see GrantLeasePage), or OK.
  [[nodiscard]] Status CheckLeasePageLocked(std::uint64_t session_id) const;
  // The identity a version gets: the next id for a CPU-pool version without a fence when the
  // fast path is on, otherwise 0.
  [[nodiscard]] std::uint64_t NextFastPathIdLocked(const TensorVersion& version);
  // Arms rescan_timer_ unless it is armed.
  void ArmRescanLocked();
  // rescan_timer_ fired: pinned versions are tried again.
  void OnRescanTimer();
  // Tries every pinned version again, each lease page read once; returns how many stay.
  std::size_t RescanPinnedLocked();
  // Commits the journal (without mutex_); an error says `done()` and that a machine crash
  // may lose it.
  [[nodiscard]] Status CommitJournal(const std::function<std::string()>& done) const;
  // Frees an allocation's ranges, or quarantines them in hold `hold` when it is open (they
  // stay charged to the uid as pending bytes until the hold is released).
  void FreeAllocationLocked(std::uint64_t allocation_id, std::uint64_t hold = 0);
  // Registers a wait (see Wait) for `names` that fails with DEADLINE_EXCEEDED after
  // `timeout_ms`; returns its id. When the session's uid has max_waits_per_uid waits
  // already, releases `lock`, fails it with RESOURCE_EXHAUSTED naming the limit and
  // returns 0.
  std::uint64_t StartWaitLocked(std::unique_lock<std::mutex>& lock, std::uint64_t session_id,
                                std::vector<std::string> names, Wait::WakeOn wake_on,
                                std::uint32_t timeout_ms,
                                std::function<bool(Deferred&)> try_complete,
                                std::function<void(Error)> fail);
  // Arms wait_timer_ for the earliest deadline of waits_, unless it is armed for that
  // deadline or an earlier one already.
  void ArmWaitTimerLocked();
  // wait_timer_ fired: fails the waits whose deadline has passed.
  void OnWaitTimer();
  [[nodiscard]] v1::WatchEvent Event(v1::WatchEvent::Kind kind, const std::string& name,
                                     std::uint64_t version) const;

  const PoolSet& pools_;
  boost::asio::io_context& io_;  // Runs the timers and the quarantine's process watches.
  const Options options_;
  const std::shared_ptr<const AccessPolicy> access_;  // options_.access, or the default.
  const std::chrono::steady_clock::time_point started_;
  // One per CUDA pool, made by the constructor, then unchanged (the tables are thread-safe).
  // Declared before the tables below, whose allocations and versions hold fences of them.
  const std::map<const Pool*, std::unique_ptr<FenceTable>> fence_tables_;

  mutable std::mutex mutex_;
  // Guarded by mutex_. One sequence for the ids of sessions, allocations, leases and waits.
  std::uint64_t next_id_ = 1;
  SessionTable sessions_;        // Guarded by mutex_.
  AllocationTable allocations_;  // Guarded by mutex_.
  LeaseTable leases_;            // Guarded by mutex_.
  VersionStore versions_;        // Guarded by mutex_.
  // What the sessions ended so far held when they ended (StatsResponse's closed_session_*).
  struct ClosedSessions {
    std::uint64_t sessions = 0;
    std::uint64_t leases = 0;
    std::uint64_t allocations = 0;
    std::uint64_t allocation_bytes = 0;
  };
  ClosedSessions closed_sessions_;  // Guarded by mutex_.
  // Versions evicted so far, and their bytes (StatsResponse's evicted_*).
  struct Evicted {
    std::uint64_t tensors = 0;
    std::uint64_t bytes = 0;
  };
  Evicted evicted_;  // Guarded by mutex_.
  WaitSet waits_;    // Guarded by mutex_.

  UidQuotaTable uid_quotas_;  // Guarded by mutex_.
  // Connections the session server refused (ConnectionRefused); needs no lock.
  std::atomic<std::uint64_t> refused_connections_{0};
  // Names whose version was lost in a restart (Adopt), with the reason, until published
  // again; and how many versions Adopt restored and lost. Guarded by mutex_.
  std::map<std::string, std::string, std::less<>> lost_;
  std::uint64_t adopted_count_ = 0;
  std::uint64_t lost_count_ = 0;
  // Fires at the earliest deadline of waits_ (on the io_context). Guarded by mutex_.
  boost::asio::steady_timer wait_timer_;
  // The deadline wait_timer_ is armed for, until it fires; guarded by mutex_.
  std::optional<Wait::Clock::time_point> wait_timer_armed_;
  // The live sessions' lease pages. Guarded by mutex_.
  fast_path::LeaseScanner lease_pages_;
  // Fires rescan_delay_ after a version got pinned. Guarded by mutex_.
  boost::asio::steady_timer rescan_timer_;
  bool rescan_armed_ = false;  // Guarded by mutex_.
  // rescan_interval, doubled after each rescan that freed nothing, at most
  // kMaxRescanBackoff times it. Guarded by mutex_.
  std::chrono::milliseconds rescan_delay_;
  static constexpr int kMaxRescanBackoff = 64;
  // Ranges of ended sessions whose process may still write, and the watch on each such
  // process, by hold (the session's id). Guarded by mutex_.
  RangeQuarantine quarantine_;
  std::map<std::uint64_t, ProcessExitWatch> exit_watches_;
  // Its own lock, taken before mutex_ is released when events are delivered.
  WatchHub watches_;
};

}  // namespace hurray::daemon
