#include "metrics/metered_session_host.h"

namespace hurray::daemon {

Result<SessionGrant> MeteredSessionHost::OpenSession(const PeerCredentials& peer,
                                                     std::string_view client_name) {
  return Timed(RequestMethod::kHello, [&] { return inner_.OpenSession(peer, client_name); });
}

void MeteredSessionHost::CloseSession(std::uint64_t session_id) { inner_.CloseSession(session_id); }

void MeteredSessionHost::ConnectionRefused(const PeerCredentials& peer, const Error& refusal) {
  inner_.ConnectionRefused(peer, refusal);
}

Result<SegmentAccess> MeteredSessionHost::GrantSegment(std::uint64_t session_id,
                                                       std::uint64_t segment_id, bool writable) {
  return Timed(RequestMethod::kMapSegment,
               [&] { return inner_.GrantSegment(session_id, segment_id, writable); });
}

Result<v1::SlabMappedAck> MeteredSessionHost::SlabMapped(std::uint64_t session_id,
                                                         const v1::SlabMapped& request) {
  return Timed(RequestMethod::kSlabMapped, [&] { return inner_.SlabMapped(session_id, request); });
}

Result<v1::AllocateResponse> MeteredSessionHost::Allocate(std::uint64_t session_id,
                                                          const v1::AllocateRequest& request) {
  return Timed(RequestMethod::kAllocate, [&] { return inner_.Allocate(session_id, request); });
}

Result<v1::PublishResponse> MeteredSessionHost::Publish(std::uint64_t session_id,
                                                        const v1::PublishRequest& request) {
  return Timed(RequestMethod::kPublish, [&] { return inner_.Publish(session_id, request); });
}

Result<v1::PublishBatchResponse> MeteredSessionHost::PublishBatch(
    std::uint64_t session_id, const v1::PublishBatchRequest& request) {
  return Timed(RequestMethod::kPublishBatch,
               [&] { return inner_.PublishBatch(session_id, request); });
}

Result<v1::AcquireResponse> MeteredSessionHost::AcquireNow(std::uint64_t session_id,
                                                           const v1::AcquireRequest& request) {
  return Timed(RequestMethod::kAcquire, [&] { return inner_.AcquireNow(session_id, request); });
}

Status MeteredSessionHost::AcquireNowEncoded(std::uint64_t session_id,
                                             const v1::AcquireRequest& request,
                                             std::string& reply) {
  return Timed(RequestMethod::kAcquire,
               [&] { return inner_.AcquireNowEncoded(session_id, request, reply); });
}

void MeteredSessionHost::AcquireWaiting(std::uint64_t session_id, const v1::AcquireRequest& request,
                                        AcquireDone done) {
  const RequestTimer timer(&metrics_, RequestChannel::kSession, RequestMethod::kAcquire);
  inner_.AcquireWaiting(session_id, request,
                        [timer, done = std::move(done)](Result<v1::AcquireResponse> result) {
                          timer.Finish(result ? StatusCode::kOk : result.error().code());
                          done(std::move(result));
                        });
}

Result<v1::ReleaseResponse> MeteredSessionHost::Release(std::uint64_t session_id,
                                                        const v1::ReleaseRequest& request) {
  return Timed(RequestMethod::kRelease, [&] { return inner_.Release(session_id, request); });
}

Result<v1::CancelAllocationResponse> MeteredSessionHost::CancelAllocation(
    std::uint64_t session_id, const v1::CancelAllocationRequest& request) {
  return Timed(RequestMethod::kCancelAllocation,
               [&] { return inner_.CancelAllocation(session_id, request); });
}

}  // namespace hurray::daemon
