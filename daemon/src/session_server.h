// SessionServer: the daemon's end of the session socket (proto/hurray/v1/session.proto).
// One connection per client process; the connection's life is the session's life.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hurray/error.h"
#include "session_host.h"

namespace hurray::daemon {

// Listens on a unix stream socket and drives the session protocol of every connection on
// the caller's io_context:
//   - reads the peer's credentials (SO_PEERCRED) when it accepts a connection;
//   - the first frame must be a hello of protocol version kSessionProtocolVersion with a
//     client_name of at most kMaxSessionClientNameBytes (anything else is answered
//     with an INVALID_ARGUMENT SessionError and the connection is closed); the host's
//     OpenSession decides, and the client gets a welcome or the host's error (and is
//     closed);
//   - then answers each map_segment with segment_granted plus the descriptor
//     (SCM_RIGHTS), or with an error of the host's code; anything else, or a frame that
//     does not parse, is a protocol error as above; an oversized or truncated frame closes
//     the connection at once;
//   - when a connection closes, for whatever reason (end of stream, error, protocol error,
//     Stop()), calls host.CloseSession exactly once for its session, if it had one. No
//     other host call for that session follows, and none runs concurrently with it.
// A connection reads one request at a time and answers it before it reads the next, so a
// client that does not read its replies stalls only itself; a reply that carries a
// descriptor waits until the client has read every earlier reply, so a client never holds
// more than one descriptor in flight (they count against the daemon's descriptor limit).
// No lock is held while the host is called.
//
// Thread-safe: every method may be called from any thread, io_context threads included;
// the io_context may be run by any number of threads. The io_context and the host must
// outlive the server (destroyed from a thread outside the io_context, it makes no host
// call after its destructor returns).
class SessionServer {
 public:
  // Listens on `socket_path`: creates its parent directory (mode 0755) when missing,
  // replaces a stale socket file (one nobody listens on), and sets mode 0660 on the new
  // one. `daemon_epoch` goes into every welcome. Accepting starts at once (handlers run
  // on `io_context`).
  // INVALID_ARGUMENT for an empty path or one too long for a unix socket;
  // FAILED_PRECONDITION when the path exists and is not a socket; ALREADY_EXISTS when a
  // live process listens on it; errors of the failed system call otherwise.
  [[nodiscard]] static Result<std::unique_ptr<SessionServer>> Create(
      boost::asio::io_context& io_context, std::string socket_path, SessionHost& host,
      std::uint64_t daemon_epoch);

  // Stops (see Stop()).
  ~SessionServer();

  SessionServer(const SessionServer&) = delete;
  SessionServer& operator=(const SessionServer&) = delete;

  // Stops accepting, closes every connection (calling CloseSession for each open session)
  // and removes the socket file (if it is still the one this server created). Idempotent.
  // Called from a thread that is not running the io_context, it returns after every
  // handler already running has finished, so the host is not called after it returns.
  // Called from an io_context thread, a handler running concurrently (possibly the
  // caller's own) may still make its last host calls, CloseSession included, just after.
  // Never call it while holding a lock that the host's methods take.
  void Stop();

  // Connections accepted and not yet closed.
  [[nodiscard]] std::size_t connection_count() const;

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
