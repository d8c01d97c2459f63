#include "session/session_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/sockios.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "descriptor_reserve.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/fast_path_layout.h"
#include "hurray/ipc/frame.h"
#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/ipc/unix_socket.h"
#include "hurray/v1/session.pb.h"
#include "logging.h"
#include "session/acquire_reply_encoder.h"

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
// Most refused one-way releases a connection keeps for its next reply; later ones until
// then are dropped (the client reports the first, and counts what it is told).
constexpr std::size_t kMaxPendingReleaseFailures = 64;
// A reused frame or reply buffer that grew past this for one large message is given back.
constexpr std::size_t kKeptBufferBytes = std::size_t{64} << 10;

// Which file a path named when we looked, to remove only our own socket file later.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
};

// accept4's errors that say the process or the host ran out of something, which passes.
bool IsExhaustion(int error) {
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

// Writes `error` as a SessionError frame without waiting, to a connection about to be
// closed: the frame is small and the socket new, so it fits unless the client is gone.
void SendParting(int socket, const Error& error) {
  v1::SessionMessage message;
  message.mutable_error()->set_code(static_cast<std::uint32_t>(error.code()));
  message.mutable_error()->set_message(error.message());
  std::vector<std::uint8_t> bytes(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(bytes.data());
  FrameSender sender(bytes, -1);
  (void)sender.Continue(socket);  // Best effort: the connection closes either way.
}

}  // namespace

// Event loops of their own for the connections: each an io_context run by one thread, so
// that the thread woken by a client's request is the one that handles it (an io_context run
// by several threads hands the wait for the next event to another thread each time, which
// costs a second wake-up per request). Connections are spread over them in turn.
// Thread-safe.
class EventLoops {
 public:
  explicit EventLoops(std::size_t count) {
    for (std::size_t i = 0; i < std::max<std::size_t>(count, 1); ++i) {
      // Concurrency hint 1: one thread runs it, so Asio takes no lock to hand events over.
      auto& loop = loops_.emplace_back(std::make_unique<boost::asio::io_context>(1));
      guards_.emplace_back(boost::asio::make_work_guard(*loop));
    }
    for (auto& loop : loops_) {
      threads_.emplace_back([&context = *loop] { context.run(); });
      ::pthread_setname_np(threads_.back().native_handle(), "hurrayd-session");
    }
  }
  ~EventLoops() { Join(); }
  EventLoops(const EventLoops&) = delete;
  EventLoops& operator=(const EventLoops&) = delete;

  // The loop for the next connection.
  [[nodiscard]] boost::asio::io_context& Next() {
    return *loops_[next_.fetch_add(1, std::memory_order_relaxed) % loops_.size()];
  }

  // Lets each loop end once it has no more work (every connection closed, its handlers
  // run), and waits for them. Idempotent; not from a loop's own thread.
  void Join() {
    std::lock_guard lock(join_mutex_);
    guards_.clear();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

  // Whether the calling thread runs one of the loops.
  [[nodiscard]] bool RunningInThisThread() const {
    return std::ranges::any_of(
        loops_, [](const auto& loop) { return loop->get_executor().running_in_this_thread(); });
  }

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> loops_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> next_{0};
  std::mutex join_mutex_;
};

// The server's state, shared by the SessionServer, the accept loop's handlers and every
// connection. Thread-safe; everything mutable is guarded by mutex_.
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
       std::uint64_t daemon_epoch, SessionLimits limits, FileIdentity socket_file,
       std::shared_ptr<const UniqueFd> epoch_hold)
      : io_context_(io_context),
        socket_path_(std::move(socket_path)),
        host_(host),
        daemon_epoch_(daemon_epoch),
        epoch_hold_(std::move(epoch_hold)),
        limits_(limits),
        socket_file_(socket_file),
        loops_(limits.event_loops),
        acceptor_(io_context),
        retry_timer_(io_context) {}

  // Takes the listening socket and starts accepting.
  [[nodiscard]] Status Listen(UniqueFd listener);
  void Stop();
  [[nodiscard]] std::size_t connection_count() const;
  [[nodiscard]] std::uint64_t refused_connection_count() const {
    return refused_connections_.load(std::memory_order_relaxed);
  }
  // A connection has closed: it leaves the set and its uid's count.
  void Finished(std::uint64_t connection_id, uid_t uid);

  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }
  [[nodiscard]] SessionHost& host() const { return host_; }
  [[nodiscard]] std::uint64_t daemon_epoch() const { return daemon_epoch_; }
  // The descriptor a hello that asks gets a duplicate of (EpochHolds), or null.
  [[nodiscard]] const std::shared_ptr<const UniqueFd>& epoch_hold() const { return epoch_hold_; }
  [[nodiscard]] const SessionLimits& limits() const { return limits_; }

 private:
  [[nodiscard]] bool EnterHandler();
  void LeaveHandler();
  void ArmAcceptLocked();
  void ArmRetryLocked();
  void OnListenerReady(const boost::system::error_code& error);
  // Accepts what is queued; false when accepting must pause (the retry timer resumes it).
  [[nodiscard]] bool AcceptQueuedLocked(std::vector<UniqueFd>& accepted);
  // A connection just accepted, admitted or refused against the caps, in the order accepted.
  struct Admission {
    std::shared_ptr<Connection> connection;  // Admitted: start it.
    UniqueFd refused;                        // Refused: answer `why` and close it.
    PeerCredentials peer;
    std::optional<Error> why;
  };
  // Counts `socket` against the caps (or refuses it) under the mutex that accepted it, so
  // that connections are counted in the order the kernel queued them whichever thread runs
  // the next accept; nullopt when it was dropped (logged).
  [[nodiscard]] std::optional<Admission> AdmitLocked(UniqueFd socket);
  // RESOURCE_EXHAUSTED naming the cap a new connection of `peer` would exceed, if any.
  [[nodiscard]] std::optional<Error> CapExceededLocked(const PeerCredentials& peer) const;
  void Refuse(int socket, const PeerCredentials& peer, const Error& error);
  void RemoveSocketFile() const;

  boost::asio::io_context& io_context_;
  const std::string socket_path_;
  SessionHost& host_;
  const std::uint64_t daemon_epoch_;
  const std::shared_ptr<const UniqueFd> epoch_hold_;
  const SessionLimits limits_;
  const FileIdentity socket_file_;
  EventLoops loops_;

  std::mutex stop_mutex_;  // Held by Stop(), so that a second call waits for the first.
  mutable std::mutex mutex_;
  stream_protocol::acceptor acceptor_;                                // Guarded by mutex_.
  boost::asio::steady_timer retry_timer_;                             // Guarded by mutex_.
  std::map<std::uint64_t, std::shared_ptr<Connection>> connections_;  // Guarded by mutex_.
  std::unordered_map<uid_t, std::size_t> connections_per_uid_;        // Guarded by mutex_.
  std::uint64_t next_connection_id_ = 1;                              // Guarded by mutex_.
  bool accept_exhausted_ = false;              // Guarded by mutex_. accept4 ran out; logged once.
  bool told_of_no_pidfd_ = false;              // Guarded by mutex_. OpenPeerPidfd failed.
  bool stopped_ = false;                       // Guarded by mutex_.
  std::size_t running_handlers_ = 0;           // Guarded by mutex_.
  std::condition_variable handlers_finished_;  // running_handlers_ fell to 0.
  std::atomic<std::uint64_t> refused_connections_{0};
};

