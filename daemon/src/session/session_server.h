// SessionServer: the daemon's end of the session socket (proto/hurray/v1/session.proto).
// One connection per client process; the connection's life is the session's life.
//
// Its parts: session_listener.h (the event loops; Core: accepting, the caps, the socket
// file), session_connection.h (a connection: framing, replies, drain, hello) and
// session_dispatch.cc (the requests a connection serves, and their handlers).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"
#include "session/session_host.h"

namespace hurray::daemon {

// How many connections a SessionServer serves, and how long a new one may take to say hello.
// A plain value.
struct SessionLimits {
  // Most connections open at once, hello or not; 0: no limit.
  std::size_t max_sessions = 4096;
  // Most connections open at once from processes of one uid; 0: no limit.
  std::size_t max_sessions_per_uid = 1024;
  // How long a new connection may take to send its hello; 0: forever.
  std::chrono::milliseconds hello_timeout{5000};
  // How long the rest of a request frame may take to come once its first bytes have; 0:
  // forever. (A connection stopped inside a frame would otherwise hold what it sent.)
  std::chrono::milliseconds frame_timeout{10000};
  // Event loops (one thread each) that serve the connections; at least 1.
  std::size_t event_loops = 2;
  // Descriptors of RLIMIT_NOFILE no connection may take (descriptor_reserve.h): one that
  // gets one of the last `reserved_descriptors` is refused as the caps refuse; 0: none kept.
  std::uint32_t reserved_descriptors = 0;
  // The longest wait an acquire may ask for (max_wait_ms), told to clients in the welcome:
  // a client that waits on the fast path's directory keeps to it as the daemon would.
  std::uint32_t max_wait_ms = 3600000;
};

// Listens on a unix stream socket (accepting on the caller's io_context) and serves every
// connection with handlers on SessionLimits::event_loops event loops of its own (threads
// named hurrayd-session, each running one io_context, connections spread over them in
// turn): no thread waits for a connection, so an idle one costs its descriptor and a few
// hundred bytes, and the server's thread count is fixed. A request costs one wake-up, of the
// thread that handles it. Each connection:
//   - is refused at once, with a SessionError RESOURCE_EXHAUSTED naming the cap
//     (`max_sessions 4096 reached: ...`, `uid 1001: max_sessions_per_uid 1024 reached: ...`,
//     `reserved_descriptors 128 reached: ...`)
//     and closed, when it would exceed SessionLimits; refusals are counted
//     (refused_connection_count);
//   - has the peer's credentials (SO_PEERCRED) read when it is accepted, and a pidfd on its
//     process taken (OpenPeerPidfd; without one, logged once), which goes to the host with
//     the session (SetPeerProcess) and counts against reserved_descriptors with the socket;
//   - must begin with a hello within SessionLimits::hello_timeout (else a SessionError
//     DEADLINE_EXCEEDED, and it is closed) of protocol version kSessionProtocolVersion with a
//     client_name of at most kMaxSessionClientNameBytes (anything else is answered
//     with an INVALID_ARGUMENT SessionError and the connection is closed); the host's
//     OpenSession decides, and the client gets a welcome or the host's error (and is
//     closed);
//   - must send each request frame whole within SessionLimits::frame_timeout of its first
//     bytes (else a SessionError DEADLINE_EXCEEDED, and it is closed);
//   - then gets each map_segment answered with segment_granted plus the descriptor
//     (SCM_RIGHTS), and each hot-path request (allocate, publish, acquire, release,
//     cancel_allocation) with the host's reply or error; an acquire's reply is encoded by
//     the host (AcquireNowEncoded) and sent as it is; an acquire with a wait is handed to
//     the host (AcquireWaiting, when ServesAcquireWaits: the welcome's acquire_waits), and
//     its answer, from whatever thread the host gives it on, is sent between two other
//     replies as soon as none is being sent, while the connection goes on serving later
//     requests (a wait still pending when the session closes is ended by CloseSession and
//     answered to nobody); a release_one_way gets no reply: its
//     leases end before the next request is read, and a refusal (a ReleaseFailure naming
//     its request_id and the host's error; at most 64 kept between replies) is attached to
//     the connection's next reply, whatever it answers; a sync is answered with synced
//     (requests are served in order, so every earlier one has taken effect); the request
//     and reply buffers are the connection's, reused; anything else, or a frame that
//     does not parse, is a protocol error as above; an oversized or truncated frame closes
//     the connection at once; a descriptor the client sends is closed as it arrives;
//   - when it closes, for whatever reason (end of stream, error, protocol error, Stop()),
//     calls host.CloseSession exactly once for its session, if it had one, before the
//     socket closes. No other host call for that session follows, and none runs
//     concurrently with it.
// A connection reads one request at a time and answers it before it reads the next (the
// answers of waiting acquires aside), so a client that does not read its replies stalls
// only itself (answers queue for it: at most one per wait the host holds for it); a reply that
// carries a descriptor waits until the client has read every earlier reply, so a client never holds
// more than one descriptor in flight (they count against the daemon's descriptor limit).
// When accept4 runs out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) the server
// logs it once, retries every 100 ms, and serves the open connections meanwhile.
// A host call holds only its own connection's lock; calls for different sessions run
// concurrently on the event loops, and a host call that blocks holds up its loop's other
// connections.
//
// Thread-safe: every method may be called from any thread, io_context threads included;
// the io_context may be run by any number of threads. The io_context and the host must
// outlive the server (destroyed from a thread outside the io_context, it makes no host
// call after its destructor returns).
class SessionServer {
 public:
  // Listens on `socket_path`, a path that PrepareSocketPath (hurray/ipc/unix_socket.h)
  // readied, as the daemon does for both its sockets: the socket file is made with
  // `socket_mode` (at most 0777) before it accepts (BoundSocketFile), and removed by Stop()
  // while it is still that file. `daemon_epoch` goes into every welcome, and a duplicate of
  // `epoch_hold` (when not null: EpochHolds) into each welcome whose hello asks for it.
  // Accepting starts at once (handlers run on `io_context`).
  // INVALID_ARGUMENT for an empty path or one too long for a unix socket (naming
  // socket_path); errors of the failed system call otherwise, as bind's EADDRINUSE when a
  // file is there already.
  [[nodiscard]] static Result<std::unique_ptr<SessionServer>> Create(
      boost::asio::io_context& io_context, std::string socket_path, SessionHost& host,
      std::uint64_t daemon_epoch, std::uint32_t socket_mode = 0660, SessionLimits limits = {},
      std::shared_ptr<const UniqueFd> epoch_hold = nullptr);

  // Stops (see Stop()).
  ~SessionServer();

  SessionServer(const SessionServer&) = delete;
  SessionServer& operator=(const SessionServer&) = delete;

  // Stops accepting, closes every connection (waiting for a handler of it that runs, and
  // calling CloseSession for its session), ends the event loops, and removes the socket file (if it
  // is still the one this server created). Idempotent; a second concurrent call returns once the
  // first is done. Called from a thread that is not running the io_context, it also waits for an
  // accept handler already running, so the host is not called after it returns. Never call it from
  // the host's methods, nor while holding a lock that they take.
  void Stop();

  // Connections accepted and not yet closed.
  [[nodiscard]] std::size_t connection_count() const;

  // Connections refused since Create for exceeding SessionLimits' caps.
  [[nodiscard]] std::uint64_t refused_connection_count() const;

  [[nodiscard]] const std::string& socket_path() const;

 private:
  class Core;
  class Connection;

  explicit SessionServer(std::shared_ptr<Core> core);

  // Shared with the handlers of the accept loop and of every connection, which may run
  // after this object is gone.
  std::shared_ptr<Core> core_;
};

}  // namespace hurray::daemon
