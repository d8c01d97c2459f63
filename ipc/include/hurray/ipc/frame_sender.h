// SendFrame: writing frames (hurray/ipc/frame.h) to a connected unix stream socket.
//
// Errors of the socket calls carry the name of the failed call ("sendmsg: Broken pipe"),
// with the code of hurray/ipc/errno_error.h: UNAVAILABLE once the peer has closed the
// connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "hurray/error.h"
#include "hurray/ipc/frame.h"

namespace hurray {

// Writes one frame a piece at a time, for a caller that waits for a non-blocking socket
// itself: Continue() writes what the socket takes, and returns true once the whole frame is
// written, false when the socket would block before that (call it again once the socket is
// writable). `fd_to_pass` travels with the first byte, as with SendFrame. Borrows `payload`
// and `fd_to_pass`. Not thread-safe; one writer per socket.
class FrameSender {
 public:
  FrameSender(std::span<const std::uint8_t> payload, int fd_to_pass);

  // INVALID_ARGUMENT when the payload is above the limit; errors as SendFrame.
  [[nodiscard]] Result<bool> Continue(int socket);

 private:
  std::uint8_t header_[kSessionFrameHeaderBytes] = {};
  std::span<const std::uint8_t> payload_;
  int fd_to_pass_;
  std::size_t sent_ = 0;  // Bytes of header and payload written so far.
};

// Writes one frame to a connected unix stream socket and returns once every byte is in the
// socket. Retries partial writes and EINTR; a non-blocking socket is waited on with poll().
// Never raises SIGPIPE (MSG_NOSIGNAL). When `fd_to_pass` >= 0 it travels with the first
// byte of the frame; the caller keeps ownership of it (the receiver gets its own copy).
// INVALID_ARGUMENT for a payload above kMaxSessionFrameBytes; UNAVAILABLE when the peer
// has closed the connection. Thread-compatible: one writer per socket at a time.
[[nodiscard]] Status SendFrame(int socket, std::span<const std::uint8_t> payload,
                               int fd_to_pass = -1);

}  // namespace hurray
