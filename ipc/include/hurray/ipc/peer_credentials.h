// PeerCredentials: who is on the other end of a unix socket, as the kernel saw it at
// connect() (SO_PEERCRED).
#pragma once

#include <sys/types.h>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

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

// A pidfd of the process on the other end of a connected unix socket (O_CLOEXEC): it polls
// readable once that process has exited, and can never name a later process that reuses
// the pid. From SO_PEERPIDFD (Linux 6.5), else pidfd_open(2) of SO_PEERCRED's pid (Linux
// 5.3; then a pid reused between the connect and this call would be named instead, which
// only a peer that exited at once allows). FAILED_PRECONDITION when the kernel has
// neither, or the peer's pid is not in this process's pid namespace (0); pidfd_open's
// errno error otherwise ("Operation not permitted" in a sandbox that refuses it, "No such
// process" for a peer already gone). Thread-safe.
[[nodiscard]] Result<UniqueFd> OpenPeerPidfd(int socket);

}  // namespace hurray
