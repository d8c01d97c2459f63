// MeteredSessionHost: a SessionHost that counts and times each session-socket request in
// RequestMetrics (channel "session") and hands it on to the host behind it.
//
// Each request is timed around the inner host's call: what the registry takes, not the
// socket's framing. CloseSession is not a request and is handed on uncounted. A message the
// session server rejects itself (a frame that does not parse, a bad hello) never reaches a
// host and is not counted.
//
// Thread-safe as the inner host is; `inner` and `metrics` must outlive it.
#pragma once

#include <utility>

#include "metrics/request_metrics.h"
#include "session/session_host.h"

namespace hurray::daemon {

class MeteredSessionHost final : public SessionHost {
 public:
  MeteredSessionHost(SessionHost& inner, RequestMetrics& metrics)
      : inner_(inner), metrics_(metrics) {}

  [[nodiscard]] Result<SessionGrant> OpenSession(const PeerCredentials& peer,
                                                 std::string_view client_name) override;
  void CloseSession(std::uint64_t session_id) override;
  // Handed on uncounted, as CloseSession.
  void SetPeerProcess(std::uint64_t session_id, UniqueFd process) override {
    inner_.SetPeerProcess(session_id, std::move(process));
  }
  void ConnectionRefused(const PeerCredentials& peer, const Error& refusal) override;
  [[nodiscard]] Result<SegmentAccess> GrantSegment(std::uint64_t session_id,
                                                   std::uint64_t segment_id,
                                                   bool writable) override;
  // Handed on uncounted: each is asked once per session at most.
  [[nodiscard]] Result<DirectoryAccess> GrantDirectory(std::uint64_t session_id) override {
    return inner_.GrantDirectory(session_id);
  }
  [[nodiscard]] Result<LeasePageAccess> GrantLeasePage(std::uint64_t session_id) override {
    return inner_.GrantLeasePage(session_id);
  }
  [[nodiscard]] Result<v1::SlabMappedAck> SlabMapped(std::uint64_t session_id,
                                                     const v1::SlabMapped& request) override;
  [[nodiscard]] Result<v1::AllocateResponse> Allocate(std::uint64_t session_id,
                                                      const v1::AllocateRequest& request) override;
  [[nodiscard]] Result<v1::PublishResponse> Publish(std::uint64_t session_id,
                                                    const v1::PublishRequest& request) override;
  [[nodiscard]] Result<v1::PublishBatchResponse> PublishBatch(
      std::uint64_t session_id, const v1::PublishBatchRequest& request) override;
  [[nodiscard]] Result<v1::AcquireResponse> AcquireNow(std::uint64_t session_id,
                                                       const v1::AcquireRequest& request) override;
  [[nodiscard]] Status AcquireNowEncoded(std::uint64_t session_id,
                                         const v1::AcquireRequest& request,
                                         std::string& reply) override;
  // Timed from the request to the answer, the wait included (as gRPC's Acquire is).
  void AcquireWaiting(std::uint64_t session_id, const v1::AcquireRequest& request,
                      AcquireDone done) override;
  [[nodiscard]] bool ServesAcquireWaits() const override { return inner_.ServesAcquireWaits(); }
  [[nodiscard]] Result<v1::ReleaseResponse> Release(std::uint64_t session_id,
                                                    const v1::ReleaseRequest& request) override;
  [[nodiscard]] Result<v1::CancelAllocationResponse> CancelAllocation(
      std::uint64_t session_id, const v1::CancelAllocationRequest& request) override;

 private:
  // Runs `call` (a call of inner_) and records it as `method`.
  template <typename Call>
  auto Timed(RequestMethod method, Call call) {
    const RequestTimer timer(&metrics_, RequestChannel::kSession, method);
    auto result = call();
    timer.Finish(result ? StatusCode::kOk : result.error().code());
    return result;
  }

  SessionHost& inner_;
  RequestMetrics& metrics_;
};

}  // namespace hurray::daemon
