#include "hurray/ipc/peer_credentials.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "hurray/ipc/errno_error.h"

namespace hurray {

Result<PeerCredentials> ReadPeerCredentials(int socket) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return ErrnoFailure("getsockopt(SO_PEERCRED)", "", errno);
  }
  return PeerCredentials{.pid = credentials.pid, .uid = credentials.uid, .gid = credentials.gid};
}

Result<UniqueFd> OpenPeerPidfd(int socket) {
#ifndef SO_PEERPIDFD
  constexpr int SO_PEERPIDFD = 77;  // NOLINT(readability-identifier-naming): Linux's name.
#endif
  int pidfd = -1;
  socklen_t length = sizeof(pidfd);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) == 0 && pidfd >= 0) {
    return UniqueFd(pidfd);
  }
  // ENOPROTOOPT: a kernel before 6.5. Any other refusal of the option: the pid will do.
  HURRAY_ASSIGN_OR_RETURN(const PeerCredentials peer, ReadPeerCredentials(socket));
  if (peer.pid <= 0) {
    return FailedPreconditionError(
        "the socket's peer is in another pid namespace: no pidfd of it can be opened");
  }
  // By number: Debian 12's <sys/pidfd.h> declares pidfd_open without C linkage.
  const long opened = ::syscall(SYS_pidfd_open, peer.pid, 0U);  // NOLINT(google-runtime-int)
  if (opened < 0) {
    if (errno == ENOSYS) {
      return FailedPreconditionError("this kernel has neither SO_PEERPIDFD nor pidfd_open");
    }
    return ErrnoFailure("pidfd_open", fmt::format("pid {}", peer.pid), errno);
  }
  return UniqueFd(static_cast<int>(opened));
}

}  // namespace hurray
