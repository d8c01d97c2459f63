// Processes of the benchmark: the children it starts (hurrayd, redis-server, its own
// baseline servers, the measuring workers) and where they run (CPU affinity).
//
// Every figure is taken in two placements (placement.h), so a child can be started with a
// CPU set (applied in the child before exec, so every thread it ever makes inherits it),
// and a running process can be moved, all its threads at once.
//
// Not thread-safe: start and use children from the harness's main thread (the children's
// parent-death signal follows the thread that started them).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <optional>
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

// A child process started with fork/exec. Its stdout is captured through a pipe (read it
// with ReadLine) or appended to a file; its stdin is /dev/null or a pipe (WriteLine). The
// destructor kills a child still running (SIGKILL) and reaps it.
class ChildProcess {
 public:
  struct Options {
    // Empty: capture stdout through a pipe. Otherwise: append stdout to this file.
    std::string stdout_path;
    // Empty: inherit the harness's stderr. Otherwise: append stderr to this file.
    std::string stderr_path;
    // Give the child a stdin pipe (WriteLine); otherwise its stdin is /dev/null.
    bool stdin_pipe = false;
    // CPUs the child runs on (set before exec); empty: inherit the harness's.
    std::vector<int> cpus;
    // Sent to the child when the harness's main thread ends (a crashed run leaves nothing).
    int parent_death_signal = SIGKILL;
  };

  // Starts `argv[0]` (a path) with `argv`. INTERNAL when fork or a pipe fails; a program
  // that cannot be executed exits 127 (Wait reports it).
  [[nodiscard]] static Result<ChildProcess> Start(const std::vector<std::string>& argv,
                                                  const Options& options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  [[nodiscard]] pid_t pid() const { return pid_; }
  // "argv[0] arg1 arg2", for messages.
  [[nodiscard]] const std::string& command_line() const { return command_line_; }

  // The next line of captured stdout without its newline, waiting up to `timeout`.
  // nullopt at end of stream or when the time is up.
  [[nodiscard]] std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);

  // Writes `line` and a newline to the child's stdin pipe. UNAVAILABLE when it is closed.
  [[nodiscard]] Status WriteLine(const std::string& line);

  // Sends `signal` to a child not yet reaped.
  void Signal(int signal);

  // Whether the child is still running (not yet exited, or exited but not reaped).
  [[nodiscard]] bool Running();

  // Waits up to `timeout` for the child to end: its wait status, or nullopt while it runs.
  [[nodiscard]] std::optional<int> Wait(std::chrono::milliseconds timeout);

  // SIGKILL, then reap. No-op when already reaped.
  void Kill();

 private:
  ChildProcess() = default;
  void CloseStreams();

  pid_t pid_ = -1;
  std::optional<int> status_;  // Set once reaped.
  int stdout_fd_ = -1;         // Read end of the stdout pipe, when captured.
  int stdin_fd_ = -1;          // Write end of the stdin pipe, when given.
  std::string pending_;        // Captured bytes not yet returned.
  bool stdout_closed_ = false;
  std::string command_line_;
};

// "exited 3", "killed by signal 9 (Killed)".
[[nodiscard]] std::string DescribeWaitStatus(int status);

}  // namespace hurray::bench
