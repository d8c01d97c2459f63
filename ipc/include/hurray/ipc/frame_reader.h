// FrameReader: reading frames (hurray/ipc/frame.h) from a connected unix stream socket.
//
// Errors of the socket calls carry the name of the failed call ("recvmsg: Connection reset
// by peer"), with the code of hurray/ipc/errno_error.h: UNAVAILABLE when the connection is
// gone, RESOURCE_EXHAUSTED when the process ran out of descriptors or memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/frame.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray {

// Reads frames from a connected unix stream socket through a buffer of its own, so that a
// small frame usually takes one recvmsg. Bytes read past the end of a frame are kept for
// the next call. A received descriptor goes with the frame it was sent with: the kernel ends
// a read right after bytes that carry descriptors (unix(7): ancillary data "forms a kind of
// barrier"), so it belongs to the last frame that begins in the read that brought it. Any
// beyond the first of a frame, and any that no frame can own, are closed. Not thread-safe;
// one reader per socket, and no other reads on it.
class FrameReader {
 public:
  FrameReader() = default;

  // The next frame, blocking until it is complete (a non-blocking socket is waited on with
  // poll()). A received descriptor is opened with O_CLOEXEC. INVALID_ARGUMENT for a length
  // prefix above kMaxSessionFrameBytes (checked before anything is allocated); UNAVAILABLE
  // "session socket closed by peer" at end of stream (with "in the middle of a frame" and
  // how much of it came, when it ends inside one). After an error the reader is spent.
  [[nodiscard]] Result<Frame> Next(int socket);

  // As Next(), without waiting: std::nullopt when the socket would block before a frame is
  // complete (the bytes received so far are kept for the next call).
  [[nodiscard]] Result<std::optional<Frame>> TryNext(int socket);

  // As Next() and TryNext(), into `frame`, whose payload's memory is reused (no allocation
  // per frame in steady state): TryNextInto returns false when the socket would block
  // before a frame is complete (`frame` is then unchanged).
  [[nodiscard]] Status NextInto(int socket, Frame& frame);
  [[nodiscard]] Result<bool> TryNextInto(int socket, Frame& frame);

  // Whether bytes received and not yet returned wait in the buffer: a socket's readiness
  // says nothing of them, so a caller that waits for it first calls TryNext() until this is
  // false.
  [[nodiscard]] bool has_buffered_bytes() const { return begin_ < end_; }

 private:
  // A received descriptor, with the buffer range [read_begin, read_end) of the read that
  // brought it (read_begin may lie before the buffer's start once bytes are consumed).
  struct PendingDescriptor {
    std::ptrdiff_t read_begin = 0;
    std::ptrdiff_t read_end = 0;
    UniqueFd fd;
  };

  // Takes the complete frame at begin_ into `frame`, when there is one.
  [[nodiscard]] Result<bool> TakeFrame(Frame& frame);
  // Makes room for at least `frame_bytes` from begin_ (moving the unread bytes to the
  // front), then receives once. false when the socket would block.
  [[nodiscard]] Result<bool> Receive(int socket, std::size_t frame_bytes);

  std::vector<std::uint8_t> buffer_;
  std::size_t begin_ = 0;  // First byte not yet returned.
  std::size_t end_ = 0;    // One past the last byte received.
  std::vector<PendingDescriptor> descriptors_;
};

}  // namespace hurray
