#include "session_server.h"

#include <fmt/format.h>
#include <linux/sockios.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/session_wire.h"
#include "hurray/unique_fd.h"
#include "hurray/v1/session.pb.h"

namespace hurray::daemon {
namespace {

using boost::asio::local::stream_protocol;

// After accept4 fails for lack of descriptors or memory, the pending connection stays
// queued and the listener stays readable: wait a little instead of spinning on it.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// Connections accepted per wakeup before other handlers get a turn.
constexpr int kMaxAcceptsPerWakeup = 64;
// How often a reply with a descriptor checks whether the client has read the earlier
// replies: the first delay, doubled up to the last.
constexpr std::chrono::milliseconds kFirstDrainDelay{1};
constexpr std::chrono::milliseconds kLastDrainDelay{100};
constexpr mode_t kSocketFileMode = 0660;
constexpr mode_t kDirectoryMode = 0755;

// The name of the message's body field ("map_segment"), from the message's own descriptor.
std::string BodyName(const v1::SessionMessage& message) {
  const auto* body = message.GetReflection()->GetOneofFieldDescriptor(
      message, message.GetDescriptor()->FindOneofByName("body"));
  return body == nullptr ? "no body" : body->name();
}

// mkdir with mode 0755 (whatever the umask), or nothing when it exists.
Status MakeDirectory(const std::string& directory) {
  if (::mkdir(directory.c_str(), kDirectoryMode) == 0) {
    if (::chmod(directory.c_str(), kDirectoryMode) != 0) {
      return std::unexpected(SystemCallError(fmt::format("chmod {}", directory), errno));
    }
    return {};
  }
  if (errno == EEXIST) return {};
  return std::unexpected(SystemCallError(fmt::format("mkdir {}", directory), errno));
}

// Creates the directory of `socket_path` and any missing parent, each with mode 0755.
Status CreateParentDirectories(const std::string& socket_path) {
  const std::string directory = std::filesystem::path(socket_path).parent_path().string();
  if (directory.empty()) return {};
  struct stat info {};
  if (::stat(directory.c_str(), &info) == 0) return {};
  for (std::size_t slash = directory.find('/', 1); slash != std::string::npos;
       slash = directory.find('/', slash + 1)) {
    if (auto made = MakeDirectory(directory.substr(0, slash)); !made) return made;
  }
  return MakeDirectory(directory);
}

// Removes a socket file nobody listens on; refuses a live socket or a file of another kind.
Status RemoveStaleSocket(const std::string& path, const sockaddr_un& address) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return {};
    return std::unexpected(SystemCallError(fmt::format("lstat {}", path), errno));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return FailedPreconditionError(fmt::format("socket_path {} exists and is not a socket", path));
  }
  // Non-blocking, so that a live listener with a full backlog reads as live, not as a hang.
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe) return std::unexpected(SystemCallError("socket", errno));
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 ||
      errno == EAGAIN || errno == EINPROGRESS) {
    return std::unexpected(
        Error(StatusCode::kAlreadyExists,
              fmt::format("socket_path {} is in use: a process listens on it", path)));
  }
  if (errno != ECONNREFUSED) {
    return std::unexpected(SystemCallError(fmt::format("connect {}", path), errno));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return std::unexpected(SystemCallError(fmt::format("unlink {}", path), errno));
  }
  spdlog::info("session server: removed the stale socket file {}", path);
  return {};
}

// Which file a path named when we looked, to remove only our own socket file later.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
};

}  // namespace

// The server's state, shared by the SessionServer, the accept loop's handlers and every
// connection. Thread-safe; everything mutable is guarded by mutex_.
class SessionServer::Core : public std::enable_shared_from_this<Core> {
 public:
  // Counts a running handler so that Stop() can wait for it. entered() is false once the
  // server is stopped: the handler must then do nothing.
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
  // A closed connection leaves the set.
  void Forget(std::uint64_t connection_id);

  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }
  [[nodiscard]] SessionHost& host() const { return host_; }
  [[nodiscard]] std::uint64_t daemon_epoch() const { return daemon_epoch_; }

 private:
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

  mutable std::mutex mutex_;
  stream_protocol::acceptor acceptor_;                                // Guarded by mutex_.
  boost::asio::steady_timer retry_timer_;                             // Guarded by mutex_.
  std::map<std::uint64_t, std::shared_ptr<Connection>> connections_;  // Guarded by mutex_.
  std::uint64_t next_connection_id_ = 1;                              // Guarded by mutex_.
  bool stopped_ = false;                                              // Guarded by mutex_.
  std::size_t running_handlers_ = 0;                                  // Guarded by mutex_.
  std::condition_variable handlers_finished_;
};

