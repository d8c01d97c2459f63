// SendFrame: writing frames (hurray/ipc/frame.h) to a connected unix stream socket.
//
// Errors of the socket calls carry the name of the failed call ("sendmsg: Broken pipe"),
// with the code of hurray/ipc/errno_error.h: UNAVAILABLE once the peer has closed the
// connection.
#pragma once

#include <cstdint>
#include <span>

#include "hurray/error.h"
#include "hurray/ipc/frame.h"

namespace hurray {

// Writes one frame to a connected unix stream socket and returns once every byte is in the
// socket. Retries partial writes and EINTR; a non-blocking socket is waited on with poll().
// Never raises SIGPIPE (MSG_NOSIGNAL). When `fd_to_pass` >= 0 it travels with the first
// byte of the frame; the caller keeps ownership of it (the receiver gets its own copy).
// INVALID_ARGUMENT for a payload above kMaxSessionFrameBytes; UNAVAILABLE when the peer
// has closed the connection. Thread-compatible: one writer per socket at a time.
[[nodiscard]] Status SendFrame(int socket, std::span<const std::uint8_t> payload,
                               int fd_to_pass = -1);

}  // namespace hurray
