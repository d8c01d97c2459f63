// PeerCredentials: who is on the other end of a unix socket, as the kernel saw it at
// connect() (SO_PEERCRED).
#pragma once

#include <sys/types.h>

#include "hurray/error.h"

namespace hurray {

// A plain value; thread-safe to read.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The peer's pid, uid and gid of a connected unix socket. INVALID_ARGUMENT
// "getsockopt(SO_PEERCRED): ..." when `socket` is not a socket. Thread-safe.
[[nodiscard]] Result<PeerCredentials> ReadPeerCredentials(int socket);

}  // namespace hurray
