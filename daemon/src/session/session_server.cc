#include "session/session_server.h"

#include <fmt/format.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/frame.h"
#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/ipc/unix_socket.h"
#include "hurray/v1/session.pb.h"
#include "logging.h"

namespace hurray::daemon {
namespace {

using boost::asio::local::stream_protocol;

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

// After accept4 fails for lack of descriptors or memory, the pending connection stays
// queued and the listener stays readable: wait a little instead of spinning on it.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// Connections accepted per wakeup before other handlers get a turn.
constexpr int kMaxAcceptsPerWakeup = 64;
// How often a reply with a descriptor checks whether the client has read the earlier
// replies: the first delay, doubled up to the last.
constexpr std::chrono::milliseconds kFirstDrainDelay{1};
constexpr std::chrono::milliseconds kLastDrainDelay{100};

// Which file a path named when we looked, to remove only our own socket file later.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
};

}  // namespace

// The server's state, shared by the SessionServer, the accept loop's handlers and the thread
// of every connection. Thread-safe; everything mutable is guarded by mutex_.
class SessionServer::Core : public std::enable_shared_from_this<Core> {
 public:
  // Counts a running accept handler so that Stop() can wait for it. entered() is false once
  // the server is stopped: the handler must then do nothing.
  class HandlerScope {
   public:
    explicit HandlerScope(Core& core) : core_(core), entered_(core.EnterHandler()) {}
    ~HandlerScope() {
      if (entered_) core_.LeaveHandler();
    }
    HandlerScope(const HandlerScope&) = delete;
    HandlerScope& operator=(const HandlerScope&) = delete;

    [[nodiscard]] bool entered() const { return entered_; }

   private:
    Core& core_;
    bool entered_;
  };

  Core(boost::asio::io_context& io_context, std::string socket_path, SessionHost& host,
       std::uint64_t daemon_epoch, FileIdentity socket_file)
      : io_context_(io_context),
        socket_path_(std::move(socket_path)),
        host_(host),
        daemon_epoch_(daemon_epoch),
        socket_file_(socket_file),
        acceptor_(io_context),
        retry_timer_(io_context) {}

  // Takes the listening socket and starts accepting.
  [[nodiscard]] Status Listen(UniqueFd listener);
  void Stop();
  [[nodiscard]] std::size_t connection_count() const;
  // The last call of a connection's thread: the connection leaves the set. Its thread is
  // joined by the next connection's thread to end, or by Stop(), so at most one ended
  // thread waits to be joined.
  void Finished(std::uint64_t connection_id);

  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }
  [[nodiscard]] SessionHost& host() const { return host_; }
  [[nodiscard]] std::uint64_t daemon_epoch() const { return daemon_epoch_; }

 private:
  // An open connection and the thread that serves it.
  struct Served {
    std::shared_ptr<Connection> connection;
    std::thread thread;
  };

  [[nodiscard]] bool EnterHandler();
  void LeaveHandler();
  void ArmAcceptLocked();
  void ArmRetryLocked();
  void OnListenerReady(const boost::system::error_code& error);
  void AddConnection(UniqueFd socket);
  void RemoveSocketFile() const;

  boost::asio::io_context& io_context_;
  const std::string socket_path_;
  SessionHost& host_;
  const std::uint64_t daemon_epoch_;
  const FileIdentity socket_file_;

  std::mutex stop_mutex_;  // Held by Stop(), so that a second call waits for the first.
  mutable std::mutex mutex_;
  stream_protocol::acceptor acceptor_;            // Guarded by mutex_.
  boost::asio::steady_timer retry_timer_;         // Guarded by mutex_.
  std::map<std::uint64_t, Served> connections_;   // Guarded by mutex_.
  std::vector<std::thread> ended_threads_;        // Guarded by mutex_. Not joined yet.
  std::uint64_t next_connection_id_ = 1;          // Guarded by mutex_.
  bool stopped_ = false;                          // Guarded by mutex_.
  std::size_t running_handlers_ = 0;              // Guarded by mutex_.
  std::condition_variable handlers_finished_;     // running_handlers_ fell to 0.
  std::condition_variable connections_finished_;  // connections_ became empty.
};