// One client connection: reads a request, answers it, reads the next. Thread-safe: its
// handlers never overlap (one outstanding wait at a time), and Close() may come from any
// thread; the socket and the session state are guarded by mutex_.
class SessionServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Core> core, std::uint64_t id, stream_protocol::socket socket,
             PeerCredentials peer)
      : core_(std::move(core)),
        id_(id),
        peer_(peer),
        socket_(std::move(socket)),
        drain_timer_(socket_.get_executor()) {}

  // Waits for the hello.
  void Start();

  // Closes the socket and reports the end of the session to the host, at once or, when a
  // handler of this connection is running, when it finishes. Idempotent.
  void Close(std::string_view reason);

 private:
  // Marks a handler as running; false when the connection is already closed.
  [[nodiscard]] bool Begin();
  // Ends a handler; reports the session's end if the connection closed meanwhile.
  void End();

  void ArmRead();
  void OnReadable(const boost::system::error_code& error);
  void OnWritable(const boost::system::error_code& error);
  void ReadRequest();
  void Handle(Frame frame);
  void HandleHello(const v1::SessionMessage& request);
  void HandleRequest(std::uint64_t session_id, const v1::SessionMessage& request);
  void HandleMapSegment(std::uint64_t session_id, const v1::SessionMessage& request);
  // Answers an exchange request with its result: the reply body `body`, or an error.
  template <typename Response>
  void ReplyWith(std::uint64_t request_id, Result<Response> result,
                 Response* (v1::SessionMessage::*body)());
  // Logs a protocol violation, answers it with INVALID_ARGUMENT and closes.
  void RejectProtocol(std::uint64_t request_id, const std::string& message);
  void ReplyError(std::uint64_t request_id, const Error& error, bool close_after);
  // Sends `message` (with `fd`, if valid); then reads the next request, or closes when
  // `close_reason` is set.
  void Reply(const v1::SessionMessage& message, UniqueFd fd,
             std::optional<std::string> close_reason);
  void ContinueWrite();
  void OnDrainTimer(const boost::system::error_code& error);
  // Bytes of earlier replies that the client has not read yet.
  [[nodiscard]] int UnreadReplyBytesLocked();

  const std::shared_ptr<Core> core_;
  const std::uint64_t id_;
  const PeerCredentials peer_;

  std::mutex mutex_;
  stream_protocol::socket socket_;           // Guarded by mutex_.
  boost::asio::steady_timer drain_timer_;    // Guarded by mutex_.
  bool closed_ = false;                      // Guarded by mutex_.
  bool handler_running_ = false;             // Guarded by mutex_.
  std::optional<std::uint64_t> session_id_;  // Guarded by mutex_. Set once the host opened it.
  bool session_close_reported_ = false;      // Guarded by mutex_.

  // Used only by the running handler (reads and writes never overlap); the socket calls on
  // them happen under mutex_.
  FrameReceiver receiver_;
  std::vector<std::uint8_t> reply_payload_;
  UniqueFd reply_fd_;
  std::optional<FrameSender> sender_;
  bool reply_started_ = false;  // Some of the reply is written.
  std::chrono::milliseconds drain_delay_ = kFirstDrainDelay;
  std::optional<std::string> close_after_reply_;
};

// ---- Core ----

Status SessionServer::Core::Listen(UniqueFd listener) {
  std::lock_guard lock(mutex_);
  boost::system::error_code error;
  acceptor_.assign(stream_protocol(), listener.get(), error);
  if (error) return InternalError(fmt::format("assign the listening socket: {}", error.message()));
  static_cast<void>(listener.Release());  // The acceptor owns it now.
  ArmAcceptLocked();
  return {};
}

