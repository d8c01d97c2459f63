#include "hurray/session_wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "str_cat.h"

namespace hurray {
namespace {

using internal::StrCat;

// Room for a few descriptors per recvmsg: a frame carries at most one, and the kernel drops
// (closes) any that do not fit, so a peer that sends many cannot exhaust ours.
constexpr std::size_t kMaxDescriptorsPerReceive = 4;
// FrameReader's buffer: what one read asks for at least, and the most it keeps between
// frames (a larger frame grows it for as long as it takes).
constexpr std::size_t kReaderChunkBytes = std::size_t{16} << 10;
constexpr std::size_t kReaderKeptBytes = std::size_t{64} << 10;

std::string ErrnoText(int error_number) {
  std::array<char, 256> buffer{};
  // GNU strerror_r: returns a pointer to the text, which may or may not be `buffer`.
  return ::strerror_r(error_number, buffer.data(), buffer.size());
}

StatusCode CodeForErrno(int error_number) {
  switch (error_number) {
    case EPIPE:
    case ECONNRESET:
    case ECONNREFUSED:
    case ECONNABORTED:
    case ENOTCONN:
    case ENOENT:
    case ESHUTDOWN:
    case ETIMEDOUT:
      return StatusCode::kUnavailable;
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
    case ETOOMANYREFS:
      return StatusCode::kResourceExhausted;
    case EACCES:
    case EPERM:
      return StatusCode::kPermissionDenied;
    case EEXIST:
    case EADDRINUSE:
      return StatusCode::kAlreadyExists;
    case EBADF:
    case ENOTSOCK:
    case ENAMETOOLONG:
      return StatusCode::kInvalidArgument;
    default:
      return StatusCode::kInternal;
  }
}

void EncodeLength(std::uint32_t length, std::uint8_t (&header)[kSessionFrameHeaderBytes]) {
  for (std::size_t i = 0; i < kSessionFrameHeaderBytes; ++i) {
    header[i] = static_cast<std::uint8_t>(length >> (8 * i));
  }
}

std::uint32_t DecodeLength(const std::uint8_t (&header)[kSessionFrameHeaderBytes]) {
  std::uint32_t length = 0;
  for (std::size_t i = 0; i < kSessionFrameHeaderBytes; ++i) {
    length |= static_cast<std::uint32_t>(header[i]) << (8 * i);
  }
  return length;
}

std::unexpected<Error> FrameTooLargeError(std::uint64_t length) {
  return InvalidArgumentError(StrCat("session frame length ", length, " exceeds the limit of ",
                                     kMaxSessionFrameBytes, " bytes"));
}

// Blocks until `socket` is ready for `events` (POLLIN or POLLOUT), or has hung up.
Status WaitUntilReady(int socket, short events) {
  pollfd entry{.fd = socket, .events = events, .revents = 0};
  while (true) {
    const int ready = ::poll(&entry, 1, -1);
    if (ready > 0) {
      if ((entry.revents & POLLNVAL) != 0) {
        return std::unexpected(SystemCallError("poll", EBADF));
      }
      // POLLHUP / POLLERR: the next recvmsg / sendmsg reports what happened.
      return {};
    }
    if (ready < 0 && errno != EINTR) return std::unexpected(SystemCallError("poll", errno));
  }
}

// Keeps the first descriptor of SCM_RIGHTS messages in `kept` (if it holds none yet) and
// closes every other one.
void TakeDescriptors(msghdr& message, UniqueFd& kept) {
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const auto* data = CMSG_DATA(header);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, data + i * sizeof(int), sizeof(int));
      if (!kept.valid()) {
        kept.Reset(fd);
      } else {
        UniqueFd unexpected(fd);  // Closed here: a frame carries at most one descriptor.
      }
    }
  }
}

// One recvmsg into `space`, retrying EINTR; a descriptor that comes with it goes into `fd`
// (when that holds none yet; any other is closed). The byte count (0 at end of stream), or
// std::nullopt when the socket would block.
Result<std::optional<std::size_t>> ReceiveSome(int socket, std::span<std::uint8_t> space,
                                               UniqueFd& fd) {
  iovec buffer{.iov_base = space.data(), .iov_len = space.size()};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * kMaxDescriptorsPerReceive)>
      control{};
  msghdr message{};
  message.msg_iov = &buffer;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  ssize_t received = 0;
  do {
    received = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
    return std::unexpected(SystemCallError("recvmsg", errno));
  }
  TakeDescriptors(message, fd);
  return static_cast<std::size_t>(received);
}

// The end of stream after `header_received` bytes of a frame's length prefix, or after the
// whole prefix and `payload_received` of its `payload_size` payload bytes.
std::unexpected<Error> EndOfStreamError(std::size_t header_received, std::size_t payload_received,
                       std::size_t payload_size) {
  if (header_received == 0) return UnavailableError("session socket closed by peer");
  if (header_received < kSessionFrameHeaderBytes) {
    return UnavailableError(
        StrCat("session socket closed by peer in the middle of a frame (length prefix: ",
               header_received, " of ", kSessionFrameHeaderBytes, " bytes)"));
  }
  return UnavailableError(
      StrCat("session socket closed by peer in the middle of a frame (payload: ",
             payload_received, " of ", payload_size, " bytes)"));
}

}  // namespace

