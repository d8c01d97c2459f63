// Random hex: unguessable names and tokens from the kernel's random pool (getrandom(2)).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "hurray/error.h"

namespace hurray::daemon {

// `byte_count` random bytes as 2 * byte_count lower-case hex digits. getrandom is retried
// when a signal interrupts it (at most kMaxRandomInterruptions times in a row) and after a
// short read; INTERNAL naming getrandom and its errno for any other failure, or when the
// interruptions go on. Thread-safe.
[[nodiscard]] Result<std::string> RandomHex(std::size_t byte_count);

inline constexpr int kMaxRandomInterruptions = 16;

// RandomHex over `read_random`, a stand-in for getrandom(2) with its contract (the bytes
// read, or -1 with errno set), so that tests can make it fail.
using ReadRandom = ssize_t (*)(void* buffer, std::size_t length, unsigned int flags);
[[nodiscard]] Result<std::string> RandomHex(std::size_t byte_count, ReadRandom read_random);

}  // namespace hurray::daemon