// One client connection, served by handlers on the io_context's threads: a request is read
// when the socket is readable, handled, and answered without blocking (a reply the socket
// cannot take at once waits for it to be writable), then the socket is waited on again. An
// idle connection costs its socket and this object, no thread. Handlers of one connection
// never run at once: each holds mutex_, which also guards the connection's state.
// Thread-safe.
class SessionServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Served on `loop`. `process`: the peer's pidfd, or none.
  Connection(std::shared_ptr<Core> core, boost::asio::io_context& loop, std::uint64_t id,
             PeerCredentials peer, UniqueFd process)
      : core_(std::move(core)),
        id_(id),
        peer_(peer),
        process_(std::move(process)),
        socket_(loop),
        hello_deadline_(loop),
        frame_deadline_(loop),
        drain_timer_(loop) {}

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Takes the accepted socket; the error of registering it with the io_context.
  [[nodiscard]] Status Assign(UniqueFd socket);

  // Arms the hello deadline and waits for the first request. Called once.
  void Start();

  // Ends the connection now (its session, if it had one, is closed before this returns),
  // waiting for a handler of it that runs. Idempotent.
  void Shutdown();

  [[nodiscard]] std::uint64_t id() const { return id_; }
  [[nodiscard]] uid_t uid() const { return peer_.uid; }

 private:
  // The answer to one request.
  struct Reply {
    v1::SessionMessage message;  // Unless `encoded`.
    // reply_payload_ already holds the encoded message (an acquire reply built by hand).
    bool encoded = false;
    UniqueFd fd;                              // Travels with the reply when valid.
    std::optional<std::string> close_reason;  // Set: close the connection once it is sent.
  };

  // Waits for the socket to be readable, unless a wait for that is armed already.
  void ArmRead();
  void OnReadable(const boost::system::error_code& error);
  void OnWritable(const boost::system::error_code& error);
  void OnDrainTimer(const boost::system::error_code& error);
  void OnHelloDeadline(const boost::system::error_code& error);
  // Arms frame_deadline_ while part of a request waits in the reader, and disarms it once
  // none does; then waits for the socket to be readable.
  void ArmReadAndFrameDeadlineLocked();
  void OnFrameDeadline(const boost::system::error_code& error, std::uint64_t generation);
  // Handles the requests that can be read now, until one must wait (a request not yet
  // complete, a reply the socket cannot take) or the connection closes.
  void ServeLocked();
  // Starts sending reply_; true once it is sent and the connection stays open.
  [[nodiscard]] bool StartReplyLocked();
  // Writes what the socket takes of reply_; true once it is sent and the connection stays
  // open; otherwise it waits for the socket (or has closed the connection).
  [[nodiscard]] bool ContinueReplyLocked();
  // A reply that carries a descriptor is sent only once the client has read every earlier
  // reply: a descriptor in a reply the client has not read is charged to the daemon
  // (in-flight SCM_RIGHTS count against our RLIMIT_NOFILE), so a client that sends
  // requests without reading the replies could starve every other session. Well-behaved
  // clients, which read each reply before the next request, never wait for that.
  [[nodiscard]] bool EarlierRepliesAreRead();
  // Logs `error` unless it is the peer going away, then closes.
  void CloseOnErrorLocked(std::string_view what, const Error& error);
  // Closes the session (host.CloseSession, before the socket closes, so that a client that
  // sees the end of stream finds its leases and allocations already returned), the socket
  // and the timers. Idempotent.
  void CloseLocked(const std::string& reason);

  // The reply to the request in frame_; none for a one-way request.
  [[nodiscard]] std::optional<Reply> HandleLocked();
  [[nodiscard]] Reply HandleHello(const v1::SessionMessage& request);
  [[nodiscard]] std::optional<Reply> HandleRequestLocked(std::uint64_t session_id,
                                                         const v1::SessionMessage& request);
  // An acquire, its reply encoded by the host from the version's stored bytes straight
  // into reply_payload_.
  [[nodiscard]] Reply HandleAcquireLocked(std::uint64_t session_id,
                                          const v1::SessionMessage& request);
  // An acquire with a wait: handed to the host, whose answer (Answer) is sent between two
  // other replies whenever it comes; later requests are served meanwhile.
  void HandleWaitingAcquireLocked(std::uint64_t session_id, const v1::SessionMessage& request);
  // The host's answer to the waiting acquire `request_id`, from whatever thread: queued in
  // answers_ and sent as soon as no other reply is being sent (on this thread when the
  // connection is free, otherwise by the handler that holds it or on the connection's loop).
  void Answer(std::uint64_t request_id, Result<v1::AcquireResponse> result);
  // Sends the queued answers while no other reply is being sent; false when one waits for
  // the socket or the connection has closed.
  [[nodiscard]] bool SendAnswersLocked();
  // A release_one_way: ends every lease it names that is the session's (the host stops a
  // release at the first lease it does not know; the rest then end one at a time), and
  // keeps the refusal, naming the request, for the next reply.
  void ReleaseOneWayLocked(std::uint64_t session_id, const v1::SessionMessage& request);
  // Appends the pending release failures to reply_payload_ (field 30 comes last, so this
  // is where serialization puts them), unless they would take it past the frame limit:
  // then they wait for a later reply.
  void AppendReleaseFailuresLocked();
  [[nodiscard]] Reply HandleMapSegment(std::uint64_t session_id, const v1::SessionMessage& request);
  // The fast path's directory and lease page, their descriptor attached.
  [[nodiscard]] Reply HandleMapDirectory(std::uint64_t session_id,
                                         const v1::SessionMessage& request);
  [[nodiscard]] Reply HandleMapLeasePage(std::uint64_t session_id,
                                         const v1::SessionMessage& request);
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

  [[nodiscard]] int socket_fd() { return socket_.native_handle(); }

  const std::shared_ptr<Core> core_;  // Left when the connection closes (Finished).
  const std::uint64_t id_;
  const PeerCredentials peer_;

  std::mutex mutex_;
  // The peer's pidfd (OpenPeerPidfd), taken at accept; handed to the host with the session
  // it opens. Guarded by mutex_.
  UniqueFd process_;
  stream_protocol::socket socket_;            // Guarded by mutex_.
  boost::asio::steady_timer hello_deadline_;  // Guarded by mutex_.
  // Runs while part of a request frame has come and the rest has not. Guarded by mutex_, as
  // the two below.
  boost::asio::steady_timer frame_deadline_;
  bool frame_deadline_armed_ = false;
  std::uint64_t frame_deadline_generation_ = 0;  // Tells a stale expiry from the armed one.
  bool told_of_descriptors_ = false;             // Logged that the client sent some.
  boost::asio::steady_timer drain_timer_;        // Guarded by mutex_.
  bool closed_ = false;                          // Guarded by mutex_.
  std::optional<std::uint64_t> session_id_;      // Guarded by mutex_. Set once opened.
  // Guarded by mutex_. Closes each descriptor the client sends as it arrives.
  FrameReader reader_{FrameReader::Descriptors::kClose};
  Reply reply_;                              // Guarded by mutex_. The one being sent.
  std::vector<std::uint8_t> reply_payload_;  // Guarded by mutex_. reply_, encoded.
  Frame frame_;                              // Guarded by mutex_. The request being served.
  std::string acquire_body_;                 // Guarded by mutex_. An acquire reply's body.
  v1::SessionMessage request_;               // Guarded by mutex_. frame_, parsed.
  // Refused one-way releases not yet reported. Guarded by mutex_.
  std::vector<v1::ReleaseFailure> release_failures_;
  std::optional<FrameSender> sender_;  // Guarded by mutex_. Writing reply_payload_.
  // Guarded by mutex_. reply_ is being sent (or waits to be): no request is read, nor
  // another reply started, until it is.
  bool replying_ = false;
  bool read_armed_ = false;  // Guarded by mutex_. A wait for readability is armed.
  // The answers of waiting acquires (whole encoded SessionMessages), in the order they came,
  // not yet sent. Guarded by answers_mutex_, which is taken after mutex_ when both are.
  std::mutex answers_mutex_;
  std::deque<std::vector<std::uint8_t>> answers_;
  std::chrono::milliseconds drain_delay_ = kFirstDrainDelay;  // Guarded by mutex_.
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
    for (auto& [id, connection] : connections_) open.push_back(connection);
  }
  if (stopping_now) {
    RemoveSocketFile();
    spdlog::debug("session server on {}: stopped", socket_path_);
  }
  // Once stopped_ is set no connection is added, and each Shutdown() closes its session.
  for (const auto& connection : open) connection->Shutdown();
  open.clear();
  // The loops end once the closed connections' handlers have run.
  if (!loops_.RunningInThisThread()) loops_.Join();
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

