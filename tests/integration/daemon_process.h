// DaemonProcess: the real hurrayd binary, run as a child process for one test.
//
// Each daemon gets a fresh temporary directory holding its sockets (d.sock and
// d.sock.session), its configuration file and its log (stdout and stderr, --log-level
// warn), and a shared-memory prefix of its own ("hurray-it-<test pid>-<n>"), so a test can
// tell this daemon's /dev/shm segments from any other's.
//
// Failures are reported as GoogleTest failures (the log is printed with them). Not
// thread-safe; start and stop daemons from the test's main thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"

namespace hurray::integration {

class DaemonProcess {
 public:
  struct Options {
    // --cpu-pool-capacity, in bytes.
    std::uint64_t pool_capacity_bytes = std::uint64_t{64} << 20;
  };

  // Starts hurrayd and waits (polling, up to ~15 s) until a client connects and Stats
  // answers. On failure records a test failure, with the daemon's log, and returns null.
  [[nodiscard]] static std::unique_ptr<DaemonProcess> Start(const Options& options);

  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  // Kills the daemon if it still runs (SIGKILL), removes any segment it left and the
  // temporary directory.
  ~DaemonProcess();

  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }
  [[nodiscard]] std::string session_socket_path() const { return socket_path_ + ".session"; }
  [[nodiscard]] const std::string& directory() const { return directory_; }
  [[nodiscard]] const std::string& shm_prefix() const { return shm_prefix_; }
  [[nodiscard]] std::uint64_t pool_capacity_bytes() const { return options_.pool_capacity_bytes; }
  [[nodiscard]] pid_t pid() const { return process_.pid(); }
  [[nodiscard]] bool Running() { return process_.Running(); }

  // Names of this daemon's segments in /dev/shm ("<prefix>-<hex>").
  [[nodiscard]] std::vector<std::string> Segments() const;

  // The daemon's stdout and stderr so far.
  [[nodiscard]] std::string Log() const;

  // Sends SIGTERM and waits for the daemon to end; expects exit status 0, both socket files
  // removed and no segment of this daemon left in /dev/shm. Idempotent.
  void Stop();

 private:
  DaemonProcess(Options options, std::string directory, std::string shm_prefix,
                ChildProcess process);

  Options options_;
  std::string directory_;
  std::string socket_path_;
  std::string log_path_;
  std::string shm_prefix_;
  ChildProcess process_;
  bool stopped_ = false;
};

}  // namespace hurray::integration
