// Futexes on words of shared memory (futex(2), not FUTEX_PRIVATE_FLAG): a process that
// maps the same file, even read-only, waits on a word until another process changes it and
// wakes the word. The fast path's consumers wait this way for a directory entry to change
// (hurray/ipc/fast_path_layout.h); the daemon wakes them as it writes the entry.
#pragma once

#include <chrono>
#include <cstdint>

namespace hurray {

// How a FutexWait ended.
enum class FutexWaitEnd : std::uint8_t {
  kWoken,     // Woken, or the word no longer held `expected` (perhaps spuriously: look again).
  kTimedOut,  // `timeout` passed.
};

// Sleeps while `*word` holds `expected`, at most `timeout` (below 0 counts as 0), until a
// FutexWakeAll on the same word of the same file. Returns at once when the word holds
// another value. A signal ends the wait early (kWoken). `word` must be 4-byte aligned.
FutexWaitEnd FutexWait(const std::uint32_t* word, std::uint32_t expected,
                       std::chrono::nanoseconds timeout);

// Wakes every process and thread waiting on `word` (one system call; with nobody waiting,
// the kernel looks up one hash bucket).
void FutexWakeAll(const std::uint32_t* word);

}  // namespace hurray