void SessionServer::Core::Finished(std::uint64_t connection_id, uid_t uid) {
  std::shared_ptr<Connection> leaving;  // Destroyed after the lock is released.
  std::lock_guard lock(mutex_);
  auto found = connections_.find(connection_id);
  if (found == connections_.end()) return;
  leaving = std::move(found->second);
  connections_.erase(found);
  if (auto count = connections_per_uid_.find(uid); count != connections_per_uid_.end()) {
    if (--count->second == 0) connections_per_uid_.erase(count);
  }
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
  std::vector<Admission> admissions;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    bool keep_accepting = true;
    std::vector<UniqueFd> accepted;
    if (error) {
      spdlog::warn("session server on {}: waiting for connections failed: {}", socket_path_,
                   error.message());
      keep_accepting = false;
    } else {
      keep_accepting = AcceptQueuedLocked(accepted);
    }
    for (UniqueFd& socket : accepted) {
      if (std::optional<Admission> admission = AdmitLocked(std::move(socket))) {
        admissions.push_back(std::move(*admission));
      }
    }
    if (keep_accepting) {
      ArmAcceptLocked();
    } else {
      ArmRetryLocked();
    }
  }
  // Outside mutex_: a connection's handlers may run (and finish) at once, on any thread.
  for (Admission& admission : admissions) {
    if (admission.connection) {
      admission.connection->Start();
    } else if (admission.why) {
      Refuse(admission.refused.get(), admission.peer, *admission.why);
    }
  }
}