void SessionServer::Core::Stop() {
  std::map<std::uint64_t, std::shared_ptr<Connection>> connections;
  bool stopping_now = false;
  {
    std::lock_guard lock(mutex_);
    if (!stopped_) {
      stopped_ = true;
      stopping_now = true;
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      retry_timer_.cancel();
    }
    connections.swap(connections_);
  }
  if (stopping_now) {
    RemoveSocketFile();
    spdlog::debug("session server on {}: stopped", socket_path_);
  }
  for (auto& [id, connection] : connections) connection->Close("the server stopped");
  // A handler that already runs may still call the host; wait for it, unless it could be
  // our caller (waiting would never end).
  if (!io_context_.get_executor().running_in_this_thread()) {
    std::unique_lock lock(mutex_);
    handlers_finished_.wait(lock, [this] { return running_handlers_ == 0; });
  }
}

std::size_t SessionServer::Core::connection_count() const {
  std::lock_guard lock(mutex_);
  return connections_.size();
}

void SessionServer::Core::Forget(std::uint64_t connection_id) {
  std::lock_guard lock(mutex_);
  connections_.erase(connection_id);
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
        const int socket =
            ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (socket >= 0) {
          accepted.emplace_back(socket);
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        spdlog::warn("session server on {}: {}", socket_path_,
                     SystemCallError("accept4", errno).ToString());
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
  stream_protocol::socket stream(io_context_);
  boost::system::error_code error;
  stream.assign(stream_protocol(), socket.get(), error);
  if (error) {
    spdlog::warn("session server on {}: dropped a connection: assign: {}", socket_path_,
                 error.message());
    return;
  }
  static_cast<void>(socket.Release());  // `stream` owns it now.
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;  // `stream` closes the socket.
    const std::uint64_t id = next_connection_id_++;
    connection = std::make_shared<Connection>(shared_from_this(), id, std::move(stream), *peer);
    connections_.emplace(id, connection);
  }
  connection->Start();
}

void SessionServer::Core::RemoveSocketFile() const {
  struct stat info {};
  if (::lstat(socket_path_.c_str(), &info) != 0) return;
  if (info.st_dev != socket_file_.device || info.st_ino != socket_file_.inode) {
    spdlog::warn("session server: {} is no longer our socket file; left in place", socket_path_);
    return;
  }
  if (::unlink(socket_path_.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("session server: {}",
                 SystemCallError(fmt::format("unlink {}", socket_path_), errno).ToString());
  }
}

// ---- Connection ----

void SessionServer::Connection::Start() {
  spdlog::debug("session connection {}: connected (pid {}, uid {}, gid {})", id_, peer_.pid,
                peer_.uid, peer_.gid);
  ArmRead();
}

void SessionServer::Connection::Close(std::string_view reason) {
  std::optional<std::uint64_t> ended_session;
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
    drain_timer_.cancel();
    if (!handler_running_ && session_id_ && !session_close_reported_) {
      session_close_reported_ = true;
      ended_session = session_id_;
    }
  }
  spdlog::debug("session connection {} (pid {}): closed: {}", id_, peer_.pid, reason);
  if (ended_session) core_->host().CloseSession(*ended_session);
  core_->Forget(id_);
}

bool SessionServer::Connection::Begin() {
  std::lock_guard lock(mutex_);
  if (closed_) return false;
  handler_running_ = true;
  return true;
}

void SessionServer::Connection::End() {
  std::optional<std::uint64_t> ended_session;
  {
    std::lock_guard lock(mutex_);
    handler_running_ = false;
    if (closed_ && session_id_ && !session_close_reported_) {
      session_close_reported_ = true;
      ended_session = session_id_;
    }
  }
  if (ended_session) core_->host().CloseSession(*ended_session);
}

void SessionServer::Connection::ArmRead() {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  socket_.async_wait(stream_protocol::socket::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& error) {
                       self->OnReadable(error);
                     });
}

void SessionServer::Connection::OnReadable(const boost::system::error_code& error) {
  if (error == boost::asio::error::operation_aborted) return;
  Core::HandlerScope scope(*core_);
  if (!scope.entered() || !Begin()) return;
  if (error) {
    spdlog::warn("session connection {} (pid {}): waiting for a request failed: {}", id_, peer_.pid,
                 error.message());
    Close(error.message());
  } else {
    ReadRequest();
  }
  End();
}

