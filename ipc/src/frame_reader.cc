#include "hurray/ipc/frame_reader.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <span>
#include <utility>

#include "frame_header.h"
#include "hurray/ipc/errno_error.h"
#include "socket_wait.h"

namespace hurray {
namespace {

using ipc_internal::DecodeFrameLength;

// Room for a few descriptors per recvmsg: a frame carries at most one, and the kernel drops
// (closes) any that do not fit, so a peer that sends many cannot exhaust ours.
constexpr std::size_t kMaxDescriptorsPerReceive = 4;
// The reader's buffer: what one read asks for at least, and the most it keeps between
// frames (a larger frame grows it for as long as it takes).
constexpr std::size_t kReaderChunkBytes = std::size_t{16} << 10;
constexpr std::size_t kReaderKeptBytes = std::size_t{64} << 10;

// Keeps the first descriptor of SCM_RIGHTS messages in `kept` (if it holds none yet) and
// closes every other one; returns how many it closed.
std::uint64_t TakeDescriptors(msghdr& message, UniqueFd& kept) {
  std::uint64_t closed = 0;
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
        ++closed;
      }
    }
  }
  return closed;
}

// One recvmsg into `space`, retrying EINTR; a descriptor that comes with it goes into `fd`
// (when that holds none yet; any other is closed and counted in `closed`). The byte count
// (0 at end of stream), or std::nullopt when the socket would block.
Result<std::optional<std::size_t>> ReceiveSome(int socket, std::span<std::uint8_t> space,
                                               UniqueFd& fd, std::uint64_t& closed) {
  iovec buffer{.iov_base = space.data(), .iov_len = space.size()};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * kMaxDescriptorsPerReceive)> control{};
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
    return ErrnoFailure("recvmsg", "", errno);
  }
  closed += TakeDescriptors(message, fd);
  return static_cast<std::size_t>(received);
}

// The end of stream after `header_received` bytes of a frame's length prefix, or after the
// whole prefix and `payload_received` of its `payload_size` payload bytes.
std::unexpected<Error> EndOfStreamError(std::size_t header_received, std::size_t payload_received,
                                        std::size_t payload_size) {
  if (header_received == 0) return UnavailableError("session socket closed by peer");
  if (header_received < kSessionFrameHeaderBytes) {
    return UnavailableError(fmt::format(
        "session socket closed by peer in the middle of a frame (length prefix: {} of {} bytes)",
        header_received, kSessionFrameHeaderBytes));
  }
  return UnavailableError(fmt::format(
      "session socket closed by peer in the middle of a frame (payload: {} of {} bytes)",
      payload_received, payload_size));
}

}  // namespace

Result<Frame> FrameReader::Next(int socket) {
  Frame frame;
  HURRAY_RETURN_IF_ERROR(NextInto(socket, frame));
  return frame;
}

Result<std::optional<Frame>> FrameReader::TryNext(int socket) {
  Frame frame;
  HURRAY_ASSIGN_OR_RETURN(const bool complete, TryNextInto(socket, frame));
  if (!complete) return std::nullopt;
  return frame;
}

Status FrameReader::NextInto(int socket, Frame& frame) {
  while (true) {
    HURRAY_ASSIGN_OR_RETURN(const bool complete, TryNextInto(socket, frame));
    if (complete) return {};
    HURRAY_RETURN_IF_ERROR(ipc_internal::WaitUntilReady(socket, POLLIN));
  }
}

Result<bool> FrameReader::TryNextInto(int socket, Frame& frame) {
  while (true) {
    HURRAY_ASSIGN_OR_RETURN(const bool taken, TakeFrame(frame));
    if (taken) return true;
    const std::size_t available = end_ - begin_;
    std::size_t frame_bytes = kSessionFrameHeaderBytes;
    if (available >= kSessionFrameHeaderBytes) {
      std::uint8_t header[kSessionFrameHeaderBytes];
      std::memcpy(header, buffer_.data() + begin_, kSessionFrameHeaderBytes);
      frame_bytes += DecodeFrameLength(header);  // TakeFrame() checked it against the limit.
    }
    HURRAY_ASSIGN_OR_RETURN(const bool received, Receive(socket, frame_bytes));
    if (!received) return false;
  }
}

Result<bool> FrameReader::TakeFrame(Frame& frame) {
  const std::size_t available = end_ - begin_;
  if (available < kSessionFrameHeaderBytes) return false;
  std::uint8_t header[kSessionFrameHeaderBytes];
  std::memcpy(header, buffer_.data() + begin_, kSessionFrameHeaderBytes);
  const std::uint32_t length = DecodeFrameLength(header);
  if (length > kMaxSessionFrameBytes) return ipc_internal::FrameTooLargeError(length);
  if (available - kSessionFrameHeaderBytes < length) return false;

  const auto start = static_cast<std::ptrdiff_t>(begin_);
  const auto stop = static_cast<std::ptrdiff_t>(begin_ + kSessionFrameHeaderBytes + length);
  const auto* payload = buffer_.data() + begin_ + kSessionFrameHeaderBytes;
  frame.payload.assign(payload, payload + length);
  frame.fd.Reset();
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
  return true;
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
  // Room for the frame, but at most twice what came so far: a length prefix alone buys no
  // memory. (More than end_ either way: the frame at begin_ is not complete.)
  const std::size_t wanted = std::max(kReaderChunkBytes, std::min(begin_ + frame_bytes, 2 * end_));
  if (buffer_.size() < wanted) buffer_.resize(wanted);

  UniqueFd descriptor;  // Owned (and closed) whatever happens next.
  HURRAY_ASSIGN_OR_RETURN(
      const std::optional<std::size_t> received,
      ReceiveSome(socket, std::span(buffer_).subspan(end_), descriptor, closed_descriptors_));
  if (!received.has_value()) return false;
  const std::size_t count = *received;
  if (count == 0) {
    const std::size_t available = end_ - begin_;
    const std::size_t header_received = std::min(available, kSessionFrameHeaderBytes);
    return EndOfStreamError(header_received, available - header_received,
                            frame_bytes - kSessionFrameHeaderBytes);
  }
  if (descriptor.valid() && descriptors_policy_ == Descriptors::kClose) {
    descriptor.Reset();
    ++closed_descriptors_;
  }
  if (descriptor.valid()) {
    if (descriptors_.size() >= kMaxPendingDescriptors) {
      return InvalidArgumentError(
          fmt::format("the peer sent more than {} descriptors with frames not yet complete",
                      kMaxPendingDescriptors));
    }
    descriptors_.push_back(PendingDescriptor{.read_begin = static_cast<std::ptrdiff_t>(end_),
                                             .read_end = static_cast<std::ptrdiff_t>(end_ + count),
                                             .fd = std::move(descriptor)});
  }
  end_ += count;
  return true;
}

}  // namespace hurray