bool SessionServer::Core::AcceptQueuedLocked(std::vector<UniqueFd>& accepted) {
  for (int i = 0; i < kMaxAcceptsPerWakeup; ++i) {
    // Non-blocking: the connection's handlers never wait in a system call.
    const int socket =
        ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (socket >= 0) {
      if (accept_exhausted_) {
        accept_exhausted_ = false;
        spdlog::info("session server on {}: accepting connections again", socket_path_);
      }
      accepted.emplace_back(socket);
      continue;
    }
    const int failure = errno;
    if (failure == EINTR || failure == ECONNABORTED) continue;
    if (failure == EAGAIN || failure == EWOULDBLOCK) return true;
    if (!IsExhaustion(failure)) {
      spdlog::warn("session server on {}: {}", socket_path_,
                   ErrnoError("accept4", "", failure).ToString());
    } else if (!accept_exhausted_) {
      // Once per shortage: a daemon out of descriptors would otherwise log ten lines a
      // second. Connections already open are served meanwhile.
      accept_exhausted_ = true;
      spdlog::warn(
          "session server on {}: {}; new connections wait, retried every {} ms (logged once "
          "until accepting works again)",
          socket_path_, ErrnoError("accept4", "", failure).ToString(), kAcceptRetryDelay.count());
    }
    return false;
  }
  return true;
}

