#include "frame_header.h"

#include <fmt/format.h>

namespace hurray::ipc_internal {

void EncodeFrameLength(std::uint32_t length, FrameHeader& header) {
  for (std::size_t i = 0; i < kSessionFrameHeaderBytes; ++i) {
    header[i] = static_cast<std::uint8_t>(length >> (8 * i));
  }
}

std::uint32_t DecodeFrameLength(const FrameHeader& header) {
  std::uint32_t length = 0;
  for (std::size_t i = 0; i < kSessionFrameHeaderBytes; ++i) {
    length |= static_cast<std::uint32_t>(header[i]) << (8 * i);
  }
  return length;
}

std::unexpected<Error> FrameTooLargeError(std::uint64_t length) {
  return InvalidArgumentError(fmt::format("session frame length {} exceeds the limit of {} bytes",
                                          length, kMaxSessionFrameBytes));
}

}  // namespace hurray::ipc_internal
