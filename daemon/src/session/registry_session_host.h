// RegistrySessionHost: the registry, as the session socket sees it. Each request is handed to
// the registry's call of the same name; an acquire that does not wait has its reply encoded
// here, from the version's stored bytes (acquire_reply_encoder.h), once the registry has
// taken the lease and released its mutex. The registry knows nothing of the session socket.
//
// Thread-safe as the registry is; `registry` must outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/exchange.pb.h"
#include "hurray/v1/session.pb.h"
#include "pool/pool.h"
#include "registry/registry.h"
#include "registry/session_access.h"
#include "session/session_host.h"

namespace hurray::daemon {

class RegistrySessionHost final : public SessionHost {
 public:
  explicit RegistrySessionHost(Registry& registry) : registry_(registry) {}

  [[nodiscard]] Result<SessionGrant> OpenSession(const PeerCredentials& peer,
                                                 std::string_view client_name) override;
  void CloseSession(std::uint64_t session_id) override;
  void SetPeerProcess(std::uint64_t session_id, UniqueFd process) override;
  void ConnectionRefused(const PeerCredentials& peer, const Error& refusal) override;
  [[nodiscard]] Result<SegmentAccess> GrantSegment(std::uint64_t session_id,
                                                   std::uint64_t segment_id,
                                                   bool writable) override;
  [[nodiscard]] Result<v1::SlabMappedAck> SlabMapped(std::uint64_t session_id,
                                                     const v1::SlabMapped& request) override;
  [[nodiscard]] Result<DirectoryAccess> GrantDirectory(std::uint64_t session_id) override;
  [[nodiscard]] Result<LeasePageAccess> GrantLeasePage(std::uint64_t session_id) override;
  [[nodiscard]] Result<v1::AllocateResponse> Allocate(std::uint64_t session_id,
                                                      const v1::AllocateRequest& request) override;
  [[nodiscard]] Result<v1::PublishResponse> Publish(std::uint64_t session_id,
                                                    const v1::PublishRequest& request) override;
  [[nodiscard]] Result<v1::PublishBatchResponse> PublishBatch(
      std::uint64_t session_id, const v1::PublishBatchRequest& request) override;
  [[nodiscard]] Result<v1::AcquireResponse> AcquireNow(std::uint64_t session_id,
                                                       const v1::AcquireRequest& request) override;
  // Registry::AcquireLease, then the reply written from the grant: the version's stored
  // TensorInfo bytes with the name, the lease and the rest around them, nothing parsed.
  // INVALID_ARGUMENT when wait_timeout_ms is not 0 (that acquire is AcquireWaiting's).
  [[nodiscard]] Status AcquireNowEncoded(std::uint64_t session_id,
                                         const v1::AcquireRequest& request,
                                         std::string& reply) override;
  // Registry::Acquire; the session's end (CloseSession) ends its wait.
  void AcquireWaiting(std::uint64_t session_id, const v1::AcquireRequest& request,
                      AcquireDone done) override;
  [[nodiscard]] bool ServesAcquireWaits() const override { return true; }
  [[nodiscard]] Result<v1::ReleaseResponse> Release(std::uint64_t session_id,
                                                    const v1::ReleaseRequest& request) override;
  [[nodiscard]] Result<v1::CancelAllocationResponse> CancelAllocation(
      std::uint64_t session_id, const v1::CancelAllocationRequest& request) override;

 private:
  Registry& registry_;
};

}  // namespace hurray::daemon