std::optional<Error> SessionServer::Core::CapExceededLocked(const PeerCredentials& peer) const {
  if (limits_.max_sessions != 0 && connections_.size() >= limits_.max_sessions) {
    return ResourceExhaustedError(
               fmt::format("max_sessions {} reached: the daemon already serves {} session "
                           "connections; try again later",
                           limits_.max_sessions, connections_.size()))
        .error();
  }
  const auto count = connections_per_uid_.find(peer.uid);
  if (limits_.max_sessions_per_uid != 0 && count != connections_per_uid_.end() &&
      count->second >= limits_.max_sessions_per_uid) {
    return ResourceExhaustedError(
               fmt::format("uid {}: max_sessions_per_uid {} reached: that uid already holds {} "
                           "session connections; close some first",
                           peer.uid, limits_.max_sessions_per_uid, count->second))
        .error();
  }
  return std::nullopt;
}

void SessionServer::Core::Refuse(int socket, const PeerCredentials& peer, const Error& error) {
  const std::uint64_t refused = refused_connections_.fetch_add(1, std::memory_order_relaxed) + 1;
  // At the 1st, 2nd, 4th, 8th... refusal: a flood of them logs a few lines, not one each.
  if (std::has_single_bit(refused)) {
    spdlog::warn(
        "session server on {}: refused a connection (pid {}, uid {}): {} ({} refused "
        "so far)",
        socket_path_, peer.pid, peer.uid, error.message(), refused);
  }
  host_.ConnectionRefused(peer, error);
  SendParting(socket, error);
}

std::optional<SessionServer::Core::Admission> SessionServer::Core::AdmitLocked(UniqueFd socket) {
  auto peer = ReadPeerCredentials(socket.get());
  if (!peer) {
    spdlog::warn("session server on {}: dropped a connection: {}", socket_path_,
                 peer.error().ToString());
    return std::nullopt;
  }
  // Taken now, at accept, so that a pid reused later can never be taken for the peer's.
  Result<UniqueFd> process = OpenPeerPidfd(socket.get());
  if (!process && !told_of_no_pidfd_) {
    told_of_no_pidfd_ = true;  // Once: every connection would fail the same way.
    spdlog::warn(
        "session server on {}: no pidfd for the peer of a connection (pid {}): {}; the ranges "
        "such a session could still write are freed as soon as it ends, not once its process "
        "has exited (logged once)",
        socket_path_, peer->pid, process.error().ToString());
  }
  Admission admission{.connection = nullptr, .refused = {}, .peer = *peer, .why = std::nullopt};
  admission.why = CapExceededLocked(*peer);
  if (!admission.why) {
    // The pidfd counts as the connection's too.
    admission.why = DescriptorReserveRefusal(std::max(socket.get(), process ? process->get() : -1),
                                             limits_.reserved_descriptors);
  }
  if (admission.why) {
    admission.refused = std::move(socket);
    return admission;
  }
  auto connection =
      std::make_shared<Connection>(shared_from_this(), loops_.Next(), next_connection_id_++, *peer,
                                   process ? std::move(*process) : UniqueFd());
  if (auto assigned = connection->Assign(std::move(socket)); !assigned) {
    spdlog::warn("session server on {}: dropped a connection (pid {}): {}", socket_path_, peer->pid,
                 assigned.error().ToString());
    return std::nullopt;
  }
  connections_.emplace(connection->id(), connection);
  ++connections_per_uid_[peer->uid];
  admission.connection = std::move(connection);
  return admission;
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

namespace {

// The connection whose handler this thread runs (its mutex held) while a host call made by
// that handler may answer a waiting acquire of the same connection: the answer is then left
// for the handler to send, as the connection's mutex cannot be taken again.
thread_local const void* t_serving_connection = nullptr;

// Marks this thread as serving `connection` for its life.
class ServingMark {
 public:
  explicit ServingMark(const void* connection)
      : previous_(std::exchange(t_serving_connection, connection)) {}
  ~ServingMark() { t_serving_connection = previous_; }
  ServingMark(const ServingMark&) = delete;
  ServingMark& operator=(const ServingMark&) = delete;

 private:
  const void* previous_;
};

}  // namespace

Status SessionServer::Connection::Assign(UniqueFd socket) {
  std::lock_guard lock(mutex_);
  boost::system::error_code error;
  (void)socket_.assign(stream_protocol(), socket.get(), error);  // Returns `error`.
  if (error) return ResourceExhaustedError(fmt::format("serve the socket: {}", error.message()));
  (void)socket.Release();  // socket_ owns it now.
  return {};
}

void SessionServer::Connection::Start() {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  spdlog::debug("session connection {}: connected (pid {}, uid {}, gid {})", id_, peer_.pid,
                peer_.uid, peer_.gid);
  if (core_->limits().hello_timeout.count() > 0) {
    hello_deadline_.expires_after(core_->limits().hello_timeout);
    hello_deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      self->OnHelloDeadline(error);
    });
  }
  ArmRead();
}

