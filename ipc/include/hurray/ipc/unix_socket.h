// Unix stream sockets by path: their address, connecting to one, and readying a path for a
// listener. Thread-safe (each call works on its own arguments and the file system).
#pragma once

#include <sys/un.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray {

// The address of a unix socket at `path`. INVALID_ARGUMENT for an empty path, one with a
// NUL byte, or one longer than sockaddr_un holds (107 bytes).
[[nodiscard]] Result<sockaddr_un> UnixSocketAddress(std::string_view path);

// A new blocking unix stream socket (O_CLOEXEC) connected to `path`. UNAVAILABLE
// "connect <path>: <strerror>: no daemon listens there" when nothing listens there (no
// file, or a stale one); PERMISSION_DENIED when the socket file's mode refuses us;
// INVALID_ARGUMENT as UnixSocketAddress; other failures as hurray/ipc/errno_error.h.
[[nodiscard]] Result<UniqueFd> ConnectUnixSocket(const std::string& path);

// Readies `path` for a socket to be bound there. The one policy of every listener:
//   - the directory of `path` and any missing parent are created, each with
//     `directory_mode` (0755 unless told) whatever the umask; existing ones are left as they
//     are;
//   - a directory that belongs to another user is refused (FAILED_PRECONDITION), unless it
//     is root's (/run) or we are root: its owner could swap the socket under us;
//   - a file that is not a socket is left alone (FAILED_PRECONDITION "<path> exists and is
//     not a socket");
//   - a socket that a process listens on is left alone (ALREADY_EXISTS "<path> is in use");
//   - a socket nobody listens on (left by a process that died) is removed.
// Returns true when it removed such a stale socket file. INVALID_ARGUMENT as
// UnixSocketAddress; a failed mkdir, chmod, lstat, connect or unlink as
// hurray/ipc/errno_error.h.
[[nodiscard]] Result<bool> PrepareSocketPath(const std::string& path,
                                             std::uint32_t directory_mode = 0755);

}  // namespace hurray
