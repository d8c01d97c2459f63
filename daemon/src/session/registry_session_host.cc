#include "session/registry_session_host.h"

#include <fmt/format.h>

#include <utility>

#include "registry/version_store.h"
#include "session/acquire_reply_encoder.h"

namespace hurray::daemon {

Result<SessionGrant> RegistrySessionHost::OpenSession(const PeerCredentials& peer,
                                                      std::string_view client_name) {
  return registry_.OpenSession(peer, client_name);
}

void RegistrySessionHost::CloseSession(std::uint64_t session_id) {
  registry_.CloseSession(session_id);
}

void RegistrySessionHost::SetPeerProcess(std::uint64_t session_id, UniqueFd process) {
  registry_.SetPeerProcess(session_id, std::move(process));
}

void RegistrySessionHost::ConnectionRefused(const PeerCredentials& peer, const Error& refusal) {
  registry_.ConnectionRefused(peer, refusal);
}

Result<SegmentAccess> RegistrySessionHost::GrantSegment(std::uint64_t session_id,
                                                        std::uint64_t segment_id, bool writable) {
  return registry_.GrantSegment(session_id, segment_id, writable);
}

Result<v1::SlabMappedAck> RegistrySessionHost::SlabMapped(std::uint64_t session_id,
                                                          const v1::SlabMapped& request) {
  const Registry::SlabUse use = request.unmapped()    ? Registry::SlabUse::kUnmapped
                                : request.read_only() ? Registry::SlabUse::kReadOnly
                                                      : Registry::SlabUse::kReadWrite;
  HURRAY_RETURN_IF_ERROR(registry_.SlabMapped(session_id, request.segment_id(), use));
  return v1::SlabMappedAck();
}

Result<DirectoryAccess> RegistrySessionHost::GrantDirectory(std::uint64_t session_id) {
  return registry_.GrantDirectory(session_id);
}

Result<LeasePageAccess> RegistrySessionHost::GrantLeasePage(std::uint64_t session_id) {
  return registry_.GrantLeasePage(session_id);
}

Result<v1::AllocateResponse> RegistrySessionHost::Allocate(std::uint64_t session_id,
                                                           const v1::AllocateRequest& request) {
  return registry_.Allocate(session_id, request);
}

Result<v1::PublishResponse> RegistrySessionHost::Publish(std::uint64_t session_id,
                                                         const v1::PublishRequest& request) {
  return registry_.Publish(session_id, request);
}

Result<v1::PublishBatchResponse> RegistrySessionHost::PublishBatch(
    std::uint64_t session_id, const v1::PublishBatchRequest& request) {
  return registry_.PublishBatch(session_id, request);
}

Result<v1::AcquireResponse> RegistrySessionHost::AcquireNow(std::uint64_t session_id,
                                                            const v1::AcquireRequest& request) {
  return registry_.AcquireNow(session_id, request);
}

Status RegistrySessionHost::AcquireNowEncoded(std::uint64_t session_id,
                                              const v1::AcquireRequest& request,
                                              std::string& reply) {
  if (request.wait_timeout_ms() != 0) {
    return InvalidArgumentError(
        fmt::format("wait_timeout_ms {}: an acquire that waits is sent as one that waits",
                    request.wait_timeout_ms()));
  }
  HURRAY_ASSIGN_OR_RETURN(const Registry::LeaseGrant grant,
                          registry_.AcquireLease(session_id, request.name(), request.version()));
  const TensorVersion& version = *grant.version;
  const bool fast_path = version.fast_path_id != 0;
  AppendAcquireResponse(
      AcquireReplyParts{.lease_id = grant.lease_id,
                        .name = request.name(),
                        .info_without_name = version.info_without_name,
                        .ready = grant.ready,
                        .daemon_epoch = registry_.daemon_epoch(),
                        .version_id = fast_path ? version.fast_path_id : 0,
                        .directory_entry = fast_path ? version.directory_entry : 0},
      reply);
  return {};
}

void RegistrySessionHost::AcquireWaiting(std::uint64_t session_id,
                                         const v1::AcquireRequest& request, AcquireDone done) {
  (void)registry_.Acquire(session_id, request, std::move(done));  // Its wait id: never cancelled.
}

Result<v1::ReleaseResponse> RegistrySessionHost::Release(std::uint64_t session_id,
                                                         const v1::ReleaseRequest& request) {
  return registry_.Release(session_id, request);
}

Result<v1::CancelAllocationResponse> RegistrySessionHost::CancelAllocation(
    std::uint64_t session_id, const v1::CancelAllocationRequest& request) {
  return registry_.CancelAllocation(session_id, request);
}

}  // namespace hurray::daemon
