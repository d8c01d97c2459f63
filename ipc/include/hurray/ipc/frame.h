// Framing of the session socket (proto/hurray/v1/session.proto), shared by hurrayd and the
// client library: a 4-byte little-endian length, then that many payload bytes (at most
// kMaxSessionFrameBytes), with at most one file descriptor attached as SCM_RIGHTS ancillary
// data to the first byte of the frame. FrameSender writes frames and FrameReader reads
// them; both move raw frame bytes, and encoding the SessionMessage inside them is the
// caller's job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hurray/ipc/unique_fd.h"

namespace hurray {

// Largest payload of one frame, header excluded.
inline constexpr std::size_t kMaxSessionFrameBytes = std::size_t{1} << 20;
// Bytes of the length prefix in front of every payload.
inline constexpr std::size_t kSessionFrameHeaderBytes = 4;

// One received frame: its payload and the descriptor that came with it, if any.
// A plain value; not thread-safe.
struct Frame {
  std::vector<std::uint8_t> payload;
  UniqueFd fd;  // Invalid when the frame carried none. Opened with O_CLOEXEC.
};

}  // namespace hurray