void SessionServer::Connection::Shutdown() {
  std::lock_guard lock(mutex_);
  CloseLocked("the server stopped");
}

void SessionServer::Connection::ArmRead() {
  if (read_armed_) return;
  read_armed_ = true;
  socket_.async_wait(stream_protocol::socket::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& error) {
                       self->OnReadable(error);
                     });
}

void SessionServer::Connection::OnReadable(const boost::system::error_code& error) {
  std::lock_guard lock(mutex_);
  read_armed_ = false;
  if (closed_) return;
  if (error) {
    CloseLocked(fmt::format("waiting for a request failed: {}", error.message()));
    return;
  }
  // An answer being sent: requests are read once it is (ContinueReplyLocked's caller).
  if (!replying_) ServeLocked();
}

void SessionServer::Connection::OnWritable(const boost::system::error_code& error) {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  if (error) {
    CloseLocked(fmt::format("waiting to send a reply failed: {}", error.message()));
    return;
  }
  if (ContinueReplyLocked()) ServeLocked();
}

void SessionServer::Connection::OnDrainTimer(const boost::system::error_code& error) {
  std::lock_guard lock(mutex_);
  if (closed_ || error) return;  // An error: the timer was cancelled, by CloseLocked.
  if (!EarlierRepliesAreRead()) {
    drain_delay_ = std::min(drain_delay_ * 2, kLastDrainDelay);
    drain_timer_.expires_after(drain_delay_);
    drain_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& failed) {
      self->OnDrainTimer(failed);
    });
    return;
  }
  sender_.emplace(reply_payload_, reply_.fd.get());
  if (ContinueReplyLocked()) ServeLocked();
}

void SessionServer::Connection::OnHelloDeadline(const boost::system::error_code& error) {
  std::lock_guard lock(mutex_);
  if (closed_ || error || session_id_) return;
  const Error late(StatusCode::kDeadlineExceeded,
                   fmt::format("no hello within hello_timeout_ms {} of connecting; closing",
                               core_->limits().hello_timeout.count()));
  spdlog::info("session connection {} (pid {}, uid {}): {}", id_, peer_.pid, peer_.uid,
               late.message());
  if (!sender_) SendParting(socket_fd(), late);
  CloseLocked(late.message());
}

void SessionServer::Connection::ArmReadAndFrameDeadlineLocked() {
  const std::chrono::milliseconds timeout = core_->limits().frame_timeout;
  const bool partial = reader_.has_buffered_bytes();
  if (partial && !frame_deadline_armed_ && timeout.count() > 0) {
    frame_deadline_armed_ = true;
    frame_deadline_.expires_after(timeout);
    frame_deadline_.async_wait(
        [self = shared_from_this(), generation = ++frame_deadline_generation_](
            const boost::system::error_code& error) { self->OnFrameDeadline(error, generation); });
  } else if (!partial && frame_deadline_armed_) {
    frame_deadline_armed_ = false;
    ++frame_deadline_generation_;
    (void)frame_deadline_.cancel();  // The count of handlers it cancelled.
  }
  ArmRead();
}

void SessionServer::Connection::OnFrameDeadline(const boost::system::error_code& error,
                                                std::uint64_t generation) {
  std::lock_guard lock(mutex_);
  if (closed_ || error || generation != frame_deadline_generation_) return;
  const Error late(StatusCode::kDeadlineExceeded,
                   fmt::format("a request frame did not arrive whole within frame_timeout_ms {} "
                               "of its first bytes ({} bytes buffered); closing",
                               core_->limits().frame_timeout.count(), reader_.buffer_bytes()));
  spdlog::info("session connection {} (pid {}, uid {}): {}", id_, peer_.pid, peer_.uid,
               late.message());
  if (!sender_) SendParting(socket_fd(), late);
  CloseLocked(late.message());
}