// One client connection, served by a thread of its own that reads a request (blocking),
// answers it and reads the next. A blocked thread per connection costs one wake-up per
// request: the client's write wakes the very thread that handles it. (On an event loop that
// several threads run, the thread that sees the socket ready hands the handler to another,
// which costs a second wake-up and most of a small request's time.) One process holds one
// session connection, so this is one thread per client process.
// Run() belongs to the connection's thread; Shutdown() may be called from any thread.
class SessionServer::Connection {
 public:
  Connection(Core& core, std::uint64_t id, UniqueFd socket, PeerCredentials peer)
      : core_(core), id_(id), peer_(peer), socket_fd_(socket.get()), socket_(std::move(socket)) {}

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Serves requests until the connection ends (end of stream, error, protocol error,
  // Shutdown()), then reports the end of its session to the host, if it had one, and closes
  // the socket. Called once, on the connection's own thread.
  void Run();

  // Wakes the connection's thread from whatever it waits on (a request, room to write, the
  // client reading earlier replies); the thread then ends the connection. Idempotent.
  void Shutdown();

  [[nodiscard]] std::uint64_t id() const { return id_; }

 private:
  // The answer to one request.
  struct Reply {
    v1::SessionMessage message;
    UniqueFd fd;                              // Travels with the reply when valid.
    std::optional<std::string> close_reason;  // Set: close the connection once it is sent.
  };

  // Serves requests until the connection ends; returns why it ended.
  [[nodiscard]] std::string Serve();
  [[nodiscard]] Reply Handle(Frame frame);
  [[nodiscard]] Reply HandleHello(const v1::SessionMessage& request);
  [[nodiscard]] Reply HandleRequest(std::uint64_t session_id, const v1::SessionMessage& request);
  [[nodiscard]] Reply HandleMapSegment(std::uint64_t session_id, const v1::SessionMessage& request);
  // A publish_batch, refused with RESOURCE_EXHAUSTED before anything is published when its
  // reply might not fit one frame.
  [[nodiscard]] Reply HandlePublishBatch(std::uint64_t session_id,
                                         const v1::SessionMessage& request);
  // The reply to an exchange request: its result in the body `body`, or the error.
  template <typename Response>
  [[nodiscard]] static Reply ReplyWith(std::uint64_t request_id, Result<Response> result,
                                       Response* (v1::SessionMessage::*body)());
  // Logs a protocol violation; the reply is INVALID_ARGUMENT and closes the connection.
  [[nodiscard]] Reply RejectProtocol(std::uint64_t request_id, const std::string& message) const;
  [[nodiscard]] static Reply ErrorReply(std::uint64_t request_id, const Error& error,
                                        bool close_after);
  // Writes `reply`, blocking until the socket has taken all of it. A reply that carries a
  // descriptor is sent only once the client has read every earlier reply: a descriptor in
  // a reply the client has not read is charged to the daemon (in-flight SCM_RIGHTS count
  // against our RLIMIT_NOFILE), so a client that sends requests without reading the
  // replies could starve every other session. Well-behaved clients, which read each reply
  // before the next request, never wait for that.
  [[nodiscard]] Status Send(const Reply& reply);
  [[nodiscard]] Status WaitUntilEarlierRepliesAreRead();
  [[nodiscard]] bool shutting_down() const {
    return shutting_down_.load(std::memory_order_relaxed);
  }

  Core& core_;  // Outlives the connection's thread (which holds a reference to it).
  const std::uint64_t id_;
  const PeerCredentials peer_;
  const int socket_fd_;  // socket_'s descriptor, used by the connection's thread.

  std::mutex socket_mutex_;
  UniqueFd socket_;  // Guarded by socket_mutex_; closed by the thread when it ends.
  std::atomic<bool> shutting_down_{false};

  // Used by the connection's thread only.
  std::optional<std::uint64_t> session_id_;  // Set once the host opened the session.
  FrameReader reader_;                       // One recvmsg per request, usually.
  std::vector<std::uint8_t> reply_payload_;
};

// ---- Core ----

Status SessionServer::Core::Listen(UniqueFd listener) {
  std::lock_guard lock(mutex_);
  boost::system::error_code error;
  (void)acceptor_.assign(stream_protocol(), listener.get(), error);  // Returns `error`.
  if (error) return InternalError(fmt::format("assign the listening socket: {}", error.message()));
  (void)listener.Release();  // The acceptor owns it now.
  ArmAcceptLocked();
  return {};
}

void SessionServer::Core::Stop() {
  std::lock_guard stopping(stop_mutex_);
  std::vector<std::shared_ptr<Connection>> open;
  bool stopping_now = false;
  {
    std::lock_guard lock(mutex_);
    if (!stopped_) {
      stopped_ = true;
      stopping_now = true;
      boost::system::error_code ignored;
      (void)acceptor_.close(ignored);  // Returns `ignored`.
      (void)retry_timer_.cancel();     // The count of handlers it cancelled.
    }
    for (auto& [id, served] : connections_) open.push_back(served.connection);
  }
  if (stopping_now) {
    RemoveSocketFile();
    spdlog::debug("session server on {}: stopped", socket_path_);
  }
  for (const auto& connection : open) connection->Shutdown();
  open.clear();
  std::vector<std::thread> ended;
  {
    std::unique_lock lock(mutex_);
    connections_finished_.wait(lock, [this] { return connections_.empty(); });
    ended.swap(ended_threads_);
  }
  // A thread in `ended` may still be joining the one that ended before it: joining it
  // waits for that too.
  for (std::thread& thread : ended) thread.join();
  // An accept handler that already runs may still be adding a connection (it finds the
  // server stopped); wait for it, unless it could be our caller (waiting would never end).
  if (!io_context_.get_executor().running_in_this_thread()) {
    std::unique_lock lock(mutex_);
    handlers_finished_.wait(lock, [this] { return running_handlers_ == 0; });
  }
}

std::size_t SessionServer::Core::connection_count() const {
  std::lock_guard lock(mutex_);
  return connections_.size();
}

void SessionServer::Core::Finished(std::uint64_t connection_id) {
  std::vector<std::thread> earlier;
  {
    std::lock_guard lock(mutex_);
    earlier.swap(ended_threads_);
    if (auto served = connections_.find(connection_id); served != connections_.end()) {
      ended_threads_.push_back(std::move(served->second.thread));
      connections_.erase(served);
    }
    if (connections_.empty()) connections_finished_.notify_all();
  }
  for (std::thread& thread : earlier) thread.join();
}

bool SessionServer::Core::EnterHandler() {
  std::lock_guard lock(mutex_);
  if (stopped_) return false;
  ++running_handlers_;
  return true;
}

void SessionServer::Core::LeaveHandler() {
  std::lock_guard lock(mutex_);
  if (--running_handlers_ == 0) handlers_finished_.notify_all();
}

void SessionServer::Core::ArmAcceptLocked() {
  acceptor_.async_wait(stream_protocol::acceptor::wait_read,
                       [self = shared_from_this()](const boost::system::error_code& error) {
                         self->OnListenerReady(error);
                       });
}

void SessionServer::Core::ArmRetryLocked() {
  retry_timer_.expires_after(kAcceptRetryDelay);
  retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error) return;
    std::lock_guard lock(self->mutex_);
    if (!self->stopped_) self->ArmAcceptLocked();
  });
}

