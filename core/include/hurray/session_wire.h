// Framing of the session socket (proto/hurray/v1/session.proto), shared by hurrayd and the
// client library: a 4-byte little-endian length, then that many payload bytes (at most
// kMaxSessionFrameBytes), with at most one file descriptor attached as SCM_RIGHTS ancillary
// data to the first byte of the frame. This layer moves raw frame bytes; encoding the
// SessionMessage inside them is the caller's job.
//
// Errors of the socket calls carry the name of the failed call ("recvmsg: Connection reset
// by peer"): UNAVAILABLE when the connection is gone, RESOURCE_EXHAUSTED when the process
// ran out of descriptors or memory, INTERNAL otherwise.
#pragma once

#include <sys/types.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/unique_fd.h"

namespace hurray {

// The protocol version of proto/hurray/v1/session.proto that both ends speak
// (SessionHello.protocol_version).
inline constexpr std::uint32_t kSessionProtocolVersion = 1;
// Longest SessionHello.client_name the daemon accepts, in bytes (it only names the client
// in logs).
inline constexpr std::size_t kMaxSessionClientNameBytes = 256;
// Largest payload of one frame, header excluded.
inline constexpr std::size_t kMaxSessionFrameBytes = std::size_t{1} << 20;
// Bytes of the length prefix in front of every payload.
inline constexpr std::size_t kSessionFrameHeaderBytes = 4;

// One received frame: its payload and the descriptor that came with it, if any.
struct Frame {
  std::vector<std::uint8_t> payload;
  UniqueFd fd;  // Invalid when the frame carried none. Opened with O_CLOEXEC.
};

// Who is on the other end of a unix socket, as the kernel saw it at connect().
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The Error of a failed system call: "<call>: <strerror(error_number)>", with the code the
// file comment describes (and PERMISSION_DENIED for EACCES / EPERM, ALREADY_EXISTS for
// EEXIST / EADDRINUSE, INVALID_ARGUMENT for EBADF / ENOTSOCK / ENAMETOOLONG). For the calls
// around these helpers (socket, connect, bind, ...), so errno is wrapped the same way
// everywhere. `call` may name its object too ("connect /run/hurray/hurrayd.sock.session").
[[nodiscard]] Error SystemCallError(std::string_view call, int error_number);

// The address of a unix socket at `path`. INVALID_ARGUMENT for an empty path, one with a
// NUL byte, or one longer than sockaddr_un holds (107 bytes).
[[nodiscard]] Result<sockaddr_un> UnixSocketAddress(std::string_view path);

// A new blocking unix stream socket (O_CLOEXEC) connected to `path`. UNAVAILABLE
// "connect <path>: <strerror>" when nothing listens there (no file, or a stale one);
// PERMISSION_DENIED when the socket file's mode refuses us; INVALID_ARGUMENT as
// UnixSocketAddress.
[[nodiscard]] Result<UniqueFd> ConnectUnixSocket(const std::string& path);

// Writes one frame to a connected unix stream socket and returns once every byte is in the
// socket. Retries partial writes and EINTR; a non-blocking socket is waited on with poll().
// Never raises SIGPIPE (MSG_NOSIGNAL). When `fd_to_pass` >= 0 it travels with the first
// byte of the frame; the caller keeps ownership of it (the receiver gets its own copy).
// INVALID_ARGUMENT for a payload above kMaxSessionFrameBytes; UNAVAILABLE when the peer
// has closed the connection. Thread-compatible: one writer per socket at a time.
[[nodiscard]] Status SendFrame(int socket, std::span<const std::uint8_t> payload,
                               int fd_to_pass = -1);

// Reads one whole frame from a connected unix stream socket, blocking until it is complete
// (a non-blocking socket is waited on with poll()). A received descriptor is opened with
// O_CLOEXEC; any beyond the first one of a frame is closed. INVALID_ARGUMENT for a length
// prefix above kMaxSessionFrameBytes (checked before anything is allocated); UNAVAILABLE
// "session socket closed by peer" at end of stream. Thread-compatible: one reader per
// socket at a time.
[[nodiscard]] Result<Frame> ReceiveFrame(int socket);

// The peer's pid, uid and gid (SO_PEERCRED) of a connected unix socket.
[[nodiscard]] Result<PeerCredentials> ReadPeerCredentials(int socket);

// Reads frames from a non-blocking socket a piece at a time, for event loops: call
// Continue() whenever the socket is readable. Exactly the bytes of the current frame are
// read, never any of the next one. After an error the reader is spent (the stream is no
// longer framed). Not thread-safe; one reader per socket.
class FrameReceiver {
 public:
  FrameReceiver() = default;

