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
// beyond the first of a frame, and any that no frame can own, are closed. A reader that
// accepts none (Descriptors::kClose, the daemon's: it never takes a client's descriptor)
// closes each as it arrives, and one that accepts them keeps at most
// kMaxPendingDescriptors for frames not yet complete, so that a peer trickling descriptors
// cannot make it hold more. The buffer grows with the bytes that came, not with the length a
// prefix announces: a peer that stops inside a frame costs about what it sent. Not
// thread-safe; one reader per socket, and no other reads on it.
class FrameReader {
 public:
  // What a reader does with the descriptors that come with frames.
  enum class Descriptors : std::uint8_t {
    kAccept,  // Each goes with its frame (Frame::fd).
    kClose,   // Closed as it arrives; no frame carries one.
  };
  // Descriptors a kAccept reader keeps for frames not yet complete; one more is an
  // INVALID_ARGUMENT error (the reader is then spent).
  static constexpr std::size_t kMaxPendingDescriptors = 64;

  explicit FrameReader(Descriptors descriptors = Descriptors::kAccept)
      : descriptors_policy_(descriptors) {}

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
  // Bytes of memory the reader holds now (its buffer's capacity).
  [[nodiscard]] std::size_t buffer_bytes() const { return buffer_.capacity(); }
  // Descriptors closed as they arrived (a kClose reader's, and any beyond a frame's first).
  [[nodiscard]] std::uint64_t closed_descriptors() const { return closed_descriptors_; }

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
  const Descriptors descriptors_policy_;
  std::vector<PendingDescriptor> descriptors_;
  std::uint64_t closed_descriptors_ = 0;
};

}  // namespace hurray
