// Registry: the daemon's state and the exchange's rules, independent of any transport.
//
// It holds sessions, pending allocations, published tensors (names, versions), leases and
// watchers, and answers every Exchange rpc with the same messages the gRPC service and the
// session socket carry (proto/hurray/v1/exchange.proto). Memory returns to its pool only
// when a version is deleted or superseded *and* its last lease has ended, or when an
// unpublished allocation is cancelled or its session ends.
//
// Thread-safe: every method may be called from any thread. One mutex guards the state;
// callbacks (acquire completions, watch events) never run while it is held, and neither
// does building the TensorInfo of an Acquire, BatchAcquire or Describe reply (each version
// keeps its TensorInfo serialized once; replies parse it).
#pragma once

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
#include <unordered_map>
#include <vector>

#include "hurray/error.h"
#include "hurray/v1/exchange.pb.h"
#include "pool_set.h"
#include "session_host.h"

namespace hurray::daemon {

class Registry final : public SessionHost {
 public:
  struct Options {
    // Changes on every daemon start; in every reply.
    std::uint64_t daemon_epoch = 1;
    // Most bytes one session may hold in unpublished allocations; 0 means no limit.
    std::uint64_t session_quota_bytes = 0;
    // Longest acquire wait accepted, in milliseconds.
    std::uint32_t max_wait_ms = 3'600'000;
    // Most names one BatchAcquire may list.
    std::size_t max_batch_names = 100'000;
  };

  // `pools` and `io` (which runs acquire-wait timers) must outlive the registry.
  Registry(const PoolSet& pools, boost::asio::io_context& io, Options options);
  ~Registry() override;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // ---- Sessions (SessionHost) ----

  [[nodiscard]] Result<SessionGrant> OpenSession(const PeerCredentials& peer,
                                                 std::string_view client_name) override;
  // Releases the session's leases, frees its unpublished allocations and ends its waits
  // (they complete with CANCELLED). Unknown ids are ignored.
  void CloseSession(std::uint64_t session_id) override;
  // A descriptor on a segment: writable only while the session has an unpublished
  // allocation in it; read-only while it has a lease or an allocation in it.
  // PERMISSION_DENIED otherwise, NOT_FOUND for an unknown segment.
  [[nodiscard]] Result<SegmentAccess> GrantSegment(std::uint64_t session_id,
                                                   std::uint64_t segment_id,
                                                   bool writable) override;

  // The session a token names; UNAUTHENTICATED for an unknown token.
  [[nodiscard]] Result<std::uint64_t> Authenticate(std::string_view token) const;

  // ---- Exchange ----

  [[nodiscard]] Result<v1::AllocateResponse> Allocate(
      std::uint64_t session_id, const v1::AllocateRequest& request) override;
  [[nodiscard]] Result<v1::CancelAllocationResponse> CancelAllocation(
      std::uint64_t session_id, const v1::CancelAllocationRequest& request) override;
  [[nodiscard]] Result<v1::PublishResponse> Publish(std::uint64_t session_id,
                                                    const v1::PublishRequest& request) override;

  using AcquireDone = std::function<void(Result<v1::AcquireResponse>)>;
  using BatchAcquireDone = std::function<void(Result<v1::BatchAcquireResponse>)>;

  // Acquires now, or (with wait_timeout_ms) once the tensor is published. `done` runs
  // exactly once: on this thread before returning, or later on a publishing thread or the
  // io_context. Returns a wait id for CancelWait when the call is waiting, 0 otherwise.
  std::uint64_t Acquire(std::uint64_t session_id, const v1::AcquireRequest& request,
                        AcquireDone done);
  // All listed names (and prefix matches) or none, with the same waiting rules.
  std::uint64_t BatchAcquire(std::uint64_t session_id, const v1::BatchAcquireRequest& request,
                             BatchAcquireDone done);
  // Acquire without a wait (the session socket's path): INVALID_ARGUMENT when
  // wait_timeout_ms is not 0.
  [[nodiscard]] Result<v1::AcquireResponse> AcquireNow(
      std::uint64_t session_id, const v1::AcquireRequest& request) override;
  // Drops a waiting acquire without running its `done`. False when it already completed
  // (or is completing): then `done` runs (or ran) as usual.
  bool CancelWait(std::uint64_t wait_id);

  [[nodiscard]] Result<v1::ReleaseResponse> Release(std::uint64_t session_id,
                                                    const v1::ReleaseRequest& request) override;
  [[nodiscard]] Result<v1::DeleteResponse> Delete(const v1::DeleteRequest& request);

  // ---- Inspection (no session needed) ----

