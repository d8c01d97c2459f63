// SessionHost: what the session socket asks of the rest of the daemon. SessionServer speaks
// the protocol; the registry behind this interface decides who may do what.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "hurray/error.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/exchange.pb.h"
#include "hurray/v1/session.pb.h"
#include "pool/pool.h"
#include "registry/session_access.h"

namespace hurray::daemon {

// Implemented over the registry by RegistrySessionHost (registry_session_host.h), and by the
// tests' fakes. Thread-safe; called from io_context threads.
class SessionHost {
 public:
  virtual ~SessionHost() = default;

  // Admits a new client connection with the kernel-reported credentials of its process.
  // An error (PERMISSION_DENIED by the access policy, ...) is sent to the client, and the
  // connection is closed without a session.
  virtual Result<SessionGrant> OpenSession(const PeerCredentials& peer,
                                           std::string_view client_name) = 0;

  // The session's connection has closed, for whatever reason: end its leases and free its
  // unpublished allocations. Called exactly once per successful OpenSession.
  virtual void CloseSession(std::uint64_t session_id) = 0;

  // The process of a session just opened, as a pidfd (OpenPeerPidfd) taken when its
  // connection was accepted; readable once that process has exited. Called at most once per
  // session, right after OpenSession, never for a connection the server could get no pidfd
  // for. A host that keeps what the session could still write out of use until the process
  // has exited keeps it; this default closes it.
  virtual void SetPeerProcess(std::uint64_t session_id, UniqueFd process);

  // A connection of `peer` was refused before its hello, for exceeding a cap of the
  // session server (`refusal`, RESOURCE_EXHAUSTED naming it): for Stats. No session exists.
  virtual void ConnectionRefused(const PeerCredentials& peer, const Error& refusal);

  // A new descriptor on a segment for the session, read-only or read-write as asked. The
  // error (NOT_FOUND, PERMISSION_DENIED, ...) is sent to the client with its code.
  virtual Result<SegmentAccess> GrantSegment(std::uint64_t session_id, std::uint64_t segment_id,
                                             bool writable) = 0;

  // Records how the session mapped a CUDA slab it was granted (SlabMapped), for Stats. The
  // error (NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT) is sent to the client with its
  // code. A host that keeps no such record answers UNIMPLEMENTED.
  virtual Result<v1::SlabMappedAck> SlabMapped(std::uint64_t session_id,
                                               const v1::SlabMapped& request);

  // The fast path (ipc/include/hurray/ipc/fast_path_layout.h): a read-only descriptor on the
  // directory; and, once per session, its lease page. The error (FAILED_PRECONDITION with
  // the fast path off or for a second lease page, RESOURCE_EXHAUSTED past the lease quota)
  // is sent to the client with its code. A host without a fast path answers UNIMPLEMENTED.
  virtual Result<DirectoryAccess> GrantDirectory(std::uint64_t session_id);
  virtual Result<LeasePageAccess> GrantLeasePage(std::uint64_t session_id);

