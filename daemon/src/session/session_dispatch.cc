#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <optional>
#include <string_view>
#include <utility>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/fast_path_layout.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/session.pb.h"
#include "logging.h"
#include "session/acquire_reply_encoder.h"
#include "session/session_connection.h"
#include "session/session_listener.h"

namespace hurray::daemon {
namespace {

// The tensor a request names, for its log lines; empty for requests that name none.
std::string_view TensorNameOf(const v1::SessionMessage& request) {
  switch (request.body_case()) {
    case v1::SessionMessage::kPublish:
      return request.publish().name();
    case v1::SessionMessage::kAcquire:
      return request.acquire().name();
    default:
      return {};
  }
}

// The session protocol's name of a segment kind.
v1::SegmentKind ToProto(SegmentKind kind) {
  switch (kind) {
    case SegmentKind::kShm:
      return v1::SEGMENT_KIND_SHM;
    case SegmentKind::kCudaVmm:
      return v1::SEGMENT_KIND_CUDA_VMM;
    case SegmentKind::kCudaLegacyIpc:
      return v1::SEGMENT_KIND_CUDA_LEGACY_IPC;
    case SegmentKind::kSealedMemfd:
      return v1::SEGMENT_KIND_SEALED_MEMFD;
  }
  return v1::SEGMENT_KIND_SHM;
}

}  // namespace

std::optional<SessionServer::Connection::Reply> SessionServer::Connection::HandleLocked() {
  if (reader_.closed_descriptors() != 0 && !told_of_descriptors_) {
    told_of_descriptors_ = true;  // Once: a client that sends thousands gets one line.
    spdlog::warn("session connection {} (pid {}): the client sent file descriptors; closed them",
                 id_, peer_.pid);
  }
  // Parsed into the connection's message, whose memory the next request reuses.
  v1::SessionMessage& request = request_;
  if (!request.ParseFromArray(frame_.payload.data(), static_cast<int>(frame_.payload.size()))) {
    return RejectProtocol(0, fmt::format("session message of {} bytes does not parse as a "
                                         "hurray.v1.SessionMessage",
                                         frame_.payload.size()));
  }
  const LogContext log_context({.session = session_id_.value_or(0),
                                .pid = peer_.pid,
                                .uid = peer_.uid,
                                .tensor = TensorNameOf(request)});
  if (session_id_) return HandleRequestLocked(*session_id_, request);
  return HandleHello(request);
}

SessionServer::Connection::Reply SessionServer::Connection::HandleHello(
    const v1::SessionMessage& request) {
  if (request.body_case() != v1::SessionMessage::kHello) {
    return RejectProtocol(
        request.request_id(),
        fmt::format("the first session message must be a hello, not {}", SessionBodyName(request)));
  }
  const v1::SessionHello& hello = request.hello();
  if (hello.protocol_version() != kSessionProtocolVersion) {
    return RejectProtocol(
        request.request_id(),
        fmt::format("hello.protocol_version {} is not supported; this daemon speaks {}",
                    hello.protocol_version(), kSessionProtocolVersion));
  }
  if (hello.client_name().size() > kMaxSessionClientNameBytes) {
    return RejectProtocol(request.request_id(),
                          fmt::format("hello.client_name is {} bytes; the limit is {}",
                                      hello.client_name().size(), kMaxSessionClientNameBytes));
  }
  auto grant = core_->host().OpenSession(peer_, hello.client_name());
  if (!grant) {
    spdlog::info("session connection {} (pid {}, uid {}): session refused: {}", id_, peer_.pid,
                 peer_.uid, grant.error().ToString());
    return ErrorReply(request.request_id(), grant.error(), /*close_after=*/true);
  }
  session_id_ = grant->session_id;
  if (process_) core_->host().SetPeerProcess(grant->session_id, std::move(process_));
  (void)hello_deadline_.cancel();  // The count of handlers it cancelled.
  spdlog::debug("session connection {} (pid {}): session {} opened for '{}'", id_, peer_.pid,
                grant->session_id, hello.client_name());
  Reply reply;
  reply.message.set_request_id(request.request_id());
  v1::SessionWelcome& welcome = *reply.message.mutable_welcome();
  welcome.set_token(std::move(grant->token));
  welcome.set_session_id(grant->session_id);
  welcome.set_daemon_epoch(core_->daemon_epoch());
  welcome.set_pid(static_cast<std::uint32_t>(peer_.pid));
  welcome.set_uid(peer_.uid);
  welcome.set_gid(peer_.gid);
  welcome.set_max_wait_ms(core_->limits().max_wait_ms);
  welcome.set_acquire_waits(core_->host().ServesAcquireWaits());
  if (hello.hold_epoch() && core_->epoch_hold() != nullptr) {
    reply.fd = UniqueFd(::fcntl(core_->epoch_hold()->get(), F_DUPFD_CLOEXEC, 0));
    // Without it the client maps all the same; only a restart may then reuse memory it reads.
    if (!reply.fd) {
      spdlog::warn("session connection {} (pid {}): no epoch hold for it: {}", id_, peer_.pid,
                   ErrnoError("fcntl(F_DUPFD_CLOEXEC)", "the epoch hold", errno).message());
    }
  }
  return reply;
}

std::optional<SessionServer::Connection::Reply> SessionServer::Connection::HandleRequestLocked(
    std::uint64_t session_id, const v1::SessionMessage& request) {
  SessionHost& host = core_->host();
  switch (request.body_case()) {
    case v1::SessionMessage::kMapSegment:
      return HandleMapSegment(session_id, request);
    case v1::SessionMessage::kMapDirectory:
      return HandleMapDirectory(session_id, request);
    case v1::SessionMessage::kMapLeasePage:
      return HandleMapLeasePage(session_id, request);
    case v1::SessionMessage::kAllocate:
      return ReplyWith(request.request_id(), host.Allocate(session_id, request.allocate()),
                       &v1::SessionMessage::mutable_allocate_reply);
    case v1::SessionMessage::kPublish:
      return ReplyWith(request.request_id(), host.Publish(session_id, request.publish()),
                       &v1::SessionMessage::mutable_publish_reply);
    case v1::SessionMessage::kPublishBatch:
      return HandlePublishBatch(session_id, request);
    case v1::SessionMessage::kAcquire:
      if (request.acquire().wait_timeout_ms() != 0) {
        HandleWaitingAcquireLocked(session_id, request);
        return std::nullopt;
      }
      return HandleAcquireLocked(session_id, request);
    case v1::SessionMessage::kRelease:
      return ReplyWith(request.request_id(), host.Release(session_id, request.release()),
                       &v1::SessionMessage::mutable_release_reply);
    case v1::SessionMessage::kReleaseOneWay:
      ReleaseOneWayLocked(session_id, request);
      return std::nullopt;
    case v1::SessionMessage::kSync: {
      // Requests are served in order: every earlier one has taken effect.
      Reply reply;
      reply.message.set_request_id(request.request_id());
      reply.message.mutable_synced();
      return reply;
    }
    case v1::SessionMessage::kCancelAllocation:
      return ReplyWith(request.request_id(),
                       host.CancelAllocation(session_id, request.cancel_allocation()),
                       &v1::SessionMessage::mutable_cancel_allocation_reply);
    case v1::SessionMessage::kSlabMapped:
      return ReplyWith(request.request_id(), host.SlabMapped(session_id, request.slab_mapped()),
                       &v1::SessionMessage::mutable_slab_mapped_ack);
    default:
      return RejectProtocol(
          request.request_id(),
          fmt::format("session message {}: {} is not a request this daemon serves",
                      request.request_id(), SessionBodyName(request)));
  }
}

template <typename Response>
SessionServer::Connection::Reply SessionServer::Connection::ReplyWith(
    std::uint64_t request_id, Result<Response> result, Response* (v1::SessionMessage::*body)()) {
  if (!result) return ErrorReply(request_id, result.error(), /*close_after=*/false);
  Reply reply;
  reply.message.set_request_id(request_id);
  *(reply.message.*body)() = std::move(*result);
  return reply;
}

SessionServer::Connection::Reply SessionServer::Connection::HandleAcquireLocked(
    std::uint64_t session_id, const v1::SessionMessage& request) {
  acquire_body_.clear();
  if (Status acquired =
          core_->host().AcquireNowEncoded(session_id, request.acquire(), acquire_body_);
      !acquired) {
    return ErrorReply(request.request_id(), acquired.error(), /*close_after=*/false);
  }
  if (acquire_body_.capacity() > kKeptBufferBytes) std::string().swap(acquire_body_);
  EncodeSessionReply(request.request_id(), v1::SessionMessage::kAcquireReply, acquire_body_,
                     reply_payload_);
  Reply reply;
  reply.encoded = true;
  return reply;
}

void SessionServer::Connection::HandleWaitingAcquireLocked(std::uint64_t session_id,
                                                           const v1::SessionMessage& request) {
  core_->host().AcquireWaiting(session_id, request.acquire(),
                               [weak = weak_from_this(), request_id = request.request_id()](
                                   Result<v1::AcquireResponse> result) {
                                 if (const std::shared_ptr<Connection> self = weak.lock()) {
                                   self->Answer(request_id, std::move(result));
                                 }
                               });
}

void SessionServer::Connection::ReleaseOneWayLocked(std::uint64_t session_id,
                                                    const v1::SessionMessage& request) {
  const v1::ReleaseRequest& release = request.release_one_way();
  SessionHost& host = core_->host();
  auto released = host.Release(session_id, release);  // Ends every lease it knows.
  if (released) return;
  spdlog::debug("session connection {} (pid {}): release_one_way {}: {}", id_, peer_.pid,
                request.request_id(), released.error().ToString());
  if (release_failures_.size() >= kMaxPendingReleaseFailures) return;
  v1::ReleaseFailure& failure = release_failures_.emplace_back();
  failure.set_request_id(request.request_id());
  failure.mutable_error()->set_code(static_cast<std::uint32_t>(released.error().code()));
  failure.mutable_error()->set_message(released.error().message());
}

SessionServer::Connection::Reply SessionServer::Connection::HandlePublishBatch(
    std::uint64_t session_id, const v1::SessionMessage& request) {
  const v1::PublishBatchRequest& batch = request.publish_batch();
  std::size_t name_bytes = 0;
  for (const v1::PublishRequest& item : batch.items()) name_bytes += item.name().size();
  const std::size_t reply_bound =
      PublishBatchReplyBound(static_cast<std::size_t>(batch.items_size()), name_bytes);
  if (reply_bound > kMaxSessionFrameBytes) {
    return ErrorReply(
        request.request_id(),
        ResourceExhaustedError(
            fmt::format("publish_batch of {} items: its reply could take {} bytes, above the "
                        "session frame limit {}; send it through gRPC",
                        batch.items_size(), reply_bound, kMaxSessionFrameBytes))
            .error(),
        /*close_after=*/false);
  }
  return ReplyWith(request.request_id(), core_->host().PublishBatch(session_id, batch),
                   &v1::SessionMessage::mutable_publish_batch_reply);
}

SessionServer::Connection::Reply SessionServer::Connection::HandleMapSegment(
    std::uint64_t session_id, const v1::SessionMessage& request) {
  const v1::MapSegmentRequest& map = request.map_segment();
  auto access = core_->host().GrantSegment(session_id, map.segment_id(), map.writable());
  if (access && access->kind != SegmentKind::kCudaLegacyIpc && !access->fd.valid()) {
    access = InternalError(
        fmt::format("segment {}: the daemon granted no descriptor", map.segment_id()));
  }
  if (!access) {
    spdlog::debug("session connection {} (pid {}): map_segment {}: {}", id_, peer_.pid,
                  map.segment_id(), access.error().ToString());
    return ErrorReply(request.request_id(), access.error(), /*close_after=*/false);
  }
  Reply reply;
  reply.message.set_request_id(request.request_id());
  v1::SegmentGranted& granted = *reply.message.mutable_segment_granted();
  granted.set_segment_id(map.segment_id());
  granted.set_segment_size(access->segment_size);
  granted.set_writable(access->writable);
  granted.set_page_size(access->page_size);
  granted.set_kind(ToProto(access->kind));
  granted.set_device_uuid(access->device_uuid);
  granted.set_legacy_ipc_handle(access->legacy_ipc_handle);
  reply.fd = std::move(access->fd);
  return reply;
}

SessionServer::Connection::Reply SessionServer::Connection::HandleMapDirectory(
    std::uint64_t session_id, const v1::SessionMessage& request) {
  Result<DirectoryAccess> access = core_->host().GrantDirectory(session_id);
  if (!access) return ErrorReply(request.request_id(), access.error(), /*close_after=*/false);
  Reply reply;
  reply.message.set_request_id(request.request_id());
  v1::DirectoryGranted& granted = *reply.message.mutable_directory_granted();
  granted.set_size(access->size);
  granted.set_entry_count(access->entry_count);
  granted.set_layout_version(fast_path::kLayoutVersion);
  reply.fd = std::move(access->fd);
  return reply;
}

SessionServer::Connection::Reply SessionServer::Connection::HandleMapLeasePage(
    std::uint64_t session_id, const v1::SessionMessage& request) {
  Result<LeasePageAccess> access = core_->host().GrantLeasePage(session_id);
  if (!access) return ErrorReply(request.request_id(), access.error(), /*close_after=*/false);
  Reply reply;
  reply.message.set_request_id(request.request_id());
  v1::LeasePageGranted& granted = *reply.message.mutable_lease_page_granted();
  granted.set_size(access->size);
  granted.set_slot_count(access->slot_count);
  reply.fd = std::move(access->fd);
  return reply;
}

SessionServer::Connection::Reply SessionServer::Connection::RejectProtocol(
    std::uint64_t request_id, const std::string& message) const {
  spdlog::warn("session connection {} (pid {}): {}; closing", id_, peer_.pid, message);
  return ErrorReply(request_id, Error(StatusCode::kInvalidArgument, message),
                    /*close_after=*/true);
}

SessionServer::Connection::Reply SessionServer::Connection::ErrorReply(std::uint64_t request_id,
                                                                       const Error& error,
                                                                       bool close_after) {
  Reply reply;
  reply.message.set_request_id(request_id);
  v1::SessionError& body = *reply.message.mutable_error();
  body.set_code(static_cast<std::uint32_t>(error.code()));
  body.set_message(error.message());
  if (close_after) reply.close_reason = error.ToString();
  return reply;
}

}  // namespace hurray::daemon
