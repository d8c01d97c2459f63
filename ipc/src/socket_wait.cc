#include "socket_wait.h"

#include <poll.h>

#include <cerrno>
#include <cstdint>

#include "hurray/ipc/errno_error.h"

namespace hurray::ipc_internal {

Status WaitUntilReady(int socket, std::int16_t events) {
  pollfd entry{.fd = socket, .events = events, .revents = 0};
  while (true) {
    const int ready = ::poll(&entry, 1, -1);
    if (ready > 0) {
      if ((entry.revents & POLLNVAL) != 0) return ErrnoFailure("poll", "", EBADF);
      return {};
    }
    if (ready < 0 && errno != EINTR) return ErrnoFailure("poll", "", errno);
  }
}

}  // namespace hurray::ipc_internal