void SessionServer::Core::OnListenerReady(const boost::system::error_code& error) {
  if (error == boost::asio::error::operation_aborted) return;
  HandlerScope scope(*this);
  if (!scope.entered()) return;
  std::vector<UniqueFd> accepted;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    bool retry_later = false;
    if (error) {
      spdlog::warn("session server on {}: waiting for connections failed: {}", socket_path_,
                   error.message());
      retry_later = true;
    } else {
      for (int i = 0; i < kMaxAcceptsPerWakeup; ++i) {
        // Blocking: the connection's thread waits in recvmsg and sendmsg.
        const int socket = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
        if (socket >= 0) {
          accepted.emplace_back(socket);
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        spdlog::warn("session server on {}: {}", socket_path_,
                     ErrnoError("accept4", "", errno).ToString());
        retry_later = true;
        break;
      }
    }
    if (retry_later) {
      ArmRetryLocked();
    } else {
      ArmAcceptLocked();
    }
  }
  for (UniqueFd& socket : accepted) AddConnection(std::move(socket));
}

void SessionServer::Core::AddConnection(UniqueFd socket) {
  auto peer = ReadPeerCredentials(socket.get());
  if (!peer) {
    spdlog::warn("session server on {}: dropped a connection: {}", socket_path_,
                 peer.error().ToString());
    return;
  }
  std::lock_guard lock(mutex_);
  if (stopped_) return;  // `socket` closes.
  const std::uint64_t id = next_connection_id_++;
  auto connection = std::make_shared<Connection>(*this, id, std::move(socket), *peer);
  std::thread thread;
  try {
    // Started under mutex_, so the thread's Finished() finds it in connections_.
    thread = std::thread([core = shared_from_this(), connection] {
      connection->Run();
      core->Finished(connection->id());
    });
  } catch (const std::system_error& error) {
    spdlog::warn("session server on {}: dropped a connection (pid {}): no thread to serve it: {}",
                 socket_path_, peer->pid, error.what());
    return;  // `connection` closes its socket.
  }
  ::pthread_setname_np(thread.native_handle(), "hurrayd-session");
  connections_.emplace(id,
                       Served{.connection = std::move(connection), .thread = std::move(thread)});
}

