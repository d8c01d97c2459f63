// What the registry gives a session: its id and token, and descriptors on the fast path's
// directory and on the session's lease page. Plain values; no transport.
#pragma once

#include <cstdint>
#include <string>

#include "hurray/ipc/unique_fd.h"

namespace hurray::daemon {

// What a session is known by: its id in the daemon, and the token a client presents on calls
// made for it (gRPC sends it as metadata).
struct SessionGrant {
  std::uint64_t session_id;
  std::string token;
};

// The fast path's directory, for one session: a read-only descriptor and its shape.
struct DirectoryAccess {
  UniqueFd fd;
  std::uint64_t size = 0;         // Bytes of the segment.
  std::uint64_t entry_count = 0;  // Entries after its header.
};

// A session's lease page: a read-write descriptor, and the slots it holds at its start.
struct LeasePageAccess {
  UniqueFd fd;
  std::uint64_t size = 0;
  std::uint32_t slot_count = 0;
};

}  // namespace hurray::daemon
