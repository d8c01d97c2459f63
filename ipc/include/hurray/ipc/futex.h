// Futexes on words of shared memory (futex(2), not FUTEX_PRIVATE_FLAG): a process that
// maps the same file, even read-only, waits on a word until another process changes it and
// wakes the word. The fast path's consumers wait this way for a directory entry to change
// (hurray/ipc/fast_path_layout.h); the daemon wakes them as it writes the entry.
#pragma once

#include <chrono>
#include <cstdint>

namespace hurray {

// Sleeps while `*word` holds `expected`, at most `timeout` (below 0 counts as 0), until a
// FutexWakeAll on the same word of the same file. Returns at once when the word holds
// another value; a signal, or a spurious wake-up, ends the wait early: the caller looks at
// the word and its clock again. `word` must be 4-byte aligned.
void FutexWait(const std::uint32_t* word, std::uint32_t expected, std::chrono::nanoseconds timeout);

// Wakes every process and thread waiting on `word` (one system call; with nobody waiting,
// the kernel looks up one hash bucket).
void FutexWakeAll(const std::uint32_t* word);

}  // namespace hurray
