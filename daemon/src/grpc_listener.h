// GrpcListener: the gRPC server's listening sockets — the unix socket, and the TCP address
// when one is configured — accepted by the daemon itself, so that it can cap what they hold.
// Each connection is accepted here (on the daemon's io_context), checked, and handed to the
// gRPC server (grpc::AddInsecureChannelFromFd), which serves and closes it from then on.
// gRPC 1.51 has no cap on incoming connections of its own, and no view of a unix peer's
// credentials.
//
// A new connection is closed at once, before a byte of HTTP/2, when
//   - its peer (the uid SO_PEERCRED gives on the unix socket; every TCP client together as
//     one peer, since TCP carries no uid) already holds max_connections_per_uid, or the
//     daemon max_connections (GrpcConnectionLedger counts them);
//   - it got one of the last reserved_descriptors of RLIMIT_NOFILE (descriptor_reserve.h).
// The client sees its call fail with UNAVAILABLE ("Socket closed"); the daemon counts the
// refusal (refused_count) and logs it at the 1st, 2nd, 4th, 8th, ... refusal, naming the
// peer and the limit. When accept itself runs out of descriptors (EMFILE, ENFILE, ...) the
// listener logs it once and retries every 100 ms.
//
// Thread-safe. The io_context and the gRPC server must outlive the listener's Stop().
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "peer_counts.h"

namespace grpc {
class Server;
}

namespace hurray::daemon {

class GrpcListener {
 public:
  struct Options {
    // The unix socket; its path was readied (PrepareSocketPath). Its file is made with
    // `socket_mode` before it listens, and Stop() removes it while it is still that file
    // (BoundSocketFile).
    std::string socket_path;
    std::uint32_t socket_mode = 0660;
    // "host:port" (ParseTcpAddress); empty: none.
    std::string tcp_address;
    // 0: no limit.
    std::size_t max_connections = 4096;
    std::size_t max_connections_per_uid = 1024;
    // Descriptors of RLIMIT_NOFILE no connection may take; 0: none kept.
    std::uint32_t reserved_descriptors = 0;
  };

  // Binds and listens on both sockets; nothing is accepted before Serve. FAILED_PRECONDITION
  // "cannot listen on unix:PATH: ..." or "... on HOST:PORT: ..." when a socket cannot be
  // bound; INVALID_ARGUMENT for a tcp_address that does not parse.
  [[nodiscard]] static Result<std::unique_ptr<GrpcListener>> Create(
      boost::asio::io_context& io_context, const Options& options);

  // Stops (see Stop()).
  ~GrpcListener();
  GrpcListener(const GrpcListener&) = delete;
  GrpcListener& operator=(const GrpcListener&) = delete;

  // Starts accepting, handing every admitted connection to `server` (started). Once.
  void Serve(grpc::Server& server);

  // Stops accepting, closes the listening sockets and removes the unix socket's file (unless
  // another file has taken its path); returns once no accept handler runs, so `server` is
  // not touched after it. Connections already handed over stay the server's. Idempotent.
  // Never call it from an io_context thread.
  void Stop();

  // Whom the gRPC call of peer `grpc_peer` (ServerContext::peer(), "fd:N" for the
  // connections handed over here) is charged to; nullopt when no connection of this
  // listener has that peer.
  [[nodiscard]] std::optional<PeerKey> PeerOf(std::string_view grpc_peer) const;

  // Connections handed over and not yet closed (counted after a sweep for closed ones).
  [[nodiscard]] std::size_t connection_count() const;
  // Connections refused since Create.
  [[nodiscard]] std::uint64_t refused_count() const;
  // The TCP port listened on (the one chosen, for port 0); 0 without tcp_address.
  [[nodiscard]] std::uint16_t tcp_port() const;

 private:
  class Core;
  explicit GrpcListener(std::shared_ptr<Core> core);

  // Shared with the accept handlers, which may run after this object is gone.
  std::shared_ptr<Core> core_;
};

}  // namespace hurray::daemon