void SessionServer::Core::RemoveSocketFile() const {
  struct stat info{};
  if (::lstat(socket_path_.c_str(), &info) != 0) return;
  if (info.st_dev != socket_file_.device || info.st_ino != socket_file_.inode) {
    spdlog::warn("session server: {} is no longer our socket file; left in place", socket_path_);
    return;
  }
  if (::unlink(socket_path_.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("session server: {}", ErrnoError("unlink", socket_path_, errno).ToString());
  }
}

// ---- Connection ----

void SessionServer::Connection::Run() {
  const LogContext log_context({.pid = peer_.pid, .uid = peer_.uid});
  spdlog::debug("session connection {}: connected (pid {}, uid {}, gid {})", id_, peer_.pid,
                peer_.uid, peer_.gid);
  const std::string reason = Serve();
  const LogContext session_log_context(
      {.session = session_id_.value_or(0), .pid = peer_.pid, .uid = peer_.uid});
  spdlog::debug("session connection {} (pid {}): closed: {}", id_, peer_.pid, reason);
  // Before the socket closes, so that a client that sees the end of stream finds its
  // leases and allocations already returned.
  if (session_id_) core_.host().CloseSession(*session_id_);
  std::lock_guard lock(socket_mutex_);
  socket_.Reset();
}

void SessionServer::Connection::Shutdown() {
  shutting_down_.store(true, std::memory_order_relaxed);
  std::lock_guard lock(socket_mutex_);
  // Not close(): the thread may be inside a call on the descriptor. shutdown() wakes it
  // (recvmsg sees the end of stream, sendmsg EPIPE, poll POLLHUP), and the client sees the
  // end of stream.
  if (socket_) ::shutdown(socket_.get(), SHUT_RDWR);
}

std::string SessionServer::Connection::Serve() {
  while (true) {
    auto frame = reader_.Next(socket_fd_);
    if (!frame) {
      if (shutting_down()) return "the server stopped";
      // The client went away (exit, crash, kill -9): the normal end of a session.
      if (frame.error().code() != StatusCode::kUnavailable) {
        spdlog::warn("session connection {} (pid {}): {}; closing", id_, peer_.pid,
                     frame.error().ToString());
      }
      return frame.error().message();
    }
    Reply reply = Handle(std::move(*frame));
    if (auto sent = Send(reply); !sent) {
      if (shutting_down()) return "the server stopped";
      if (sent.error().code() != StatusCode::kUnavailable) {
        spdlog::warn("session connection {} (pid {}): reply not sent: {}", id_, peer_.pid,
                     sent.error().ToString());
      }
      return sent.error().message();
    }
    if (reply.close_reason) return *std::move(reply.close_reason);
  }
}

SessionServer::Connection::Reply SessionServer::Connection::Handle(Frame frame) {
  if (frame.fd) {
    spdlog::warn("session connection {} (pid {}): the client sent a file descriptor; closed it",
                 id_, peer_.pid);
    frame.fd.Reset();
  }
  v1::SessionMessage request;
  if (!request.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()))) {
    return RejectProtocol(0, fmt::format("session message of {} bytes does not parse as a "
                                         "hurray.v1.SessionMessage",
                                         frame.payload.size()));
  }
  const LogContext log_context({.session = session_id_.value_or(0),
                                .pid = peer_.pid,
                                .uid = peer_.uid,
                                .tensor = TensorNameOf(request)});
  if (session_id_) return HandleRequest(*session_id_, request);
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
  auto grant = core_.host().OpenSession(peer_, hello.client_name());
  if (!grant) {
    spdlog::info("session connection {} (pid {}, uid {}): session refused: {}", id_, peer_.pid,
                 peer_.uid, grant.error().ToString());
    return ErrorReply(request.request_id(), grant.error(), /*close_after=*/true);
  }
  session_id_ = grant->session_id;
  spdlog::debug("session connection {} (pid {}): session {} opened for '{}'", id_, peer_.pid,
                grant->session_id, hello.client_name());
  Reply reply;
  reply.message.set_request_id(request.request_id());
  v1::SessionWelcome& welcome = *reply.message.mutable_welcome();
  welcome.set_token(std::move(grant->token));
  welcome.set_session_id(grant->session_id);
  welcome.set_daemon_epoch(core_.daemon_epoch());
  welcome.set_pid(static_cast<std::uint32_t>(peer_.pid));
  welcome.set_uid(peer_.uid);
  welcome.set_gid(peer_.gid);
  return reply;
}

