// Where hurrayd's sockets live. Thread-safe (reads the environment).
//
// The gRPC socket is `<dir>/hurrayd.sock`; the session socket beside it is the same path
// with ".session" appended. <dir> is, in order:
//   - $RUNTIME_DIRECTORY, when systemd runs the daemon with RuntimeDirectory=hurray
//     (so /run/hurray under the shipped unit);
//   - $XDG_RUNTIME_DIR/hurray, for a user's own daemon;
//   - /tmp/hurray-$UID otherwise (the fallback directory). Anyone may make a directory in
//     /tmp, so a client connects there only when CheckFallbackSocketDirectory passes, and
//     the daemon serves there only when PrepareSocketPath's check passes
//     (hurray/ipc/unix_socket.h).
#pragma once

#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray {

// The socket the daemon listens on when no --socket or config says otherwise.
[[nodiscard]] std::string DefaultDaemonSocketPath();

// The socket a client connects to when given none: $HURRAY_SOCKET, else
// /run/hurray/hurrayd.sock when it exists (the system daemon), else the user rule above.
[[nodiscard]] std::string DefaultClientSocketPath();

// "/tmp/hurray-<uid>", the fallback directory of this process's (real) uid.
[[nodiscard]] std::string FallbackSocketDirectory();

// OK unless `socket_path` is a file of FallbackSocketDirectory() and that directory (lstat:
// a link is not followed) is not a directory owned by this process's effective uid or root
// that only its owner may write, as ssh-agent and tmux check theirs. Then
// FAILED_PRECONDITION naming the directory, the owner and mode found and what is required
// (CheckOwnedDirectory, hurray/ipc/owned_directory.h). A missing directory is OK: connecting
// then finds that no daemon listens. A failed lstat as hurray/ipc/errno_error.h.
[[nodiscard]] Status CheckFallbackSocketDirectory(std::string_view socket_path);

// The session socket that goes with a gRPC socket path.
[[nodiscard]] std::string SessionSocketPath(std::string_view grpc_socket_path);

}  // namespace hurray
