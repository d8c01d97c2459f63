#include "session/session_listener.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "descriptor_reserve.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/unique_fd.h"
#include "session/session_connection.h"

namespace hurray::daemon {
namespace {

using boost::asio::local::stream_protocol;

}  // namespace

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
    if (!IsAcceptExhaustion(failure)) {
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
  Connection::SendParting(socket, error);
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

void SessionServer::Core::RemoveSocketFile() {
  if (const Status removed = socket_file_.Remove(); !removed) {
    spdlog::warn("session server: {}", removed.error().ToString());
  }
}

}  // namespace hurray::daemon
