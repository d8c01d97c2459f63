#include "hurray/ipc/frame_sender.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <utility>

#include "frame_header.h"
#include "hurray/ipc/errno_error.h"
#include "socket_wait.h"

namespace hurray {

using ipc_internal::FrameTooLargeError;

FrameSender::FrameSender(std::span<const std::uint8_t> payload, int fd_to_pass)
    : payload_(payload), fd_to_pass_(fd_to_pass) {
  ipc_internal::EncodeFrameLength(static_cast<std::uint32_t>(payload.size()), header_);
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
      return ErrnoFailure("sendmsg", "", errno);
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
    HURRAY_RETURN_IF_ERROR(ipc_internal::WaitUntilReady(socket, POLLOUT));
  }
}

}  // namespace hurray
