#include "random_hex.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <cerrno>
#include <vector>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon {

Result<std::string> RandomHex(std::size_t byte_count) { return RandomHex(byte_count, ::getrandom); }

Result<std::string> RandomHex(std::size_t byte_count, ReadRandom read_random) {
  std::vector<unsigned char> bytes(byte_count);
  std::size_t filled = 0;
  int interruptions = 0;
  while (filled < bytes.size()) {
    const ssize_t got = read_random(bytes.data() + filled, bytes.size() - filled, 0);
    if (got > 0) {
      filled += static_cast<std::size_t>(got);
      interruptions = 0;
      continue;
    }
    // getrandom never reads 0 bytes of a non-empty request: count it as an interruption
    // rather than spin.
    const int error_number = got < 0 ? errno : EINTR;
    if (error_number != EINTR || ++interruptions > kMaxRandomInterruptions) {
      // INTERNAL whatever the errno: no caller can do anything about the kernel's pool.
      return InternalError(ErrnoError("getrandom", "", error_number).message());
    }
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * byte_count);
  for (const unsigned char byte : bytes) {
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 0xF];
  }
  return hex;
}

}  // namespace hurray::daemon
