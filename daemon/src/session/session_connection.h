// One connection of the session server: SessionServer::Connection, its framing, its reply
// queue and the answers of waiting acquires, its drain and its hello deadline; the requests
// it serves are dispatched in session_dispatch.cc.
// Private to the session server's files (session_server.cc, session_listener.cc,
// session_connection.cc, session_dispatch.cc).
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/frame.h"
#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/session.pb.h"
#include "session/session_server.h"

namespace hurray::daemon {

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

  // Writes `error` as a SessionError frame without waiting, to a connection about to be
  // closed: the frame is small and the socket new, so it fits unless the client is gone.
  static void SendParting(int socket, const Error& error);

 private:
  // How often a reply with a descriptor checks whether the client has read the earlier
  // replies: the first delay, doubled up to the last.
  static constexpr std::chrono::milliseconds kFirstDrainDelay{1};
  static constexpr std::chrono::milliseconds kLastDrainDelay{100};
  // Most refused one-way releases a connection keeps for its next reply; later ones until
  // then are dropped (the client reports the first, and counts what it is told).
  static constexpr std::size_t kMaxPendingReleaseFailures = 64;
  // A reused frame or reply buffer that grew past this for one large message is given back.
  static constexpr std::size_t kKeptBufferBytes = std::size_t{64} << 10;

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
  // A release_one_way: ends every lease it names that is the session's (SessionHost::Release),
  // and keeps the refusal of the others, naming the request, for the next reply.
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
  boost::asio::local::stream_protocol::socket socket_;  // Guarded by mutex_.
  boost::asio::steady_timer hello_deadline_;            // Guarded by mutex_.
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

}  // namespace hurray::daemon
