// The errno wrapping lives in core (hurray/errno_error.h), which the file readers use too;
// ipc code includes it through this name, with what only sockets need.
#pragma once

#include <cerrno>

#include "hurray/errno_error.h"  // IWYU pragma: export

namespace hurray {

// Whether accept4 failed with `error_number` because the process or the host ran out of
// descriptors or memory: a state that passes, so a listener pauses and tries again rather
// than giving up on the socket.
[[nodiscard]] constexpr bool IsAcceptExhaustion(int error_number) {
  return error_number == EMFILE || error_number == ENFILE || error_number == ENOBUFS ||
         error_number == ENOMEM;
}

}  // namespace hurray