SessionServer::Connection::Reply SessionServer::Connection::HandleRequest(
    std::uint64_t session_id, const v1::SessionMessage& request) {
  SessionHost& host = core_.host();
  switch (request.body_case()) {
    case v1::SessionMessage::kMapSegment:
      return HandleMapSegment(session_id, request);
    case v1::SessionMessage::kAllocate:
      return ReplyWith(request.request_id(), host.Allocate(session_id, request.allocate()),
                       &v1::SessionMessage::mutable_allocate_reply);
    case v1::SessionMessage::kPublish:
      return ReplyWith(request.request_id(), host.Publish(session_id, request.publish()),
                       &v1::SessionMessage::mutable_publish_reply);
    case v1::SessionMessage::kPublishBatch:
      return HandlePublishBatch(session_id, request);
    case v1::SessionMessage::kAcquire:
      return ReplyWith(request.request_id(), host.AcquireNow(session_id, request.acquire()),
                       &v1::SessionMessage::mutable_acquire_reply);
    case v1::SessionMessage::kRelease:
      return ReplyWith(request.request_id(), host.Release(session_id, request.release()),
                       &v1::SessionMessage::mutable_release_reply);
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
  return ReplyWith(request.request_id(), core_.host().PublishBatch(session_id, batch),
                   &v1::SessionMessage::mutable_publish_batch_reply);
}

SessionServer::Connection::Reply SessionServer::Connection::HandleMapSegment(
    std::uint64_t session_id, const v1::SessionMessage& request) {
  const v1::MapSegmentRequest& map = request.map_segment();
  auto access = core_.host().GrantSegment(session_id, map.segment_id(), map.writable());
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

Status SessionServer::Connection::Send(const Reply& reply) {
  reply_payload_.resize(reply.message.ByteSizeLong());
  reply.message.SerializeWithCachedSizesToArray(reply_payload_.data());
  if (reply.fd) {
    if (auto drained = WaitUntilEarlierRepliesAreRead(); !drained) return drained;
  }
  return SendFrame(socket_fd_, reply_payload_, reply.fd ? reply.fd.get() : -1);
}

Status SessionServer::Connection::WaitUntilEarlierRepliesAreRead() {
  std::chrono::milliseconds delay = kFirstDrainDelay;
  while (true) {
    int unread = 0;
    // On a unix socket, SIOCOUTQ counts the bytes sent and not yet read by the peer.
    if (::ioctl(socket_fd_, SIOCOUTQ, &unread) != 0 || unread == 0) return {};
    if (delay == kFirstDrainDelay) {
      spdlog::debug(
          "session connection {} (pid {}): waiting for the client to read its earlier replies", id_,
          peer_.pid);
    }
    // Sleeps for `delay`, or less when the connection hangs up (the client closed it, or
    // Shutdown()): poll reports POLLHUP and POLLERR whatever the events asked for.
    pollfd entry{.fd = socket_fd_, .events = 0, .revents = 0};
    if (::poll(&entry, 1, static_cast<int>(delay.count())) > 0) {
      return UnavailableError("the connection ended while a reply waited for the client");
    }
    delay = std::min(delay * 2, kLastDrainDelay);
  }
}

// ---- SessionServer ----

Result<std::unique_ptr<SessionServer>> SessionServer::Create(
    boost::asio::io_context& io_context, std::string socket_path, SessionHost& host,
    std::uint64_t daemon_epoch, std::uint32_t socket_mode, std::uint32_t directory_mode) {
  auto address = UnixSocketAddress(socket_path);
  if (!address) return std::unexpected(address.error().WithContext("socket_path"));
  HURRAY_ASSIGN_OR_RETURN(const bool removed_stale, PrepareSocketPath(socket_path, directory_mode));
  if (removed_stale) spdlog::info("session server: removed the stale socket file {}", socket_path);
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener) return std::unexpected(ErrnoError("socket", "", errno));
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    return std::unexpected(ErrnoError("bind", socket_path, errno));
  }
  // From here on the socket file is ours: remove it if we fail.
  auto fail = [&socket_path](Error error) -> Result<std::unique_ptr<SessionServer>> {
    ::unlink(socket_path.c_str());
    return std::unexpected(std::move(error));
  };
  // Before listen(), so that no client connects through a socket of the umask's mode.
  if (::chmod(socket_path.c_str(), static_cast<mode_t>(socket_mode)) != 0) {
    return fail(ErrnoError("chmod", socket_path, errno));
  }
  struct stat info{};
  if (::lstat(socket_path.c_str(), &info) != 0) {
    return fail(ErrnoError("lstat", socket_path, errno));
  }
  if (::listen(listener.get(), SOMAXCONN) != 0) {
    return fail(ErrnoError("listen", socket_path, errno));
  }
  auto core = std::make_shared<Core>(io_context, socket_path, host, daemon_epoch,
                                     FileIdentity{.device = info.st_dev, .inode = info.st_ino});
  if (auto listening = core->Listen(std::move(listener)); !listening) {
    return fail(std::move(listening).error());
  }
  spdlog::debug("session server: listening on {}", socket_path);
  return std::unique_ptr<SessionServer>(new SessionServer(std::move(core)));
}

SessionServer::SessionServer(std::shared_ptr<Core> core) : core_(std::move(core)) {}

// Stop() throws only where a mutex cannot be locked (std::system_error), which no recovery
// could follow.
SessionServer::~SessionServer() { Stop(); }  // NOLINT(bugprone-exception-escape)

void SessionServer::Stop() { core_->Stop(); }

std::size_t SessionServer::connection_count() const { return core_->connection_count(); }

const std::string& SessionServer::socket_path() const { return core_->socket_path(); }

}  // namespace hurray::daemon