  [[nodiscard]] Result<v1::ListResponse> List(const v1::ListRequest& request) const;
  [[nodiscard]] Result<v1::DescribeResponse> Describe(const v1::DescribeRequest& request) const;
  [[nodiscard]] v1::StatsResponse Stats() const;

  using WatchCallback = std::function<void(const v1::WatchEvent&)>;
  // Calls `callback` with every publish and delete of a name starting with `prefix`, in
  // order, until Unwatch. Callbacks run on publishing threads and must not block or call
  // back into the registry. Returns the watch id.
  std::uint64_t Watch(std::string prefix, WatchCallback callback);
  void Unwatch(std::uint64_t watch_id);

  [[nodiscard]] std::uint64_t daemon_epoch() const { return options_.daemon_epoch; }

 private:
  struct Version;
  struct Grant;
  struct NamedGrant;
  struct NameEntry;
  struct Allocation;
  struct Lease;
  struct Session;
  struct Waiter;
  struct Watcher;
  // Work to run once the mutex is released (callbacks).
  using Deferred = std::vector<std::function<void()>>;

  // Takes a lease. The reply is built from the grant after the mutex is released.
  [[nodiscard]] Result<Grant> AcquireLocked(std::uint64_t session_id, const std::string& name,
                                            std::uint64_t version);
  [[nodiscard]] Result<std::vector<NamedGrant>> BatchAcquireLocked(
      std::uint64_t session_id, const v1::BatchAcquireRequest& request);
  // Replies built from grants; called without the mutex.
  [[nodiscard]] Result<v1::AcquireResponse> AcquireReply(const std::string& name,
                                                         Result<Grant> grant) const;
  [[nodiscard]] Result<v1::BatchAcquireResponse> BatchAcquireReply(
      Result<std::vector<NamedGrant>> grants) const;
  // One tensor's acquire reply (lease, TensorInfo, epoch) from its grant; needs no mutex.
  void FillAcquireResponse(const std::string& name, const Grant& grant,
                           v1::AcquireResponse& response) const;
  // The TensorInfo of a version under its name, from its stored bytes; needs no mutex.
  static void FillTensorInfo(const std::string& name, const Version& version, v1::TensorInfo& info);
  // The version Acquire and Describe find (0: the latest); null when it is not published.
  [[nodiscard]] std::shared_ptr<Version> FindVersionLocked(const std::string& name,
                                                           std::uint64_t version) const;
  void ReleaseLeaseLocked(std::uint64_t lease_id);
  void ReclaimIfUnusedLocked(Version* version);
  void FreeAllocationLocked(std::uint64_t allocation_id);
  std::uint64_t StartWaitLocked(std::uint64_t session_id, std::vector<std::string> names,
                                std::uint32_t timeout_ms,
                                std::function<bool(Deferred&)> try_complete,
                                std::function<void(Error)> fail);
  void WakeWaitersLocked(const std::string& name, Deferred& deferred);
  // Takes a waiter out of every index and cancels its timer; null when it is gone.
  std::unique_ptr<Waiter> RemoveWaiterLocked(std::uint64_t wait_id);
  void OnWaitTimeout(std::uint64_t wait_id);
  // Delivers watch events in order; takes watch_mutex_ before `lock` is released.
  void Notify(std::unique_lock<std::mutex>& lock, std::vector<v1::WatchEvent> events);

  const PoolSet& pools_;
  boost::asio::io_context& io_;
  const Options options_;
  const std::chrono::steady_clock::time_point started_;

  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;  // Guarded by mutex_. Shared by sessions, allocations, leases.
  std::map<std::string, NameEntry, std::less<>> names_;              // Guarded by mutex_.
  std::unordered_map<std::uint64_t, Allocation> allocations_;        // Guarded by mutex_.
  std::unordered_map<std::uint64_t, Lease> leases_;                  // Guarded by mutex_.
  std::unordered_map<std::uint64_t, Session> sessions_;              // Guarded by mutex_.
  std::unordered_map<std::string, std::uint64_t> session_by_token_;  // Guarded by mutex_.
  std::map<std::uint64_t, std::unique_ptr<Waiter>> waiters_;         // Guarded by mutex_.
  std::multimap<std::string, std::uint64_t> waiters_by_name_;        // Guarded by mutex_.
  std::uint64_t version_count_ = 0;                                  // Guarded by mutex_.

  std::mutex watch_mutex_;
  std::map<std::uint64_t, std::shared_ptr<Watcher>> watchers_;  // Guarded by watch_mutex_.
  std::uint64_t next_watch_id_ = 1;                             // Guarded by watch_mutex_.
};

}  // namespace hurray::daemon