  // Reads what the socket holds of the current frame. Returns the frame once it is
  // complete (and starts on the next one), or std::nullopt when the socket would block
  // before that. Errors as ReceiveFrame.
  [[nodiscard]] Result<std::optional<Frame>> Continue(int socket);

 private:
  std::uint8_t header_[kSessionFrameHeaderBytes] = {};
  std::size_t header_received_ = 0;
  bool header_complete_ = false;
  Frame frame_;
  std::size_t payload_received_ = 0;
};

// Reads frames from a connected unix stream socket through a buffer of its own, so that a
// small frame usually takes one recvmsg (ReceiveFrame takes two: the length prefix, then
// the payload). Bytes read past the end of a frame are kept for the next call. A received
// descriptor goes with the frame it was sent with: the kernel ends a read right after bytes
// that carry descriptors (unix(7): ancillary data "forms a kind of barrier"), so it belongs
// to the last frame that begins in the read that brought it. Any beyond the first of a
// frame, and any that no frame can own, are closed. Not thread-safe; one reader per socket,
// and no other reads on it.
class FrameReader {
 public:
  FrameReader() = default;

  // The next frame, blocking until it is complete (a non-blocking socket is waited on with
  // poll()). Errors as ReceiveFrame; after an error the reader is spent.
  [[nodiscard]] Result<Frame> Next(int socket);

 private:
  // A received descriptor, with the buffer range [read_begin, read_end) of the read that
  // brought it (read_begin may lie before the buffer's start once bytes are consumed).
  struct PendingDescriptor {
    std::ptrdiff_t read_begin = 0;
    std::ptrdiff_t read_end = 0;
    UniqueFd fd;
  };

  // Takes the complete frame at begin_, when there is one.
  [[nodiscard]] Result<std::optional<Frame>> TakeFrame();
  // Makes room for at least `frame_bytes` from begin_ (moving the unread bytes to the
  // front), then receives once. false when the socket would block.
  [[nodiscard]] Result<bool> Receive(int socket, std::size_t frame_bytes);

  std::vector<std::uint8_t> buffer_;
  std::size_t begin_ = 0;  // First byte not yet returned.
  std::size_t end_ = 0;    // One past the last byte received.
  std::vector<PendingDescriptor> descriptors_;
};

// Writes one frame to a non-blocking socket a piece at a time, for event loops: call
// Continue() whenever the socket is writable until it returns true. Borrows `payload` and
// `fd_to_pass`: both must stay valid until the first Continue() call that writes a byte
// (the payload until the last one). Not thread-safe; one writer per socket.
class FrameSender {
 public:
  // INVALID_ARGUMENT from the first Continue() when the payload is above the limit.
  explicit FrameSender(std::span<const std::uint8_t> payload, int fd_to_pass = -1);

  // Writes what the socket takes. true once the whole frame is written; false when the
  // socket would block before that. Errors as SendFrame.
  [[nodiscard]] Result<bool> Continue(int socket);

 private:
  std::uint8_t header_[kSessionFrameHeaderBytes] = {};
  std::span<const std::uint8_t> payload_;
  int fd_to_pass_;
  std::size_t sent_ = 0;  // Bytes of header and payload written so far.
};

}  // namespace hurray
