// Where hurrayd's sockets live. Thread-safe (reads the environment).
//
// The gRPC socket is `<dir>/hurrayd.sock`; the session socket beside it is the same path
// with ".session" appended. <dir> is, in order:
//   - $RUNTIME_DIRECTORY, when systemd runs the daemon with RuntimeDirectory=hurray
//     (so /run/hurray under the shipped unit);
//   - $XDG_RUNTIME_DIR/hurray, for a user's own daemon;
//   - /tmp/hurray-$UID otherwise.
#pragma once

#include <string>
#include <string_view>

namespace hurray {

// The socket the daemon listens on when no --socket or config says otherwise.
[[nodiscard]] std::string DefaultDaemonSocketPath();

// The socket a client connects to when given none: $HURRAY_SOCKET, else
// /run/hurray/hurrayd.sock when it exists (the system daemon), else the user rule above.
[[nodiscard]] std::string DefaultClientSocketPath();

// The session socket that goes with a gRPC socket path.
[[nodiscard]] std::string SessionSocketPath(std::string_view grpc_socket_path);

}  // namespace hurray