  // The exchange's hot path, for the session that owns the connection: the same rules as
  // the gRPC service. A host that does not serve them answers UNIMPLEMENTED.
  virtual Result<v1::AllocateResponse> Allocate(std::uint64_t session_id,
                                                const v1::AllocateRequest& request);
  virtual Result<v1::PublishResponse> Publish(std::uint64_t session_id,
                                              const v1::PublishRequest& request);
  virtual Result<v1::PublishBatchResponse> PublishBatch(std::uint64_t session_id,
                                                        const v1::PublishBatchRequest& request);
  // Only without a wait: completes before returning.
  virtual Result<v1::AcquireResponse> AcquireNow(std::uint64_t session_id,
                                                 const v1::AcquireRequest& request);
  // AcquireNow with its reply already encoded: on success, appends to `reply` the wire
  // bytes of the v1::AcquireResponse that AcquireNow would return, byte for byte what its
  // serialization writes (the session socket sends them without building the message).
  // The same errors as AcquireNow, with `reply` unchanged. This default serializes
  // AcquireNow's reply.
  virtual Status AcquireNowEncoded(std::uint64_t session_id, const v1::AcquireRequest& request,
                                   std::string& reply);
  // An acquire that may wait (wait_timeout_ms): `done` runs exactly once, with the reply or
  // the error, on this thread before returning or later on another thread (one that
  // publishes, or the one that times waits out), never while the host holds a lock of its own.
  // A wait still pending when the session closes ends with CANCELLED then. This default
  // answers UNIMPLEMENTED; ServesAcquireWaits says whether the host overrides it.
  using AcquireDone = std::function<void(Result<v1::AcquireResponse>)>;
  virtual void AcquireWaiting(std::uint64_t session_id, const v1::AcquireRequest& request,
                              AcquireDone done);
  [[nodiscard]] virtual bool ServesAcquireWaits() const { return false; }
  // Ends every lease of the session that the request names; NOT_FOUND naming the others,
  // if any (the leases it knows are ended all the same).
  virtual Result<v1::ReleaseResponse> Release(std::uint64_t session_id,
                                              const v1::ReleaseRequest& request);
  virtual Result<v1::CancelAllocationResponse> CancelAllocation(
      std::uint64_t session_id, const v1::CancelAllocationRequest& request);
};

inline void SessionHost::ConnectionRefused(const PeerCredentials&, const Error&) {}
inline void SessionHost::SetPeerProcess(std::uint64_t, UniqueFd) {}
inline Result<v1::SlabMappedAck> SessionHost::SlabMapped(std::uint64_t, const v1::SlabMapped&) {
  return UnimplementedError("slab_mapped is not served on this socket");
}
inline Result<DirectoryAccess> SessionHost::GrantDirectory(std::uint64_t) {
  return UnimplementedError("map_directory is not served on this socket");
}
inline Result<LeasePageAccess> SessionHost::GrantLeasePage(std::uint64_t) {
  return UnimplementedError("map_lease_page is not served on this socket");
}
inline Result<v1::AllocateResponse> SessionHost::Allocate(std::uint64_t,
                                                          const v1::AllocateRequest&) {
  return UnimplementedError("allocate is not served on this socket");
}
inline Result<v1::PublishResponse> SessionHost::Publish(std::uint64_t, const v1::PublishRequest&) {
  return UnimplementedError("publish is not served on this socket");
}
inline Result<v1::PublishBatchResponse> SessionHost::PublishBatch(std::uint64_t,
                                                                  const v1::PublishBatchRequest&) {
  return UnimplementedError("publish_batch is not served on this socket");
}
inline Result<v1::AcquireResponse> SessionHost::AcquireNow(std::uint64_t,
                                                           const v1::AcquireRequest&) {
  return UnimplementedError("acquire is not served on this socket");
}
inline Status SessionHost::AcquireNowEncoded(std::uint64_t session_id,
                                             const v1::AcquireRequest& request,
                                             std::string& reply) {
  HURRAY_ASSIGN_OR_RETURN(const v1::AcquireResponse response, AcquireNow(session_id, request));
  response.AppendToString(&reply);
  return {};
}
inline void SessionHost::AcquireWaiting(std::uint64_t, const v1::AcquireRequest&,
                                        AcquireDone done) {
  const AcquireDone answer = std::move(done);
  answer(UnimplementedError("an acquire that waits is not served on this socket"));
}
inline Result<v1::ReleaseResponse> SessionHost::Release(std::uint64_t, const v1::ReleaseRequest&) {
  return UnimplementedError("release is not served on this socket");
}
inline Result<v1::CancelAllocationResponse> SessionHost::CancelAllocation(
    std::uint64_t, const v1::CancelAllocationRequest&) {
  return UnimplementedError("cancel_allocation is not served on this socket");
}

}  // namespace hurray::daemon
