// Connection: what a Client, its tensors and its views share — the session socket, the
// gRPC channel, and the per-process cache of segment mappings. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "device/device_memory_mapper.h"
#include "device/device_slab_cache.h"
#include "device/fence_relay.h"
#include "hurray/error.h"
#include "hurray/ipc/shared_mapping.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "session_connection.h"

namespace hurray::client_internal {

// A whole segment mapped into this process; unmapped in the destructor. Immutable;
// thread-safe.
class Mapping {
 public:
  // Where a pool segment's mapping came from, for other mappings of its pages
  // (Connection::SegmentDescriptor): the segment's descriptor (kept for the epoch's cached
  // segments; null for a sealed pool's memfd, whose descriptor is not kept: a consumer may
  // hold thousands) and whether it is a file of hugetlbfs (known with the descriptor), its
  // id and the daemon epoch that granted it.
  struct Origin {
    std::shared_ptr<const UniqueFd> fd;
    bool hugetlbfs = false;
    std::uint64_t segment_id = 0;
    std::uint64_t epoch = 0;
  };

  // `sealed`: a sealed pool's memfd (one buffer), which the connection does not cache.
  // `epoch_hold`: the granting session's (SessionConnection::epoch_hold), kept open until the
  // mapping is gone. `origin`: a pool segment's (none for the fast path's files).
  Mapping(SharedMapping mapping, bool writable, bool sealed,
          std::shared_ptr<const UniqueFd> epoch_hold = nullptr,
          std::optional<Origin> origin = std::nullopt)
      : epoch_hold_(std::move(epoch_hold)),
        mapping_(std::move(mapping)),
        writable_(writable),
        sealed_(sealed),
        origin_(std::move(origin)) {}

  [[nodiscard]] std::byte* base() const { return mapping_.bytes(); }
  [[nodiscard]] std::uint64_t size() const { return mapping_.size(); }
  [[nodiscard]] bool writable() const { return writable_; }
  [[nodiscard]] bool sealed() const { return sealed_; }
  [[nodiscard]] const std::optional<Origin>& origin() const { return origin_; }