void SessionServer::Connection::OnWritable(const boost::system::error_code& error) {
  if (error == boost::asio::error::operation_aborted) return;
  Core::HandlerScope scope(*core_);
  if (!scope.entered() || !Begin()) return;
  if (error) {
    spdlog::warn("session connection {} (pid {}): waiting to reply failed: {}", id_, peer_.pid,
                 error.message());
    Close(error.message());
  } else {
    ContinueWrite();
  }
  End();
}

void SessionServer::Connection::ReadRequest() {
  Result<std::optional<Frame>> frame = std::nullopt;
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    frame = receiver_.Continue(socket_.native_handle());
    if (frame && !frame->has_value()) {
      socket_.async_wait(stream_protocol::socket::wait_read,
                         [self = shared_from_this()](const boost::system::error_code& error) {
                           self->OnReadable(error);
                         });
      return;
    }
  }
  if (!frame) {
    // The client went away (exit, crash, kill -9): the normal end of a session.
    if (frame.error().code() != StatusCode::kUnavailable) {
      spdlog::warn("session connection {} (pid {}): {}; closing", id_, peer_.pid,
                   frame.error().ToString());
    }
    Close(frame.error().message());
    return;
  }
  Handle(std::move(**frame));
}

void SessionServer::Connection::Handle(Frame frame) {
  if (frame.fd) {
    spdlog::warn("session connection {} (pid {}): the client sent a file descriptor; closed it",
                 id_, peer_.pid);
    frame.fd.Reset();
  }
  v1::SessionMessage request;
  if (!request.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()))) {
    RejectProtocol(0, fmt::format("session message of {} bytes does not parse as a "
                                  "hurray.v1.SessionMessage",
                                  frame.payload.size()));
    return;
  }
  std::optional<std::uint64_t> session_id;
  {
    std::lock_guard lock(mutex_);
    session_id = session_id_;
  }
  if (session_id) {
    HandleRequest(*session_id, request);
  } else {
    HandleHello(request);
  }
}

void SessionServer::Connection::HandleHello(const v1::SessionMessage& request) {
  if (request.body_case() != v1::SessionMessage::kHello) {
    RejectProtocol(
        request.request_id(),
        fmt::format("the first session message must be a hello, not {}", BodyName(request)));
    return;
  }
  const v1::SessionHello& hello = request.hello();
  if (hello.protocol_version() != kSessionProtocolVersion) {
    RejectProtocol(request.request_id(),
                   fmt::format("hello.protocol_version {} is not supported; this daemon speaks {}",
                               hello.protocol_version(), kSessionProtocolVersion));
    return;
  }
  if (hello.client_name().size() > kMaxSessionClientNameBytes) {
    RejectProtocol(request.request_id(),
                   fmt::format("hello.client_name is {} bytes; the limit is {}",
                               hello.client_name().size(), kMaxSessionClientNameBytes));
    return;
  }
  auto grant = core_->host().OpenSession(peer_, hello.client_name());
  if (!grant) {
    spdlog::info("session connection {} (pid {}, uid {}): session refused: {}", id_, peer_.pid,
                 peer_.uid, grant.error().ToString());
    ReplyError(request.request_id(), grant.error(), /*close_after=*/true);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    session_id_ = grant->session_id;
  }
  spdlog::debug("session connection {} (pid {}): session {} opened for '{}'", id_, peer_.pid,
                grant->session_id, hello.client_name());
  v1::SessionMessage reply;
  reply.set_request_id(request.request_id());
  v1::SessionWelcome& welcome = *reply.mutable_welcome();
  welcome.set_token(std::move(grant->token));
  welcome.set_session_id(grant->session_id);
  welcome.set_daemon_epoch(core_->daemon_epoch());
  welcome.set_pid(static_cast<std::uint32_t>(peer_.pid));
  welcome.set_uid(peer_.uid);
  welcome.set_gid(peer_.gid);
  Reply(reply, UniqueFd(), std::nullopt);
}

