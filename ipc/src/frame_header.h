// The length prefix of a frame (hurray/ipc/frame.h): its encoding and its limit. Pure
// functions; thread-safe.
#pragma once

#include <cstdint>
#include <expected>

#include "hurray/error.h"
#include "hurray/ipc/frame.h"

namespace hurray::ipc_internal {

using FrameHeader = std::uint8_t[kSessionFrameHeaderBytes];

// Writes `length` into `header`, little-endian.
void EncodeFrameLength(std::uint32_t length, FrameHeader& header);

// The length `header` holds.
[[nodiscard]] std::uint32_t DecodeFrameLength(const FrameHeader& header);

// INVALID_ARGUMENT "session frame length <length> exceeds the limit of ... bytes".
[[nodiscard]] std::unexpected<Error> FrameTooLargeError(std::uint64_t length);

}  // namespace hurray::ipc_internal
