// ChildProcess: a program the integration tests run as a real, separate process (the
// daemon, the agents), started with fork/exec.
//
// Its stdout is either captured through a pipe (read it line by line with ReadLine) or
// written to a file; its stderr goes to a file or is inherited. Children get no core dumps
// (some are meant to die by SIGSEGV) and are killed when the thread that started them
// ends, so a crashed test leaves nothing running. The destructor kills a child still
// running (SIGKILL) and reaps it.
//
// Not thread-safe: use one ChildProcess from one thread at a time, and start children from
// the test's main thread (the parent-death signal follows the starting thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <vector>

namespace hurray::integration {

class ChildProcess {
 public:
  struct Options {
    // Empty: capture stdout through a pipe. Otherwise: append stdout to this file.
    std::string stdout_path;
    // Empty: inherit the test's stderr. Otherwise: append stderr to this file.
    std::string stderr_path;
    // Signal the child receives when the starting thread ends.
    int parent_death_signal = SIGKILL;
    // Extra "NAME=value" environment entries, on top of the test's environment.
    std::vector<std::string> environment;
  };

  // Starts `argv[0]` with `argv`. On failure (fork, pipe, or exec of a missing program)
  // the child exits 127 and Wait reports it.
  static ChildProcess Start(const std::vector<std::string>& argv, const Options& options);
  static ChildProcess Start(const std::vector<std::string>& argv) { return Start(argv, {}); }

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
  void CloseOutput();

  pid_t pid_ = -1;
  std::optional<int> status_;  // Set once reaped.
  int stdout_fd_ = -1;         // Read end of the stdout pipe, when captured.
  std::string pending_;        // Captured bytes not yet returned.
  bool stdout_closed_ = false;
  std::string command_line_;
};

// "exited 3", "killed by signal 11 (Segmentation fault)".
[[nodiscard]] std::string DescribeWaitStatus(int status);

}  // namespace hurray::integration