void SessionServer::Connection::ServeLocked() {
  if (!SendAnswersLocked()) return;
  while (!closed_) {
    auto complete = reader_.TryNextInto(socket_fd(), frame_);
    if (!complete) {
      CloseOnErrorLocked("", complete.error());
      return;
    }
    if (!*complete) {
      ArmReadAndFrameDeadlineLocked();
      return;
    }
    std::optional<Reply> reply;
    {
      const ServingMark serving(this);
      reply = HandleLocked();
    }
    if (frame_.payload.capacity() > kKeptBufferBytes)
      std::vector<std::uint8_t>().swap(frame_.payload);
    if (reply) {
      reply_ = std::move(*reply);
      if (!StartReplyLocked()) return;
    }
    // An acquire answered while it was handled (or one of this session's waits its publish
    // answered) goes before the connection waits for the next request.
    if (!SendAnswersLocked()) return;
    // Bytes already read wait in the reader, where the socket's readiness cannot tell.
    if (!reader_.has_buffered_bytes()) {
      ArmReadAndFrameDeadlineLocked();
      return;
    }
  }
}

bool SessionServer::Connection::StartReplyLocked() {
  replying_ = true;
  if (!reply_.encoded) {
    if (reply_payload_.capacity() > kKeptBufferBytes)
      std::vector<std::uint8_t>().swap(reply_payload_);
    reply_payload_.resize(reply_.message.ByteSizeLong());
    reply_.message.SerializeWithCachedSizesToArray(reply_payload_.data());
  }
  if (!release_failures_.empty()) AppendReleaseFailuresLocked();
  if (reply_.fd && !EarlierRepliesAreRead()) {
    spdlog::debug(
        "session connection {} (pid {}): waiting for the client to read its earlier replies", id_,
        peer_.pid);
    drain_delay_ = kFirstDrainDelay;
    drain_timer_.expires_after(drain_delay_);
    drain_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      self->OnDrainTimer(error);
    });
    return false;
  }
  sender_.emplace(reply_payload_, reply_.fd ? reply_.fd.get() : -1);
  return ContinueReplyLocked();
}

bool SessionServer::Connection::ContinueReplyLocked() {
  // NOLINTNEXTLINE(bugprone-unchecked-optional-access): every caller has set sender_.
  auto sent = sender_->Continue(socket_fd());
  if (!sent) {
    CloseOnErrorLocked("reply not sent: ", sent.error());
    return false;
  }
  if (!*sent) {
    socket_.async_wait(stream_protocol::socket::wait_write,
                       [self = shared_from_this()](const boost::system::error_code& error) {
                         self->OnWritable(error);
                       });
    return false;
  }
  sender_.reset();
  replying_ = false;
  reply_.fd.Reset();
  if (reply_.close_reason) {
    CloseLocked(*reply_.close_reason);
    return false;
  }
  return true;
}

bool SessionServer::Connection::EarlierRepliesAreRead() {
  int unread = 0;
  // On a unix socket, SIOCOUTQ counts the bytes sent and not yet read by the peer.
  return ::ioctl(socket_fd(), SIOCOUTQ, &unread) != 0 || unread == 0;
}

void SessionServer::Connection::CloseOnErrorLocked(std::string_view what, const Error& error) {
  // UNAVAILABLE: the client went away (exit, crash, kill -9), the normal end of a session.
  if (error.code() != StatusCode::kUnavailable) {
    spdlog::warn("session connection {} (pid {}): {}{}; closing", id_, peer_.pid, what,
                 error.ToString());
  }
  CloseLocked(error.message());
}

void SessionServer::Connection::CloseLocked(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  const LogContext log_context(
      {.session = session_id_.value_or(0), .pid = peer_.pid, .uid = peer_.uid});
  spdlog::debug("session connection {} (pid {}): closed: {}", id_, peer_.pid, reason);
  if (session_id_) {
    // Its waiting acquires end here (CANCELLED), answered to a connection that sends nothing.
    const ServingMark serving(this);
    core_->host().CloseSession(*session_id_);
  }
  {
    std::lock_guard answers(answers_mutex_);
    answers_.clear();
  }
  (void)hello_deadline_.cancel();  // The count of handlers it cancelled.
  (void)frame_deadline_.cancel();
  (void)drain_timer_.cancel();
  sender_.reset();
  replying_ = false;
  reply_.fd.Reset();
  process_.Reset();  // With the socket, not when the last handler lets go of this object.
  boost::system::error_code ignored;
  (void)socket_.close(ignored);  // Returns `ignored`; waiting handlers see closed_.
  core_->Finished(id_, peer_.uid);
}

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

