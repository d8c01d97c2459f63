// ChildProcess: a program run as a real, separate process (hurrayd, hurrayctl, the test
// agents, the benchmark's servers and workers), started with fork/exec.
//
// Its stdout is captured through a pipe (ReadLine, ReadToEnd) or appended to a file; its
// stderr is appended to a file or inherited; its stdin is /dev/null or a pipe (WriteLine).
// Its environment is the parent's, with entries added, replaced or removed. It may be
// started on a set of CPUs (set before exec, so every thread it ever makes inherits them).
// Children get no core dumps (some are meant to die by SIGSEGV or SIGKILL) and get a signal
// when the thread that started them ends, so a crashed parent leaves nothing running. The
// destructor kills a child still running (SIGKILL) and reaps it.
//
// Not thread-safe: use one ChildProcess from one thread at a time, and start children from
// the parent's main thread (the parent-death signal follows the starting thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "hurray/error.h"

namespace hurray::testing {

class ChildProcess {
 public:
  struct Options {
    // Empty: capture stdout through a pipe. Otherwise: append stdout to this file.
    std::string stdout_path;
    // Empty: inherit the parent's stderr. Otherwise: append stderr to this file.
    std::string stderr_path;
    // Give the child a stdin pipe (WriteLine); otherwise its stdin is /dev/null.
    bool stdin_pipe = false;
    // CPUs the child runs on; empty: the parent's.
    std::vector<int> cpus;
    // Signal the child receives when the starting thread ends.
    int parent_death_signal = SIGKILL;
    // "NAME=value" entries added to the parent's environment (replacing any NAME there).
    std::vector<std::string> environment;
    // Names removed from the parent's environment.
    std::vector<std::string> unset_environment;
  };

  // Starts `argv[0]` (a path, not searched on PATH) with `argv`. INTERNAL naming the call
  // when a pipe or fork fails. A program that cannot be executed, or a redirection that
  // cannot be made, makes the child exit 127 (Wait reports it).
  [[nodiscard]] static Result<ChildProcess> Start(const std::vector<std::string>& argv,
                                                  const Options& options);
  [[nodiscard]] static Result<ChildProcess> Start(const std::vector<std::string>& argv) {
    return Start(argv, {});
  }

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  [[nodiscard]] pid_t pid() const { return pid_; }
  // "argv[0] arg1 arg2", for messages.
  [[nodiscard]] const std::string& command_line() const { return command_line_; }

  // The next line of captured stdout, without its newline, waiting up to `timeout` for it.
  // nullopt at end of stream or when the time is up.
  [[nodiscard]] std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);

  // Everything left on captured stdout until the child closes it, waiting up to `timeout`.
  // nullopt when the time is up first.
  [[nodiscard]] std::optional<std::string> ReadToEnd(std::chrono::milliseconds timeout);

  // Writes `line` and a newline to the child's stdin pipe. UNAVAILABLE when there is no
  // pipe or the child closed it.
  [[nodiscard]] Status WriteLine(const std::string& line);

  // Sends `signal` to a child that has not been reaped yet.
  void Signal(int signal);

  // Whether the child is still running (not yet exited, or exited but not reaped).
  [[nodiscard]] bool Running();

  // Waits up to `timeout` for the child to end; its wait status (as waitpid gives it), or
  // nullopt when it is still running. Once reaped, returns the same status again.
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

// "exited 3", "killed by signal 11 (Segmentation fault)".
[[nodiscard]] std::string DescribeWaitStatus(int status);

}  // namespace hurray::testing
