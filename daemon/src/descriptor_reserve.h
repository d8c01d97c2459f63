// The descriptors the daemon keeps in reserve: connections (on either socket) never take
// the last `reserved_descriptors` of RLIMIT_NOFILE, so that the journal, the segments and
// the descriptors sent over the session socket still get theirs while a flood of
// connections is refused. Thread-safe (each call reads the limit anew: an operator may
// raise it with prlimit while the daemon runs).
#pragma once

#include <cstdint>
#include <optional>

#include "hurray/error.h"

namespace hurray::daemon {

// The soft and hard RLIMIT_NOFILE of the process.
struct DescriptorLimit {
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (once, at start) and returns the limit
// now in force; errors of getrlimit/setrlimit (hurray/errno_error.h).
[[nodiscard]] Result<DescriptorLimit> RaiseDescriptorLimitToHard();

// Whether descriptor `fd` is one of the last `reserve` below `soft_limit`. Descriptors are
// handed out lowest first, so a connection that got one of those leaves fewer than
// `reserve` free. A pure function, for the tests.
[[nodiscard]] bool InDescriptorReserve(int fd, std::uint64_t soft_limit, std::uint32_t reserve);

// RESOURCE_EXHAUSTED naming reserved_descriptors when a connection accepted on `fd` would
// eat into the reserve of RLIMIT_NOFILE now in force; nullopt otherwise (and always for a
// reserve of 0).
[[nodiscard]] std::optional<Error> DescriptorReserveRefusal(int fd, std::uint32_t reserve);

}  // namespace hurray::daemon