 private:
  std::shared_ptr<const UniqueFd> epoch_hold_;  // Declared first: closed after the munmap.
  SharedMapping mapping_;
  bool writable_;
  bool sealed_;
  std::optional<Origin> origin_;
};

// Fills this process's page tables for [data, data + size) of a mapping, so that reading it
// takes no page faults: madvise(MADV_POPULATE_READ) on the pages the range touches. Advice:
// without kernel support (before Linux 5.14: EINVAL, remembered for the process) or when
// the kernel declines, it does nothing, and reads fault as usual. Thread-safe.
void PopulateForReading(const std::byte* data, std::uint64_t size);

// The gRPC status of a call, as an Error with the same code and message.
[[nodiscard]] Error FromGrpcStatus(const grpc::Status& status, std::string_view call);

// Sessions: the connection holds one session at a time. When the daemon is gone (its session
// socket hung up: EOF or EPIPE, seen by a call or, before a gRPC call, by a probe) the next
// call opens a new session by itself (new hello, new token for gRPC metadata) and goes on;
// a call in flight when the daemon died fails with UNAVAILABLE naming the restart. A
// request that never reached the daemon (the socket had hung up before it was sent) is
// sent again once on the new session, unless it names ids of the old epoch.
//
// Epochs: every lease, allocation and segment id belongs to the daemon epoch that granted
// it. Calls that carry such ids take that epoch (`epoch`; 0: any) and answer UNAVAILABLE,
// without sending anything, once the session is of another epoch: a restarted daemon knows
// none of them, and the same numbers may name other objects of its own. The segment
// mapping caches are per epoch: a new epoch starts them empty, while the mappings that
// tensors and views of the old epoch hold stay mapped, and readable, until those go.
class Connection {
 public:
  // `use_session_socket`: send the hot path (allocate, publish, acquire without a wait,
  // release, cancel) over the session socket rather than gRPC.
  // `max_mapped_device_bytes`: Client::Options' cap on the CUDA slabs kept mapped.
  // `own_fence_wait`: how long the destructor waits for the fences RememberOwnFence lists
  // (Client::Options::own_fence_wait). `orphaned_fence_wait`: FenceToRelay::orphaned_wait
  // (Client::Options::orphaned_fence_wait).
  [[nodiscard]] static Result<std::shared_ptr<Connection>> Open(
      std::string socket_path, std::string_view client_name, bool use_session_socket,
      std::uint64_t max_mapped_device_bytes = 0,
      std::chrono::milliseconds own_fence_wait = std::chrono::milliseconds(0),
      std::chrono::milliseconds orphaned_fence_wait = std::chrono::milliseconds(10'000));
  // WaitForOwnFences, then closes the session.
  ~Connection();
  // Waits (up to own_fence_wait from the call) for the fences this session published that
  // are not reached yet. Also called as the Client closes: what a stream still holds (the
  // slab references PublishAfter keeps until its stream passes the signal) may keep this
  // connection past the process's exit.
  void WaitForOwnFences();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The exchange's hot path, over the session socket or gRPC (see Open). An acquire that
  // waits goes through gRPC unless the session's daemon serves it on the session socket
  // (SessionConnection::acquire_waits). `epoch`: the epoch of the allocation or leases the
  // request names.
  [[nodiscard]] Result<v1::AllocateResponse> Allocate(const v1::AllocateRequest& request);
  [[nodiscard]] Result<v1::PublishResponse> Publish(const v1::PublishRequest& request,
                                                    std::uint64_t epoch);
  // On the session socket when the hot path goes there and both the request and its
  // largest reply fit one frame; otherwise through gRPC. RESOURCE_EXHAUSTED naming the
  // request's size when gRPC refuses it as too large too.
  [[nodiscard]] Result<v1::PublishBatchResponse> PublishBatch(
      const v1::PublishBatchRequest& request, std::uint64_t epoch);
  // `spin`: AcquireOptions::spin, for a wait on the session socket.
  [[nodiscard]] Result<v1::AcquireResponse> Acquire(const v1::AcquireRequest& request,
                                                    std::chrono::microseconds spin = {});
  // On the session socket a one-way release: OK once sent (refusals come from
  // SyncReleases); through gRPC the Release rpc's outcome.
  [[nodiscard]] Status Release(const v1::ReleaseRequest& request, std::uint64_t epoch);
  [[nodiscard]] Result<v1::CancelAllocationResponse> CancelAllocation(
      const v1::CancelAllocationRequest& request, std::uint64_t epoch);

  // Syncs the current session and returns the first one-way release it refused since the
  // last call (SessionConnection::SyncReleases). UNAVAILABLE when no session can be opened.
  [[nodiscard]] Status SyncReleases();

  // Before a gRPC call: when a one-way release was sent on the current session and no
  // reply has come since, syncs the session, so that the call sees the release's effect.
  // A sync that fails means the session ended, which ended its leases too: nothing to wait
  // for, so it is not an error. Refusals stay for SyncReleases.
  void SyncUnansweredReleases();

  // A context for session call `call` (named in errors): carries the current session's
  // token as metadata, after a probe of the session socket (a new session when the daemon
  // restarted) and SyncUnansweredReleases. UNAVAILABLE when no session can be opened, or
  // when `epoch` (0: any) is not the session's.
  [[nodiscard]] Result<std::unique_ptr<grpc::ClientContext>> SessionContext(
      std::string_view call, std::uint64_t epoch = 0);

  // The current session (a new one when it is closed), checked to be of `epoch` (0: any):
  // UNAVAILABLE naming the restart otherwise, or when no session can be opened.
  [[nodiscard]] Result<std::shared_ptr<client::SessionConnection>> CurrentSession(
      std::uint64_t epoch);

  [[nodiscard]] v1::Exchange::Stub& stub() const { return *stub_; }
  // The current session's; they change when the client opens a new session.
  [[nodiscard]] std::uint64_t session_id();
  [[nodiscard]] std::uint64_t daemon_epoch();
  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }

  // The mapping of a segment of epoch `epoch` (0: the current one), made on first use and
  // cached for the rest of the epoch. Read-only mappings come from O_RDONLY descriptors:
  // the kernel refuses writes. A sealed pool's segment (one buffer's memfd) is mapped anew
  // on each call and never cached: its mapping lives as long as the tensor or view that
  // holds it, so that a producer's writable mapping can end before its publish (the daemon
  // refuses to seal a memfd that is still mapped writable) and a consumer's ends with its
  // lease. UNAVAILABLE when the session is of another epoch.
  [[nodiscard]] Result<std::shared_ptr<Mapping>> MapSegment(std::uint64_t segment_id, bool writable,
                                                            std::uint64_t epoch);
  // A read-only descriptor of the pool segment `mapping` maps, for another mapping of its
  // pages (TensorView::MapPrivate): the one the connection keeps for the epoch, or for a
  // sealed pool's memfd a new grant of the daemon's; and whether the segment is a file of
  // hugetlbfs. FAILED_PRECONDITION for a mapping of no pool segment; UNAVAILABLE once the
  // mapping's epoch is over; the grant's errors, or fstatfs's.
  struct SegmentFile {
    std::shared_ptr<const UniqueFd> fd;
    bool hugetlbfs = false;
  };
  [[nodiscard]] Result<SegmentFile> SegmentDescriptor(const Mapping& mapping);

  // This process's CUDA slabs of epoch `epoch` (0: the current one), their cache made on
  // first use over the CUDA driver. FAILED_PRECONDITION saying why when this process has
  // no usable driver (the next call tries again); UNAVAILABLE for an epoch not the
  // session's.
  [[nodiscard]] Result<DeviceSlabCache*> DeviceSlabs(std::uint64_t epoch);

  // The device address of `fence`'s word (a fence of epoch `epoch`), for device
  // `device_ordinal` (and every other): its fence segment mapped (read-write when
  // `writable`) as MapSegment does, and registered with the driver once per mapping for
  // the rest of the epoch. INTERNAL for a fence outside its segment or not 8-aligned;
  // DeviceSlabs' errors; the driver's.
  [[nodiscard]] Result<DeviceAddress> FenceDeviceAddress(const v1::Fence& fence, bool writable,
                                                         int device_ordinal, std::uint64_t epoch);
  // The fence word's value now, read (acquire) in this process's read-only mapping of its
  // segment. INTERNAL for a fence outside its segment or not 8-aligned; MapSegment's errors.
  [[nodiscard]] Result<std::uint64_t> ReadFence(const v1::Fence& fence, std::uint64_t epoch);
  // The relay (FenceRelay) a stream of device `device_ordinal` waits on for `fence` (of
  // epoch `epoch`): relayed by the GPU where this process can register the fence's word
  // read-only, else by the relay's thread. Null when the word is reached already. MapFence's
  // and the driver's errors.
  [[nodiscard]] Result<std::shared_ptr<const RelayedFence>> RelayFence(const v1::Fence& fence,
                                                                       int device_ordinal,
                                                                       std::uint64_t epoch);
  // Lists a fence of a tensor this session published with PublishAfter (of the allocation's
  // epoch), so that the destructor waits for it; fences already reached are dropped from
  // the list as it goes. Best effort: a fence whose segment cannot be mapped is not listed.
  void RememberOwnFence(const v1::Fence& fence, std::uint64_t epoch);

 private:
  // A host mapping registered with the CUDA driver, kept mapped while registered.
  struct Registration {
    std::shared_ptr<Mapping> mapping;
    DeviceAddress base = 0;
  };
  // The CUDA state of one epoch: its slab cache and its fence registrations. Unregisters
  // them when destroyed.
  struct DeviceState {
    std::uint64_t epoch = 0;
    std::unique_ptr<DeviceSlabCache> slabs;
    std::map<const Mapping*, Registration> registrations;
    ~DeviceState();
  };

  Connection(std::string socket_path, std::string client_name,
             std::unique_ptr<client::SessionConnection> session,
             std::shared_ptr<grpc::Channel> channel, bool use_session_socket,
             std::uint64_t max_mapped_device_bytes, std::chrono::milliseconds own_fence_wait,
             std::chrono::milliseconds orphaned_fence_wait);

  // The current session, a new one when it is closed (or, with `probe`, found hung up).
  // UNAVAILABLE naming the old session's end when no new one can be opened.
  Result<std::shared_ptr<client::SessionConnection>> Session(bool probe);
  // Session(probe), checked to be of `epoch` (0: any): UNAVAILABLE naming `what` and the
  // restart otherwise.
  Result<std::shared_ptr<client::SessionConnection>> SessionOfEpoch(std::uint64_t epoch, bool probe,
                                                                    std::string_view what);

  // The mapping of `fence`'s segment and the word's offset in it, checked.
  Result<std::pair<std::shared_ptr<Mapping>, std::uint64_t>> MapFence(const v1::Fence& fence,
                                                                      bool writable,
                                                                      std::uint64_t epoch);
  // The CUDA state of `epoch`'s session, made (retiring an older one) when missing.
  Result<DeviceState*> Device(std::uint64_t epoch);

  // One hot-path call: on the session socket as request body `request_body` answered by
  // `reply_body`, or as the gRPC rpc `rpc`; `epoch` as SessionOfEpoch's; `spin` as
  // SessionConnection::Exchange's.
  template <typename Request, typename Response>
  Result<Response> Call(const Request& request, Request* (v1::SessionMessage::*request_body)(),
                        Response* (v1::SessionMessage::*reply_body)(),
                        v1::SessionMessage::BodyCase reply_case,
                        grpc::Status (v1::Exchange::Stub::*rpc)(grpc::ClientContext*,
                                                                const Request&, Response*),
                        std::string_view name, bool session_socket, std::uint64_t epoch,
                        std::chrono::microseconds spin = {});

  const std::string socket_path_;
  const std::string client_name_;
  const bool use_session_socket_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Exchange::Stub> stub_;

  std::mutex session_mutex_;
  // Never null. Guarded by session_mutex_ (the session itself is thread-safe); replaced
  // when it closes.
  std::shared_ptr<client::SessionConnection> session_;

  std::mutex mutex_;
  // The epoch mappings_ belongs to. Guarded by mutex_.
  std::uint64_t mappings_epoch_ = 0;
  // (segment id, writable) -> mapping. Guarded by mutex_.
  std::map<std::pair<std::uint64_t, bool>, std::shared_ptr<Mapping>> mappings_;

  const std::uint64_t max_mapped_device_bytes_;
  const std::chrono::milliseconds own_fence_wait_;
  const std::chrono::milliseconds orphaned_fence_wait_;
  // A fence RememberOwnFence listed: its word in this process's writable mapping.
  struct OwnFence {
    std::shared_ptr<Mapping> mapping;
    const std::uint64_t* word = nullptr;
    std::uint64_t value = 0;
    std::uint64_t epoch = 0;
  };
  std::mutex own_fences_mutex_;
  std::vector<OwnFence> own_fences_;  // Guarded by own_fences_mutex_.
  std::mutex device_mutex_;
  // The current epoch's CUDA state, made by Device. Guarded by device_mutex_.
  std::unique_ptr<DeviceState> device_;
  // Older epochs' CUDA state, kept while this connection lives: views of those epochs may
  // still hold references to their slabs. Guarded by device_mutex_.
  std::vector<std::unique_ptr<DeviceState>> retired_devices_;
};

}  // namespace hurray::client_internal
