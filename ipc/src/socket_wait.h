// Waiting on a socket for the blocking forms of the frame calls. Thread-safe.
#pragma once

#include <cstdint>

#include "hurray/error.h"

namespace hurray::ipc_internal {

// Blocks until `socket` is ready for `events` (POLLIN or POLLOUT), or has hung up (the next
// recvmsg / sendmsg then reports what happened). Retries EINTR; INVALID_ARGUMENT "poll:
// ..." for a descriptor that is not open.
[[nodiscard]] Status WaitUntilReady(int socket, std::int16_t events);

}  // namespace hurray::ipc_internal
