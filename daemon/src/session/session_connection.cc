#include "session/session_connection.h"

#include <fmt/format.h>
#include <linux/sockios.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/session.pb.h"
#include "logging.h"
#include "session/session_listener.h"

namespace hurray::daemon {
namespace {

using boost::asio::local::stream_protocol;

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

void SessionServer::Connection::SendParting(int socket, const Error& error) {
  v1::SessionMessage message;
  message.mutable_error()->set_code(static_cast<std::uint32_t>(error.code()));
  message.mutable_error()->set_message(error.message());
  std::vector<std::uint8_t> bytes(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(bytes.data());
  FrameSender sender(bytes, -1);
  (void)sender.Continue(socket);  // Best effort: the connection closes either way.
}

}  // namespace hurray::daemon
