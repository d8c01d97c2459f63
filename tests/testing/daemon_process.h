// DaemonProcess: the real hurrayd binary, run as a child process on a socket in a directory
// of its own, for a test or a benchmark run.
//
// Each daemon's directory (a fresh TempDir, or one the caller names) holds its sockets
// (d.sock and d.sock.session), its configuration file (hurrayd.toml) and its log (stdout and
// stderr, hurrayd.log). Each daemon gets a shared-memory prefix of its own
// ("<name>-<parent pid>-<n>"), so its /dev/shm segments can be told from any other's.
//
// Failures are returned, never reported to a test framework: callers in tests assert on
// them (ASSERT_OK_AND_ASSIGN, ExpectStopsCleanly in daemon_expectations.h).
//
// Not thread-safe; start and stop daemons from the parent's main thread (the daemon gets
// SIGTERM, and so shuts down cleanly, when the thread that started it ends).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hurray/error.h"
#include "testing/child_process.h"
#include "testing/temp_dir.h"

namespace hurray::testing {

class DaemonProcess {
 public:
  struct Options {
    // The hurrayd binary's path. Required.
    std::string binary;
    // Starts the names of the temporary directory and of the shared-memory prefix.
    std::string name = "hurray-test";
    // Empty: a fresh TempDir (/tmp/<name>-XXXXXX), removed with the daemon. Otherwise this
    // directory, created when missing and left in place.
    std::string directory;
    // --cpu-pool-capacity, in bytes; 0: none (the embedded default, which follows the
    // machine's RAM and free /dev/shm).
    std::uint64_t pool_capacity_bytes = std::uint64_t{64} << 20;
    // --log-level.
    std::string log_level = "warn";
    // Further "key = value" TOML lines at the top of the configuration (before any table).
    std::vector<std::string> settings;
    // Further "key = value" TOML lines of the configuration's [cpu_pool] table.
    std::vector<std::string> cpu_pool_settings;
    // CPUs the daemon starts on; empty: the parent's.
    std::vector<int> cpus;
    // The daemon's state_directory (its journal); empty: "<directory>/state". A daemon
    // started on the directory (and shm_prefix) of one that was killed adopts its tensors.
    std::string state_directory;
    // The shared-memory prefix; empty: "<name>-<parent pid>-<n>", unique to this daemon.
    std::string shm_prefix;
    // Where this process sees the daemon's /dev/shm (Segments, and the cleanup): another
    // path for a daemon in a mount namespace of its own (/proc/<pid>/root/dev/shm).
    std::string shm_directory = "/dev/shm";
  };

  // Starts hurrayd and waits (polling, up to 60 s: reserving a large pool takes a while)
  // until a client connects and Stats answers. INVALID_ARGUMENT without a binary; INTERNAL
  // when the directory, the configuration file or the process cannot be made; UNAVAILABLE,
  // with the end of the daemon's log, when it exits or does not serve in time.
  [[nodiscard]] static Result<std::unique_ptr<DaemonProcess>> Start(const Options& options);

  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  // Stops the daemon if Stop was not called (killing it if it does not end), removes any
  // /dev/shm segment of its prefix, and its directory when that is a TempDir.
  ~DaemonProcess();

  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }
  [[nodiscard]] std::string session_socket_path() const { return socket_path_ + ".session"; }
  [[nodiscard]] const std::string& directory() const { return directory_; }
  [[nodiscard]] const std::string& shm_prefix() const { return shm_prefix_; }
  [[nodiscard]] std::uint64_t pool_capacity_bytes() const { return options_.pool_capacity_bytes; }
  [[nodiscard]] pid_t pid() const { return process_.pid(); }
  [[nodiscard]] bool Running() { return process_.Running(); }
  // Whether Stop has been called.
  [[nodiscard]] bool stopped() const { return stop_result_.has_value(); }

  // Names of this daemon's segments in its shm_directory ("<prefix>-<hex>").
  [[nodiscard]] std::vector<std::string> Segments() const;

  // The daemon's stdout and stderr so far; only the last `max_bytes`, after "...", when
  // there is more.
  [[nodiscard]] std::string Log(std::size_t max_bytes = std::string::npos) const;

  // Sends SIGKILL and reaps the daemon: it leaves its sockets, journal and segments as a
  // crash does. Stop then returns OK. The segments stay until this object goes (its
  // destructor removes every segment of its prefix): keep it while a daemon started on the
  // same directory serves them. INTERNAL when the daemon had already ended.
  [[nodiscard]] Status Kill();

  // Sends SIGTERM and waits (up to 60 s) for the daemon to end. OK when it exits 0 and
  // leaves no socket file behind, nor a /dev/shm segment of its prefix unless it served
  // tensors when told to stop (it keeps their segments for the next daemon); otherwise
  // INTERNAL saying what went wrong, with the end of the log (a daemon that had already
  // ended, or still runs after 60 s and is then killed, is an error too). Only the first
  // call stops the daemon; later ones return its result again.
  [[nodiscard]] Status Stop();

 private:
  DaemonProcess(Options options, std::optional<TempDir> temp_dir, std::string directory,
                std::string shm_prefix, ChildProcess process);
  [[nodiscard]] Status WaitUntilServing();
  [[nodiscard]] Status StopAndCheck();

  Options options_;
  std::optional<TempDir> temp_dir_;  // The directory, when it is a TempDir.
  std::string directory_;
  std::string socket_path_;
  std::string log_path_;
  std::string shm_prefix_;
  ChildProcess process_;
  std::optional<Status> stop_result_;  // Set by the first Stop.
};

// The highest descriptor process `pid` has open, plus one; 0 when none can be read.
int DescriptorEnd(pid_t pid);

}  // namespace hurray::testing
