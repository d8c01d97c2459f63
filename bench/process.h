// Processes of the benchmark (hurrayd, redis-server, its own baseline servers, the
// measuring workers, all started as testing::ChildProcess): where they run (CPU affinity)
// and what memory they hold.
//
// Every figure is taken in two placements (placement.h), so a child is started with a CPU
// set (ChildProcess::Options::cpus) and a running process can be moved, all its threads at
// once.
//
// Thread-safe (system calls and /proc reads only).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hurray/error.h"

namespace hurray::bench {

// The CPUs this process may run on (sched_getaffinity), in increasing order.
[[nodiscard]] std::vector<int> AllowedCpus();

// Moves every thread of process `pid` onto `cpus` (sched_setaffinity on each
// /proc/PID/task entry). Threads started later inherit the mask of the thread that starts
// them. INTERNAL naming the thread when the kernel refuses.
[[nodiscard]] Status SetProcessAffinity(pid_t pid, const std::vector<int>& cpus);

// The running executable (/proc/self/exe), to start this binary again in a worker role.
[[nodiscard]] std::string SelfExecutable();

// Memory of a process from /proc/PID/status, in bytes.
struct ProcessMemory {
  std::uint64_t vm_rss = 0;     // Everything resident.
  std::uint64_t rss_anon = 0;   // Private memory: the heap, where the daemon keeps its state.
  std::uint64_t rss_file = 0;   // Mapped files (the binary, libraries).
  std::uint64_t rss_shmem = 0;  // Shared memory touched through the process's mappings.
};

// NOT_FOUND when the process is gone; INTERNAL when the file does not parse.
[[nodiscard]] Result<ProcessMemory> ReadProcessMemory(pid_t pid);

// What the threads of a process have run so far, summed over those alive now.
struct ProcessCpu {
  std::uint64_t cpu_ns = 0;            // On a CPU (/proc/PID/task/TID/schedstat, first field).
  std::uint64_t context_switches = 0;  // Voluntary and not (/proc/PID/task/TID/status).
};

// NOT_FOUND when the process is gone; INTERNAL when a thread's file does not parse. A thread
// that ends while it is read is left out.
[[nodiscard]] Result<ProcessCpu> ReadProcessCpu(pid_t pid);

}  // namespace hurray::bench