Error SystemCallError(std::string_view call, int error_number) {
  return Error(CodeForErrno(error_number), StrCat(call, ": ", ErrnoText(error_number)));
}

Result<sockaddr_un> UnixSocketAddress(std::string_view path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty()) return InvalidArgumentError("socket path is empty");
  if (path.find('\0') != std::string_view::npos) {
    return InvalidArgumentError(
        StrCat("socket path '", path.substr(0, path.find('\0')), "...' contains a NUL byte"));
  }
  if (path.size() >= sizeof(address.sun_path)) {
    return InvalidArgumentError(StrCat("socket path '", path, "' is ", path.size(),
                                       " bytes; a unix socket path holds at most ",
                                       sizeof(address.sun_path) - 1));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

Result<UniqueFd> ConnectUnixSocket(const std::string& path) {
  auto address = UnixSocketAddress(path);
  if (!address) return std::unexpected(std::move(address).error());
  UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket) return std::unexpected(SystemCallError("socket", errno));
  while (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&*address),
                   sizeof(sockaddr_un)) != 0) {
    if (errno != EINTR) return std::unexpected(SystemCallError(StrCat("connect ", path), errno));
  }
  return socket;
}

Result<std::optional<Frame>> FrameReceiver::Continue(int socket) {
  while (true) {
    std::uint8_t* destination = nullptr;
    std::size_t wanted = 0;
    if (!header_complete_) {
      destination = header_ + header_received_;
      wanted = kSessionFrameHeaderBytes - header_received_;
    } else {
      wanted = frame_.payload.size() - payload_received_;
      if (wanted == 0) {
        Frame complete = std::move(frame_);
        frame_ = Frame{};
        header_received_ = 0;
        header_complete_ = false;
        payload_received_ = 0;
        return complete;
      }
      destination = frame_.payload.data() + payload_received_;
    }

    // Descriptors are owned (and closed) whatever happens next.
    auto received = ReceiveSome(socket, std::span(destination, wanted), frame_.fd);
    if (!received) return std::unexpected(std::move(received).error());
    if (!received->has_value()) return std::nullopt;
    if (**received == 0) {
      return EndOfStreamError(header_received_, payload_received_, frame_.payload.size());
    }
    const std::size_t count = **received;
    if (header_complete_) {
      payload_received_ += count;
      continue;
    }
    header_received_ += count;
    if (header_received_ < kSessionFrameHeaderBytes) continue;
    const std::uint32_t length = DecodeLength(header_);
    if (length > kMaxSessionFrameBytes) return FrameTooLargeError(length);
    header_complete_ = true;
    frame_.payload.resize(length);
  }
}

FrameSender::FrameSender(std::span<const std::uint8_t> payload, int fd_to_pass)
    : payload_(payload), fd_to_pass_(fd_to_pass) {
  EncodeLength(static_cast<std::uint32_t>(payload.size()), header_);
}

Result<bool> FrameSender::Continue(int socket) {
  if (payload_.size() > kMaxSessionFrameBytes) return FrameTooLargeError(payload_.size());
  const std::size_t total = kSessionFrameHeaderBytes + payload_.size();
  while (sent_ < total) {
    std::array<iovec, 2> buffers{};
    std::size_t buffer_count = 0;
    if (sent_ < kSessionFrameHeaderBytes) {
      buffers[buffer_count++] = {.iov_base = header_ + sent_,
                                 .iov_len = kSessionFrameHeaderBytes - sent_};
    }
    const std::size_t payload_offset =
        sent_ > kSessionFrameHeaderBytes ? sent_ - kSessionFrameHeaderBytes : 0;
    if (payload_offset < payload_.size()) {
      // sendmsg takes a non-const iovec but never writes through it.
      buffers[buffer_count++] = {
          .iov_base = const_cast<std::uint8_t*>(payload_.data() + payload_offset),
          .iov_len = payload_.size() - payload_offset};
    }
    msghdr message{};
    message.msg_iov = buffers.data();
    message.msg_iovlen = buffer_count;
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
    if (sent_ == 0 && fd_to_pass_ >= 0) {
      message.msg_control = control.data();
      message.msg_controllen = control.size();
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(header), &fd_to_pass_, sizeof(int));
    }
    const ssize_t written = ::sendmsg(socket, &message, MSG_NOSIGNAL);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      return std::unexpected(SystemCallError("sendmsg", errno));
    }
    sent_ += static_cast<std::size_t>(written);
  }
  return true;
}

Status SendFrame(int socket, std::span<const std::uint8_t> payload, int fd_to_pass) {
  FrameSender sender(payload, fd_to_pass);
  while (true) {
    auto done = sender.Continue(socket);
    if (!done) return std::unexpected(std::move(done).error());
    if (*done) return {};
    if (auto ready = WaitUntilReady(socket, POLLOUT); !ready) return ready;
  }
}