void SessionServer::Connection::HandleRequest(std::uint64_t session_id,
                                              const v1::SessionMessage& request) {
  SessionHost& host = core_->host();
  switch (request.body_case()) {
    case v1::SessionMessage::kMapSegment:
      HandleMapSegment(session_id, request);
      return;
    case v1::SessionMessage::kAllocate:
      ReplyWith(request.request_id(), host.Allocate(session_id, request.allocate()),
                &v1::SessionMessage::mutable_allocate_reply);
      return;
    case v1::SessionMessage::kPublish:
      ReplyWith(request.request_id(), host.Publish(session_id, request.publish()),
                &v1::SessionMessage::mutable_publish_reply);
      return;
    case v1::SessionMessage::kAcquire:
      ReplyWith(request.request_id(), host.AcquireNow(session_id, request.acquire()),
                &v1::SessionMessage::mutable_acquire_reply);
      return;
    case v1::SessionMessage::kRelease:
      ReplyWith(request.request_id(), host.Release(session_id, request.release()),
                &v1::SessionMessage::mutable_release_reply);
      return;
    case v1::SessionMessage::kCancelAllocation:
      ReplyWith(request.request_id(),
                host.CancelAllocation(session_id, request.cancel_allocation()),
                &v1::SessionMessage::mutable_cancel_allocation_reply);
      return;
    default:
      RejectProtocol(request.request_id(),
                     fmt::format("session message {}: {} is not a request this daemon serves",
                                 request.request_id(), BodyName(request)));
  }
}

template <typename Response>
void SessionServer::Connection::ReplyWith(std::uint64_t request_id, Result<Response> result,
                                          Response* (v1::SessionMessage::*body)()) {
  if (!result) {
    ReplyError(request_id, result.error(), /*close_after=*/false);
    return;
  }
  v1::SessionMessage reply;
  reply.set_request_id(request_id);
  *(reply.*body)() = std::move(*result);
  Reply(reply, UniqueFd(), std::nullopt);
}

void SessionServer::Connection::HandleMapSegment(std::uint64_t session_id,
                                                 const v1::SessionMessage& request) {
  const v1::MapSegmentRequest& map = request.map_segment();
  auto access = core_->host().GrantSegment(session_id, map.segment_id(), map.writable());
  if (access && !access->fd.valid()) {
    access = InternalError(
        fmt::format("segment {}: the daemon granted no descriptor", map.segment_id()));
  }
  if (!access) {
    spdlog::debug("session connection {} (pid {}): map_segment {}: {}", id_, peer_.pid,
                  map.segment_id(), access.error().ToString());
    ReplyError(request.request_id(), access.error(), /*close_after=*/false);
    return;
  }
  v1::SessionMessage reply;
  reply.set_request_id(request.request_id());
  v1::SegmentGranted& granted = *reply.mutable_segment_granted();
  granted.set_segment_id(map.segment_id());
  granted.set_segment_size(access->segment_size);
  granted.set_writable(access->writable);
  granted.set_page_size(access->page_size);
  Reply(reply, std::move(access->fd), std::nullopt);
}

void SessionServer::Connection::RejectProtocol(std::uint64_t request_id,
                                               const std::string& message) {
  spdlog::warn("session connection {} (pid {}): {}; closing", id_, peer_.pid, message);
  ReplyError(request_id, Error(StatusCode::kInvalidArgument, message), /*close_after=*/true);
}

void SessionServer::Connection::ReplyError(std::uint64_t request_id, const Error& error,
                                           bool close_after) {
  v1::SessionMessage reply;
  reply.set_request_id(request_id);
  v1::SessionError& body = *reply.mutable_error();
  body.set_code(static_cast<std::uint32_t>(error.code()));
  body.set_message(error.message());
  Reply(reply, UniqueFd(),
        close_after ? std::optional<std::string>(error.ToString()) : std::nullopt);
}

