#include "hurray/ipc/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace hurray {

void FutexWait(const std::uint32_t* word, std::uint32_t expected,
               std::chrono::nanoseconds timeout) {
  if (timeout < std::chrono::nanoseconds::zero()) timeout = std::chrono::nanoseconds::zero();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec relative{
      .tv_sec = static_cast<time_t>(seconds.count()),
      .tv_nsec = static_cast<decltype(timespec::tv_nsec)>((timeout - seconds).count())};
  // FUTEX_WAIT only reads the word, so a read-only mapping serves (the kernel takes the
  // page for reading when it may not write it).
  // 0 (woken), EAGAIN (the word changed before the wait), EINTR, ETIMEDOUT: the caller
  // looks again either way.
  (void)::syscall(SYS_futex, word, FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void FutexWakeAll(const std::uint32_t* word) {
  (void)::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace hurray
