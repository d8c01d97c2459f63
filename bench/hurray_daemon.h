// HurrayDaemon: the hurrayd under test, run by the harness as a child process on a socket
// in the harness's temporary directory, with a shared-memory prefix of its own.
//
// Not thread-safe; start and stop it from the harness's main thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hurray/error.h"
#include "process.h"

namespace hurray::bench {

// Memory of a process from /proc/PID/status, in bytes.
struct ProcessMemory {
  std::uint64_t vm_rss = 0;     // Everything resident.
  std::uint64_t rss_anon = 0;   // Private memory: the heap, where the daemon keeps its state.
  std::uint64_t rss_file = 0;   // Mapped files (the binary, libraries).
  std::uint64_t rss_shmem = 0;  // Shared memory touched through the process's mappings.
};

// NOT_FOUND when the process is gone; INTERNAL when the file does not parse.
[[nodiscard]] Result<ProcessMemory> ReadProcessMemory(pid_t pid);

// The TOML value that turns cpu_pool.huge_pages on, when `hurrayd_path --print-config`
// shows that option (another change adds it): `"MODE"` (`mode`, e.g. "auto": whichever
// huge pages the host allows, with the daemon's own fallback) when it prints a string,
// `true` when it prints a boolean. nullopt when the daemon has no such option. INTERNAL
// when the binary cannot be run.
[[nodiscard]] Result<std::optional<std::string>> HugePagesSetting(const std::string& hurrayd_path,
                                                                  const std::string& mode);

class HurrayDaemon {
 public:
  struct Options {
    std::string binary;
    // The daemon's directory (created here): sockets, config file and log.
    std::string directory;
    std::uint64_t pool_capacity_bytes = 0;
    // When not empty, written into the config as `huge_pages = <this>` under [cpu_pool]
    // (a value from HugePagesSetting).
    std::string huge_pages_setting;
    // CPUs to start it on; empty: the harness's.
    std::vector<int> cpus;
  };

  // Starts hurrayd and waits (up to 60 s: reserving a large pool takes a while) until a
  // client connects and Stats answers. UNAVAILABLE with the daemon's log when it exits or
  // does not serve in time.
  [[nodiscard]] static Result<std::unique_ptr<HurrayDaemon>> Start(const Options& options);

  HurrayDaemon(const HurrayDaemon&) = delete;
  HurrayDaemon& operator=(const HurrayDaemon&) = delete;
  // Stops it if it still runs, and removes any segment it left in /dev/shm.
  ~HurrayDaemon();

  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }
  [[nodiscard]] pid_t pid() const { return process_.pid(); }
  [[nodiscard]] std::uint64_t pool_capacity_bytes() const { return options_.pool_capacity_bytes; }
  [[nodiscard]] const std::string& huge_pages_setting() const {
    return options_.huge_pages_setting;
  }

  // The daemon's stdout and stderr so far (its last `max_bytes`).
  [[nodiscard]] std::string Log(std::size_t max_bytes = 4096) const;

  // SIGTERM and wait (up to 60 s) for a clean exit; INTERNAL with the log otherwise.
  [[nodiscard]] Status Stop();

 private:
  HurrayDaemon(Options options, std::string shm_prefix, ChildProcess process);

  Options options_;
  std::string socket_path_;
  std::string log_path_;
  std::string shm_prefix_;
  ChildProcess process_;
};

}  // namespace hurray::bench
