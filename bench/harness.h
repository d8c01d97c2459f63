// Harness: the driver's state during one run — options and scale, the two placements, the
// report being filled, the temporary directory, the servers under test (hurrayd and the
// baseline servers, each started on first use) and the workers it starts.
//
// Timed code never runs in the harness process: it runs in workers (worker.h), separate
// processes started in the figure's placement. The harness only sets up (publishes what
// consumers acquire), places the servers, starts workers and summarizes what they print.
//
// Not thread-safe: one harness, used from the main thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/client.h"
#include "hurray/error.h"
#include "options.h"
#include "placement.h"
#include "process.h"
#include "redis_baseline.h"
#include "report.h"
#include "testing/child_process.h"
#include "testing/daemon_process.h"
#include "testing/temp_dir.h"
#include "worker.h"

namespace hurray::bench {

class Harness {
 public:
  // The bound of the daemon's sealed pool (section 10); it reserves nothing until used.
  static constexpr std::uint64_t kSealedPoolCapacityBytes = std::uint64_t{1} << 30;

  // Makes the temporary directory, chooses the pinned CPU and the pool capacity (4 GiB, or
  // what /dev/shm allows, with the scaled-down sizes noted in the report).
  [[nodiscard]] static Result<std::unique_ptr<Harness>> Create(const Options& options);
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;
  // Stops every server and removes the temporary directory (unless kept).
  ~Harness();

  [[nodiscard]] const Options& options() const { return options_; }
  [[nodiscard]] const Scale& scale() const { return scale_; }
  [[nodiscard]] Report& report() { return report_; }
  [[nodiscard]] const PlacementCpus& cpus() const { return cpus_; }
  [[nodiscard]] std::uint64_t pool_capacity_bytes() const { return pool_capacity_bytes_; }
  // "<temporary directory>/<name>": for a section's files (on the directory's file system,
  // not in /dev/shm).
  [[nodiscard]] std::string WorkPath(std::string_view name) const {
    return work_directory_.Path(name);
  }

  // The hurrayd under test, started on first use (in the current placement) on a socket in
  // the temporary directory, with a shared-memory prefix of its own, and a sealed pool
  // (kSealedPoolCapacityBytes) beside its cpu pool. A daemon with a
  // different huge-pages setting is stopped and a new one started. `huge_pages` uses the
  // setting given to set_huge_pages_setting, which must have been called.
  [[nodiscard]] Result<testing::DaemonProcess*> Daemon(bool huge_pages = false);
  // Stops the current hurrayd (if any) and starts a fresh one: an empty heap to measure.
  [[nodiscard]] Result<testing::DaemonProcess*> FreshDaemon(bool huge_pages = false);
  // The value of cpu_pool.huge_pages for a daemon with huge pages (HugePagesSetting).
  void set_huge_pages_setting(std::string setting) { huge_pages_setting_ = std::move(setting); }
  // Stops the current hurrayd, if any. The setup client goes with it.
  [[nodiscard]] Status StopDaemon();

  // A client of the current hurrayd for untimed set-up (publishing what workers acquire).
  [[nodiscard]] Result<Client*> SetupClient();

  // Publishes a `bytes`-byte tensor under `name` through the setup client, written with the
  // pattern (memory_touch.h) when `fill`, in pool `pool` (empty: the default); replaces an
  // earlier version.
  [[nodiscard]] Status PublishTensor(const std::string& name, std::uint64_t bytes, bool fill,
                                     const std::string& pool = {});
  // Deletes every version of each name (absent names are no error).
  void DeleteTensors(const std::vector<std::string>& names);

  // The baseline servers' sockets, each server started on first use.
  [[nodiscard]] Result<std::string> EchoServerSocket();
  // A BenchPeer server holding at least `bytes` of the pattern (restarted to hold more).
  [[nodiscard]] Result<std::string> GrpcServerSocket(std::uint64_t bytes);
  [[nodiscard]] Result<RedisServer*> Redis();
  // Stops redis-server and the gRPC server (they hold a tensor each: memory back).
  void StopBulkBaselines();

  // Moves hurrayd and every baseline server (all their threads) onto the placement's CPUs;
  // servers started later start there.
  [[nodiscard]] Status Place(Placement placement);

  // Runs worker `role_and_args` (worker.h) in `placement` to its end. INTERNAL with the
  // worker's stderr when it fails or runs past `timeout` (then it is killed).
  [[nodiscard]] Result<WorkerResults> RunWorker(Placement placement,
                                                const WorkerArgs& role_and_args,
                                                std::chrono::seconds timeout);
  // Starts every worker in `placement`, waits until each has printed "ready", tells all
  // "go" at once, and collects each one's results (in the order given).
  [[nodiscard]] Result<std::vector<WorkerResults>> RunWorkersTogether(
      Placement placement, const std::vector<WorkerArgs>& workers, std::chrono::seconds timeout);

  // Measures the raw unix-socket round trip in both placements as figure `key` of
  // `section`: the floor printed beside that section's latencies.
  [[nodiscard]] Status MeasureSocketRoundTrip(int section, const std::string& key);

  // Prints "[  12.3 s] what" to stderr: where a long run is.
  void Progress(std::string_view what) const;

 private:
  Harness(Options options, testing::TempDir work_directory);

  [[nodiscard]] Result<testing::ChildProcess> StartWorker(Placement placement,
                                                          const WorkerArgs& args, bool stdin_pipe,
                                                          std::string* stderr_path);
  // RunWorker (together false) and RunWorkersTogether (true: the ready/go barrier).
  [[nodiscard]] Result<std::vector<WorkerResults>> RunWorkers(
      Placement placement, const std::vector<WorkerArgs>& workers, std::chrono::seconds timeout,
      bool together);
  // Starts a baseline server role and waits for its "ready".
  [[nodiscard]] Result<testing::ChildProcess> StartServerRole(const WorkerArgs& role_and_args);
  [[nodiscard]] std::vector<pid_t> ServerPids() const;

  Options options_;
  Scale scale_;
  PlacementCpus cpus_;
  Placement current_placement_ = Placement::kUnpinned;
  std::uint64_t pool_capacity_bytes_ = 0;
  testing::TempDir work_directory_;
  std::string self_;
  Report report_;
  std::chrono::steady_clock::time_point started_;
  int next_worker_ = 0;
  int next_daemon_ = 0;

  std::string huge_pages_setting_;
  std::unique_ptr<testing::DaemonProcess> daemon_;
  bool daemon_huge_pages_ = false;        // Whether daemon_ runs with huge_pages_setting_.
  std::unique_ptr<Client> setup_client_;  // Of daemon_; reset with it.
  std::optional<testing::ChildProcess> echo_server_;
  std::optional<testing::ChildProcess> grpc_server_;
  std::uint64_t grpc_server_bytes_ = 0;
  std::unique_ptr<RedisServer> redis_;
};

}  // namespace hurray::bench