Result<Frame> ReceiveFrame(int socket) {
  FrameReceiver receiver;
  while (true) {
    auto frame = receiver.Continue(socket);
    if (!frame) return std::unexpected(std::move(frame).error());
    if (frame->has_value()) return std::move(**frame);
    if (auto ready = WaitUntilReady(socket, POLLIN); !ready) {
      return std::unexpected(std::move(ready).error());
    }
  }
}

Result<Frame> FrameReader::Next(int socket) {
  while (true) {
    auto frame = TakeFrame();
    if (!frame) return std::unexpected(std::move(frame).error());
    if (frame->has_value()) return std::move(**frame);
    const std::size_t available = end_ - begin_;
    std::size_t frame_bytes = kSessionFrameHeaderBytes;
    if (available >= kSessionFrameHeaderBytes) {
      std::uint8_t header[kSessionFrameHeaderBytes];
      std::memcpy(header, buffer_.data() + begin_, kSessionFrameHeaderBytes);
      frame_bytes += DecodeLength(header);  // TakeFrame() checked it against the limit.
    }
    auto received = Receive(socket, frame_bytes);
    if (!received) return std::unexpected(std::move(received).error());
    if (!*received) {
      if (auto ready = WaitUntilReady(socket, POLLIN); !ready) {
        return std::unexpected(std::move(ready).error());
      }
    }
  }
}

Result<std::optional<Frame>> FrameReader::TakeFrame() {
  const std::size_t available = end_ - begin_;
  if (available < kSessionFrameHeaderBytes) return std::nullopt;
  std::uint8_t header[kSessionFrameHeaderBytes];
  std::memcpy(header, buffer_.data() + begin_, kSessionFrameHeaderBytes);
  const std::uint32_t length = DecodeLength(header);
  if (length > kMaxSessionFrameBytes) return FrameTooLargeError(length);
  if (available - kSessionFrameHeaderBytes < length) return std::nullopt;

  const auto start = static_cast<std::ptrdiff_t>(begin_);
  const auto stop = static_cast<std::ptrdiff_t>(begin_ + kSessionFrameHeaderBytes + length);
  Frame frame;
  const auto* payload = buffer_.data() + begin_ + kSessionFrameHeaderBytes;
  frame.payload.assign(payload, payload + length);
  // This frame owns a descriptor whose read holds the frame's first byte, unless a later
  // frame also begins in that read. A descriptor whose read ends before the next frame
  // begins can belong to no frame any more.
  std::erase_if(descriptors_, [&](PendingDescriptor& pending) {
    if (pending.read_begin <= start && start < pending.read_end && stop >= pending.read_end) {
      if (!frame.fd.valid()) frame.fd = std::move(pending.fd);
      return true;  // A second one is closed with its entry.
    }
    return pending.read_end <= stop;
  });
  begin_ = static_cast<std::size_t>(stop);
  if (begin_ == end_) {
    begin_ = 0;
    end_ = 0;
    // After a large frame, give the memory back.
    if (buffer_.size() > kReaderKeptBytes) std::vector<std::uint8_t>().swap(buffer_);
  }
  return frame;
}

Result<bool> FrameReader::Receive(int socket, std::size_t frame_bytes) {
  if (begin_ > 0 && buffer_.size() - begin_ < std::max(frame_bytes, kReaderChunkBytes)) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    for (PendingDescriptor& pending : descriptors_) {
      pending.read_begin -= static_cast<std::ptrdiff_t>(begin_);
      pending.read_end -= static_cast<std::ptrdiff_t>(begin_);
    }
    end_ -= begin_;
    begin_ = 0;
  }
  const std::size_t wanted = std::max(begin_ + frame_bytes, kReaderChunkBytes);
  if (buffer_.size() < wanted) buffer_.resize(wanted);

  UniqueFd descriptor;  // Owned (and closed) whatever happens next.
  auto received = ReceiveSome(socket, std::span(buffer_).subspan(end_), descriptor);
  if (!received) return std::unexpected(std::move(received).error());
  if (!received->has_value()) return false;
  const std::size_t count = **received;
  if (count == 0) {
    const std::size_t available = end_ - begin_;
    const std::size_t header_received = std::min(available, kSessionFrameHeaderBytes);
    return EndOfStreamError(header_received, available - header_received,
                            frame_bytes - kSessionFrameHeaderBytes);
  }
  if (descriptor.valid()) {
    descriptors_.push_back(PendingDescriptor{.read_begin = static_cast<std::ptrdiff_t>(end_),
                                             .read_end = static_cast<std::ptrdiff_t>(end_ + count),
                                             .fd = std::move(descriptor)});
  }
  end_ += count;
  return true;
}

Result<PeerCredentials> ReadPeerCredentials(int socket) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return std::unexpected(SystemCallError("getsockopt(SO_PEERCRED)", errno));
  }
  return PeerCredentials{.pid = credentials.pid, .uid = credentials.uid, .gid = credentials.gid};
}

}  // namespace hurray
