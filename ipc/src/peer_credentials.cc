#include "hurray/ipc/peer_credentials.h"

#include <sys/socket.h>

#include <cerrno>

#include "hurray/ipc/errno_error.h"

namespace hurray {

Result<PeerCredentials> ReadPeerCredentials(int socket) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return std::unexpected(ErrnoError("getsockopt(SO_PEERCRED)", "", errno));
  }
  return PeerCredentials{.pid = credentials.pid, .uid = credentials.uid, .gid = credentials.gid};
}

}  // namespace hurray
