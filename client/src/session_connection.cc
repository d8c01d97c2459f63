#include "session_connection.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unix_socket.h"
#include "hurray/v1/session.pb.h"

namespace hurray::client {
namespace {

// Encodes `message` into `buffer` (its memory reused) and sends it as one frame.
Status Send(int socket, const v1::SessionMessage& message, std::vector<std::uint8_t>& buffer) {
  buffer.resize(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(buffer.data());
  return SendFrame(socket, buffer);
}

// When a wait's spin ends: `spin` from now, for the whole wait however many replies for
// other threads its thread reads first; the epoch (no clock read) without a spin.
std::chrono::steady_clock::time_point SpinDeadline(std::chrono::microseconds spin) {
  return spin.count() > 0 ? std::chrono::steady_clock::now() + spin
                          : std::chrono::steady_clock::time_point();
}

// Polls `socket` for readability, without sleeping, until it is readable (or hung up) or
// `until` has passed (AcquireOptions::spin).
void SpinUntilReadable(int socket, std::chrono::steady_clock::time_point until) {
  pollfd ready{.fd = socket, .events = POLLIN, .revents = 0};
  while (::poll(&ready, 1, 0) == 0 && std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

Error DaemonError(std::uint32_t code, const std::string& message) {
  constexpr auto kLastCode = static_cast<std::uint32_t>(StatusCode::kUnauthenticated);
  const StatusCode status =
      code <= kLastCode ? static_cast<StatusCode>(code) : StatusCode::kUnknown;
  // A daemon that says "error" with code OK breaks the protocol; never report success.
  if (status == StatusCode::kOk) {
    return {StatusCode::kInternal,
            fmt::format("the daemon answered with an error of code OK: {}", message)};
  }
  return {status, message};
}

template <typename Context>
Result<SessionConnection::Reply> SessionConnection::ReceiveReply(int socket, FrameReader& reader,
                                                                 Frame& frame,
                                                                 const Context& context) {
  HURRAY_RETURN_IF_ERROR(reader.NextInto(socket, frame));
  Reply reply;
  if (!reply.message.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()))) {
    return InternalError(fmt::format(
        "{}: the daemon's reply of {} bytes does not parse as a hurray.v1.SessionMessage",
        context(), frame.payload.size()));
  }
  reply.fd = std::move(frame.fd);
  return reply;
}

Result<std::unique_ptr<SessionConnection>> SessionConnection::Connect(
    const std::string& socket_path, std::string_view client_name) {
  if (client_name.size() > kMaxSessionClientNameBytes) {
    return InvalidArgumentError(fmt::format("client_name is {} bytes; the limit is {}",
                                            client_name.size(), kMaxSessionClientNameBytes));
  }
  auto socket = ConnectUnixSocket(socket_path);
  if (!socket) return std::unexpected(socket.error());

  v1::SessionMessage hello;
  hello.set_request_id(0);
  hello.mutable_hello()->set_protocol_version(kSessionProtocolVersion);
  hello.mutable_hello()->set_client_name(std::string(client_name));
  hello.mutable_hello()->set_hold_epoch(true);
  std::vector<std::uint8_t> buffer;
  const Status sent = Send(socket->get(), hello, buffer);
  if (!sent && sent.error().code() != StatusCode::kUnavailable) {
    return std::unexpected(sent.error().WithContext("session hello"));
  }
  FrameReader reader;
  Frame frame;
  auto reply =
      ReceiveReply(socket->get(), reader, frame, [] { return std::string("session hello"); });
  // A daemon that refuses the connection (a session cap) sends why and closes without
  // reading the hello, which then meets a broken pipe: the reason is the answer.
  if (!sent && !(reply && reply->message.has_error())) {
    return std::unexpected(sent.error().WithContext("session hello"));
  }
  if (!reply) return std::unexpected(reply.error());
  const v1::SessionMessage& message = reply->message;
  if (message.has_error())
    return std::unexpected(DaemonError(message.error().code(), message.error().message()));
  if (!message.has_welcome()) {
    return InternalError(fmt::format("session hello: the daemon answered with {}, not a welcome",
                                     SessionBodyName(message)));
  }
  const v1::SessionWelcome& welcome = message.welcome();
  const PeerCredentials credentials{
      .pid = static_cast<pid_t>(welcome.pid()), .uid = welcome.uid(), .gid = welcome.gid()};
  // Best effort: without it, only a stream waiting on an orphaned fence misses its release
  // (FenceRelay).
  auto daemon_pidfd = OpenPeerPidfd(socket->get());
  return std::unique_ptr<SessionConnection>(new SessionConnection(
      std::move(*socket), std::move(reader), welcome.token(), welcome.session_id(),
      welcome.daemon_epoch(), welcome.acquire_waits(), credentials, std::move(reply->fd),
      daemon_pidfd ? std::move(*daemon_pidfd) : UniqueFd()));
}

SessionConnection::SessionConnection(UniqueFd socket, FrameReader reader, std::string token,
                                     std::uint64_t session_id, std::uint64_t daemon_epoch,
                                     bool acquire_waits, PeerCredentials credentials,
                                     UniqueFd epoch_hold, UniqueFd daemon_pidfd)
    : token_(std::move(token)),
      session_id_(session_id),
      daemon_epoch_(daemon_epoch),
      acquire_waits_(acquire_waits),
      credentials_(credentials),
      daemon_pidfd_(daemon_pidfd ? std::make_shared<const UniqueFd>(std::move(daemon_pidfd))
                                 : nullptr),
      epoch_hold_(epoch_hold ? std::make_shared<const UniqueFd>(std::move(epoch_hold)) : nullptr),
      socket_(std::move(socket)),
      reader_(std::move(reader)) {}

Error SessionConnection::BreakLocked(Error cause) {
  // A thread reading the socket meets the end of stream, and closes it once it returns.
  if (reading_) {
    (void)::shutdown(socket_.get(), SHUT_RDWR);
  } else {
    socket_.Reset();
  }
  epoch_hold_.reset();
  broken_ = cause;
  open_.store(false, std::memory_order_release);
  replied_.notify_all();
  return cause;
}

bool SessionConnection::StillOpen(bool probe) {
  std::lock_guard lock(mutex_);
  if (broken_) return false;
  // A reply is awaited: it may be what is readable, and the thread reading it will see an end.
  if (!probe || !awaited_.empty()) return true;
  pollfd watched{.fd = socket_.get(), .events = POLLIN, .revents = 0};
  if (::poll(&watched, 1, 0) == 0) return true;
  (void)BreakLocked(
      Error(StatusCode::kUnavailable,
            "the daemon hung up the session socket between requests (it stopped or restarted)"));
  return false;
}

Result<v1::SessionMessage> SessionConnection::RoundTripLocked(
    std::unique_lock<std::mutex>& lock, v1::SessionMessage& request,
    v1::SessionMessage::BodyCase reply_case, UniqueFd* fd, std::string_view context, bool* sent,
    std::chrono::microseconds spin) {
  if (sent != nullptr) *sent = false;
  if (broken_) {
    return UnavailableError(
        fmt::format("the session connection is closed after: {}", broken_->ToString()));
  }
  // The request's name appears only in errors: a reflection lookup on every request of the
  // hot path would cost more than nothing.
  const auto describe = [&] {
    return context.empty() ? SessionBodyName(request) : std::string(context);
  };
  if (auto written = SendLocked(request); !written) {
    return std::unexpected(BreakLocked(written.error().WithContext(describe())));
  }
  const std::uint64_t request_id = request.request_id();
  if (sent != nullptr) *sent = true;
  awaited_.push_back(request_id);
  auto reply = AwaitReplyLocked(lock, request_id, describe, spin);
  if (!reply) return std::unexpected(reply.error());
  v1::SessionMessage& message = reply->message;
  if (message.has_error())
    return std::unexpected(DaemonError(message.error().code(), message.error().message()));
  if (message.body_case() != reply_case) {
    return std::unexpected(BreakLocked(
        Error(StatusCode::kInternal,
              fmt::format("{}: the daemon answered with {}, not the reply of the request",
                          describe(), SessionBodyName(message)))));
  }
  if (fd != nullptr) *fd = std::move(reply->fd);
  return std::move(message);
}

template <typename Describe>
Result<SessionConnection::Reply> SessionConnection::AwaitReplyLocked(
    std::unique_lock<std::mutex>& lock, std::uint64_t request_id, const Describe& describe,
    std::chrono::microseconds spin) {
  const std::chrono::steady_clock::time_point spin_until = SpinDeadline(spin);
  while (true) {
    if (auto it = std::ranges::find_if(
            arrived_,
            [request_id](const Reply& reply) { return reply.message.request_id() == request_id; });
        it != arrived_.end()) {
      Reply reply = std::move(*it);
      arrived_.erase(it);
      return reply;
    }
    if (broken_) {
      return UnavailableError(
          fmt::format("{}: the session connection closed before the daemon replied; whether the "
                      "request took effect is unknown: {}",
                      describe(), broken_->ToString()));
    }
    if (reading_) {
      replied_.wait(lock);
      continue;
    }
    // This thread reads the next reply, for itself or for another: the lock is let go
    // meanwhile, so that other threads send their requests.
    reading_ = true;
    const int socket = socket_.get();
    lock.unlock();
    if (spin.count() > 0 && !reader_.has_buffered_bytes()) SpinUntilReadable(socket, spin_until);
    Result<Reply> received = ReceiveReply(socket, reader_, received_, describe);
    lock.lock();
    reading_ = false;
    replied_.notify_all();
    if (broken_) {
      socket_.Reset();  // Shut down while this thread read it.
      continue;
    }
    if (!received && received.error().code() == StatusCode::kUnavailable) {
      return std::unexpected(BreakLocked(Error(
          StatusCode::kUnavailable,
          fmt::format("{}: the daemon ended the session before replying (it stopped or "
                      "restarted); whether the request took effect is unknown, and the next call "
                      "opens a new session: {}",
                      describe(), received.error().message()))));
    }
    if (!received) return std::unexpected(BreakLocked(received.error()));
    const std::uint64_t answered = received->message.request_id();
    const auto awaited = std::ranges::find(awaited_, answered);
    if (awaited == awaited_.end()) {
      return std::unexpected(BreakLocked(
          Error(StatusCode::kInternal,
                fmt::format("{}: the daemon's reply carries request_id {}, which no request awaits",
                            describe(), answered))));
    }
    awaited_.erase(awaited);
    // Every earlier request, one-way releases included, has been served (acquires still
    // waiting aside).
    answered_through_ = std::max(answered_through_, answered);
    if (received->message.release_failures_size() > 0) TakeReleaseFailuresLocked(received->message);
    if (answered == request_id) return std::move(*received);
    arrived_.push_back(std::move(*received));
  }
}

Result<GrantedSegment> SessionConnection::MapSegment(std::uint64_t segment_id, bool writable) {
  std::unique_lock lock(mutex_);
  const std::string context = fmt::format("map_segment {}", segment_id);
  v1::SessionMessage request;
  request.mutable_map_segment()->set_segment_id(segment_id);
  request.mutable_map_segment()->set_writable(writable);
  UniqueFd fd;
  auto reply = RoundTripLocked(lock, request, v1::SessionMessage::kSegmentGranted, &fd, context);
  if (!reply) return std::unexpected(reply.error());
  v1::SegmentGranted& granted = *reply->mutable_segment_granted();
  const bool legacy = granted.kind() == v1::SEGMENT_KIND_CUDA_LEGACY_IPC;
  // A legacy handle's bytes stay out of the message: only its size is named.
  const bool access_ok = legacy ? !fd && granted.legacy_ipc_handle().size() == kLegacyIpcHandleBytes
                                : static_cast<bool>(fd);
  if (granted.segment_id() != segment_id || !access_ok || (writable && !granted.writable())) {
    return std::unexpected(BreakLocked(
        Error(StatusCode::kInternal,
              fmt::format("{}: the daemon granted segment {} of kind {} {} {} a descriptor and a "
                          "legacy handle of {} bytes",
                          context, granted.segment_id(), v1::SegmentKind_Name(granted.kind()),
                          granted.writable() ? "read-write" : "read-only", fd ? "with" : "without",
                          granted.legacy_ipc_handle().size()))));
  }
  return GrantedSegment{.fd = std::move(fd),
                        .size = granted.segment_size(),
                        .writable = granted.writable(),
                        .page_size = granted.page_size(),
                        .kind = granted.kind(),
                        .device_uuid = std::move(*granted.mutable_device_uuid()),
                        .legacy_ipc_handle = std::move(*granted.mutable_legacy_ipc_handle())};
}

Status SessionConnection::ReportSlabMapped(std::uint64_t segment_id, bool read_only,
                                           bool unmapped) {
  std::unique_lock lock(mutex_);
  v1::SessionMessage request;
  request.mutable_slab_mapped()->set_segment_id(segment_id);
  request.mutable_slab_mapped()->set_read_only(read_only && !unmapped);
  request.mutable_slab_mapped()->set_unmapped(unmapped);
  auto reply = RoundTripLocked(lock, request, v1::SessionMessage::kSlabMappedAck, nullptr,
                               fmt::format("slab_mapped {}", segment_id));
  if (!reply) return std::unexpected(reply.error());
  return {};
}

Result<v1::SessionMessage> SessionConnection::RoundTripWithDescriptorLocked(
    std::unique_lock<std::mutex>& lock, v1::SessionMessage& request,
    v1::SessionMessage::BodyCase reply_case, std::string_view what, UniqueFd& fd) {
  auto reply = RoundTripLocked(lock, request, reply_case, &fd, {});
  if (reply && !fd) {
    return std::unexpected(BreakLocked(Error(
        StatusCode::kInternal, fmt::format("{}: the daemon granted the {} without a descriptor",
                                           SessionBodyName(request), what))));
  }
  return reply;
}

Result<GrantedDirectory> SessionConnection::MapDirectory() {
  std::unique_lock lock(mutex_);
  v1::SessionMessage request;
  request.mutable_map_directory();
  UniqueFd fd;
  HURRAY_ASSIGN_OR_RETURN(
      const v1::SessionMessage reply,
      RoundTripWithDescriptorLocked(lock, request, v1::SessionMessage::kDirectoryGranted,
                                    "directory", fd));
  const v1::DirectoryGranted& granted = reply.directory_granted();
  return GrantedDirectory{.fd = std::move(fd),
                          .size = granted.size(),
                          .entry_count = granted.entry_count(),
                          .layout_version = granted.layout_version()};
}

Result<GrantedLeasePage> SessionConnection::MapLeasePage() {
  std::unique_lock lock(mutex_);
  v1::SessionMessage request;
  request.mutable_map_lease_page();
  UniqueFd fd;
  HURRAY_ASSIGN_OR_RETURN(const v1::SessionMessage reply,
                          RoundTripWithDescriptorLocked(
                              lock, request, v1::SessionMessage::kLeasePageGranted, "page", fd));
  const v1::LeasePageGranted& granted = reply.lease_page_granted();
  return GrantedLeasePage{
      .fd = std::move(fd), .size = granted.size(), .slot_count = granted.slot_count()};
}

Result<v1::SessionMessage> SessionConnection::Exchange(v1::SessionMessage& request,
                                                       v1::SessionMessage::BodyCase reply_case,
                                                       bool* sent, std::chrono::microseconds spin) {
  std::unique_lock lock(mutex_);
  return RoundTripLocked(lock, request, reply_case, nullptr, /*context=*/{}, sent, spin);
}

Status SessionConnection::SendLocked(v1::SessionMessage& request) {
  request.set_request_id(next_request_id_++);
  return Send(socket_.get(), request, send_buffer_);
}

void SessionConnection::TakeReleaseFailuresLocked(const v1::SessionMessage& reply) {
  for (const v1::ReleaseFailure& failure : reply.release_failures()) {
    if (release_failure_) {
      ++more_release_failures_;
      continue;
    }
    const Error error = DaemonError(failure.error().code(), failure.error().message());
    release_failure_ =
        Error(error.code(), fmt::format("one-way release (request {}) refused by the daemon: {}",
                                        failure.request_id(), error.message()));
  }
}

Status SessionConnection::SendReleaseOneWay(const v1::ReleaseRequest& release, bool* sent) {
  std::lock_guard lock(mutex_);
  if (sent != nullptr) *sent = false;
  if (broken_) {
    return UnavailableError(
        fmt::format("the session connection is closed after: {}", broken_->ToString()));
  }
  v1::SessionMessage request;
  *request.mutable_release_one_way() = release;
  if (auto written = SendLocked(request); !written) {
    return std::unexpected(BreakLocked(written.error().WithContext("release_one_way")));
  }
  if (sent != nullptr) *sent = true;
  last_one_way_ = request.request_id();
  return {};
}

bool SessionConnection::ReleasesUnanswered() {
  std::lock_guard lock(mutex_);
  return last_one_way_ > answered_through_ && !broken_;
}

Status SessionConnection::SyncLocked(std::unique_lock<std::mutex>& lock) {
  v1::SessionMessage request;
  request.mutable_sync();
  auto reply = RoundTripLocked(lock, request, v1::SessionMessage::kSynced, nullptr, "sync");
  if (!reply) return std::unexpected(reply.error());
  return {};
}

Status SessionConnection::Sync() {
  std::unique_lock lock(mutex_);
  return SyncLocked(lock);
}

Status SessionConnection::SyncReleases() {
  std::unique_lock lock(mutex_);
  HURRAY_RETURN_IF_ERROR(SyncLocked(lock));
  std::optional<Error> refused = std::exchange(release_failure_, std::nullopt);
  if (!refused) return {};
  Error first = std::move(*refused);
  if (const std::uint64_t more = std::exchange(more_release_failures_, 0); more > 0) {
    first = Error(first.code(),
                  fmt::format("{} (and {} more one-way releases refused)", first.message(), more));
  }
  return std::unexpected(std::move(first));
}

}  // namespace hurray::client