void SessionServer::Connection::Reply(const v1::SessionMessage& message, UniqueFd fd,
                                      std::optional<std::string> close_reason) {
  reply_payload_.resize(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(reply_payload_.data());
  reply_fd_ = std::move(fd);
  close_after_reply_ = std::move(close_reason);
  sender_.emplace(reply_payload_, reply_fd_.get());
  reply_started_ = false;
  drain_delay_ = kFirstDrainDelay;
  ContinueWrite();
}

void SessionServer::Connection::ContinueWrite() {
  Result<bool> done = false;
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    // A descriptor in a reply that the client has not read is charged to the daemon
    // (in-flight SCM_RIGHTS count against our RLIMIT_NOFILE), so a client that sends
    // requests without reading the replies could starve every other session. Send one only
    // once the client has read all that came before; well-behaved clients, which read each
    // reply before the next request, never wait here.
    if (!reply_started_ && reply_fd_ && UnreadReplyBytesLocked() > 0) {
      if (drain_delay_ == kFirstDrainDelay) {
        spdlog::debug(
            "session connection {} (pid {}): waiting for the client to read its "
            "earlier replies",
            id_, peer_.pid);
      }
      drain_timer_.expires_after(drain_delay_);
      drain_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
        self->OnDrainTimer(error);
      });
      drain_delay_ = std::min(drain_delay_ * 2, kLastDrainDelay);
      return;
    }
    reply_started_ = true;
    done = sender_->Continue(socket_.native_handle());
    if (done && !*done) {
      socket_.async_wait(stream_protocol::socket::wait_write,
                         [self = shared_from_this()](const boost::system::error_code& error) {
                           self->OnWritable(error);
                         });
      return;
    }
  }
  sender_.reset();
  reply_fd_.Reset();  // The kernel holds the client's reference to it now.
  if (!done) {
    if (done.error().code() != StatusCode::kUnavailable) {
      spdlog::warn("session connection {} (pid {}): reply not sent: {}", id_, peer_.pid,
                   done.error().ToString());
    }
    Close(done.error().message());
    return;
  }
  if (close_after_reply_) {
    Close(*close_after_reply_);
    return;
  }
  ArmRead();
}

void SessionServer::Connection::OnDrainTimer(const boost::system::error_code& error) {
  if (error == boost::asio::error::operation_aborted) return;
  Core::HandlerScope scope(*core_);
  if (!scope.entered() || !Begin()) return;
  ContinueWrite();
  End();
}

int SessionServer::Connection::UnreadReplyBytesLocked() {
  int unread = 0;
  // On a unix socket, SIOCOUTQ counts the bytes sent and not yet read by the peer.
  if (::ioctl(socket_.native_handle(), SIOCOUTQ, &unread) != 0) return 0;
  return unread;
}

// ---- SessionServer ----

Result<std::unique_ptr<SessionServer>> SessionServer::Create(boost::asio::io_context& io_context,
                                                             std::string socket_path,
                                                             SessionHost& host,
                                                             std::uint64_t daemon_epoch) {
  auto address = UnixSocketAddress(socket_path);
  if (!address) return std::unexpected(address.error().WithContext("socket_path"));
  if (auto made = CreateParentDirectories(socket_path); !made) {
    return std::unexpected(std::move(made).error());
  }
  if (auto removed = RemoveStaleSocket(socket_path, *address); !removed) {
    return std::unexpected(std::move(removed).error());
  }
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener) return std::unexpected(SystemCallError("socket", errno));
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    return std::unexpected(SystemCallError(fmt::format("bind {}", socket_path), errno));
  }
  // From here on the socket file is ours: remove it if we fail.
  auto fail = [&socket_path](Error error) -> Result<std::unique_ptr<SessionServer>> {
    ::unlink(socket_path.c_str());
    return std::unexpected(std::move(error));
  };
  // Before listen(), so that no client connects through a socket of the umask's mode.
  if (::chmod(socket_path.c_str(), kSocketFileMode) != 0) {
    return fail(SystemCallError(fmt::format("chmod {}", socket_path), errno));
  }
  struct stat info {};
  if (::lstat(socket_path.c_str(), &info) != 0) {
    return fail(SystemCallError(fmt::format("lstat {}", socket_path), errno));
  }
  if (::listen(listener.get(), SOMAXCONN) != 0) {
    return fail(SystemCallError(fmt::format("listen {}", socket_path), errno));
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

SessionServer::~SessionServer() { Stop(); }

void SessionServer::Stop() { core_->Stop(); }

std::size_t SessionServer::connection_count() const { return core_->connection_count(); }

const std::string& SessionServer::socket_path() const { return core_->socket_path(); }

}  // namespace hurray::daemon