void SessionServer::Connection::Answer(std::uint64_t request_id,
                                       Result<v1::AcquireResponse> result) {
  Reply reply;
  if (result) {
    reply.message.set_request_id(request_id);
    *reply.message.mutable_acquire_reply() = std::move(*result);
  } else {
    reply = ErrorReply(request_id, result.error(), /*close_after=*/false);
  }
  std::vector<std::uint8_t> encoded(reply.message.ByteSizeLong());
  reply.message.SerializeWithCachedSizesToArray(encoded.data());
  {
    std::lock_guard answers(answers_mutex_);
    answers_.push_back(std::move(encoded));
  }
  // This thread's handler of the connection sends it before it lets the connection go.
  if (t_serving_connection == this) return;
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) {
    (void)SendAnswersLocked();  // One left waiting for the socket continues in OnWritable.
    return;
  }
  // A handler holds the connection and may have looked at answers_ already: look again on
  // the connection's loop once it lets go.
  boost::asio::post(socket_.get_executor(), [self = shared_from_this()] {
    std::lock_guard posted(self->mutex_);
    (void)self->SendAnswersLocked();
  });
}

bool SessionServer::Connection::SendAnswersLocked() {
  if (closed_) {
    std::lock_guard answers(answers_mutex_);
    answers_.clear();  // Came after the connection closed.
    return false;
  }
  while (!closed_ && !replying_) {
    std::vector<std::uint8_t> answer;
    {
      std::lock_guard answers(answers_mutex_);
      if (answers_.empty()) return true;
      answer = std::move(answers_.front());
      answers_.pop_front();
    }
    reply_ = Reply{.encoded = true};
    reply_payload_ = std::move(answer);
    if (!StartReplyLocked()) return false;
  }
  return false;
}

void SessionServer::Connection::ReleaseOneWayLocked(std::uint64_t session_id,
                                                    const v1::SessionMessage& request) {
  const v1::ReleaseRequest& release = request.release_one_way();
  SessionHost& host = core_->host();
  auto released = host.Release(session_id, release);
  if (released) return;
  if (released.error().code() == StatusCode::kNotFound && release.lease_ids_size() > 1) {
    v1::ReleaseRequest one;
    for (const std::uint64_t lease_id : release.lease_ids()) {
      one.clear_lease_ids();
      one.add_lease_ids(lease_id);
      (void)host.Release(session_id, one);  // Those already ended, or not known, fail again.
    }
  }
  spdlog::debug("session connection {} (pid {}): release_one_way {}: {}", id_, peer_.pid,
                request.request_id(), released.error().ToString());
  if (release_failures_.size() >= kMaxPendingReleaseFailures) return;
  v1::ReleaseFailure& failure = release_failures_.emplace_back();
  failure.set_request_id(request.request_id());
  failure.mutable_error()->set_code(static_cast<std::uint32_t>(released.error().code()));
  failure.mutable_error()->set_message(released.error().message());
}

void SessionServer::Connection::AppendReleaseFailuresLocked() {
  v1::SessionMessage failures;
  for (v1::ReleaseFailure& failure : release_failures_) {
    *failures.add_release_failures() = std::move(failure);
  }
  const std::size_t at = reply_payload_.size();
  const std::size_t bytes = failures.ByteSizeLong();
  if (at + bytes > kMaxSessionFrameBytes) {
    // A reply near the limit: they go with a later, smaller one.
    for (int i = 0; i < failures.release_failures_size(); ++i) {
      release_failures_[static_cast<std::size_t>(i)] =
          std::move(*failures.mutable_release_failures(i));
    }
    return;
  }
  release_failures_.clear();
  reply_payload_.resize(at + bytes);
  failures.SerializeWithCachedSizesToArray(reply_payload_.data() + at);
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

// ---- SessionServer ----

Result<std::unique_ptr<SessionServer>> SessionServer::Create(
    boost::asio::io_context& io_context, std::string socket_path, SessionHost& host,
    std::uint64_t daemon_epoch, std::uint32_t socket_mode, std::uint32_t directory_mode,
    SessionLimits limits, std::shared_ptr<const UniqueFd> epoch_hold) {
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
  auto core = std::make_shared<Core>(io_context, socket_path, host, daemon_epoch, limits,
                                     FileIdentity{.device = info.st_dev, .inode = info.st_ino},
                                     std::move(epoch_hold));
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

std::uint64_t SessionServer::refused_connection_count() const {
  return core_->refused_connection_count();
}

const std::string& SessionServer::socket_path() const { return core_->socket_path(); }

}  // namespace hurray::daemon
