// The session server's listener: the event loops that serve its connections, and its Core,
// the state that the server, its accept loop and every connection share: the listening
// socket, accepting, the caps on connections, the socket file.
// Private to the session server's files (session_server.cc, session_listener.cc,
// session_connection.cc, session_dispatch.cc).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/ipc/unix_socket.h"
#include "session/session_server.h"

namespace hurray::daemon {

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
       std::uint64_t daemon_epoch, SessionLimits limits, BoundSocketFile socket_file,
       std::shared_ptr<const UniqueFd> epoch_hold)
      : io_context_(io_context),
        socket_path_(std::move(socket_path)),
        host_(host),
        daemon_epoch_(daemon_epoch),
        epoch_hold_(std::move(epoch_hold)),
        limits_(limits),
        socket_file_(std::move(socket_file)),
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
  // After accept4 fails for lack of descriptors or memory, the pending connection stays
  // queued and the listener stays readable: wait a little instead of spinning on it.
  static constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
  // Connections accepted per wakeup before other handlers get a turn.
  static constexpr int kMaxAcceptsPerWakeup = 64;

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
  void RemoveSocketFile();

  boost::asio::io_context& io_context_;
  const std::string socket_path_;
  SessionHost& host_;
  const std::uint64_t daemon_epoch_;
  const std::shared_ptr<const UniqueFd> epoch_hold_;
  const SessionLimits limits_;
  BoundSocketFile socket_file_;  // Removed once, by Stop().
  EventLoops loops_;

  std::mutex stop_mutex_;  // Held by Stop(), so that a second call waits for the first.
  mutable std::mutex mutex_;
  boost::asio::local::stream_protocol::acceptor acceptor_;            // Guarded by mutex_.
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

}  // namespace hurray::daemon
