// Daemon: hurrayd assembled — pools, registry, gRPC service, session socket — and run until
// SIGTERM/SIGINT or Stop(). Thread-safe: Stop() may be called from any thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "hurray/error.h"
#include "journal/epoch_holds.h"
#include "journal/journal_record.h"
#include "journal/state_directory.h"
#include "registry/version_journal.h"
#include "socket_group.h"

namespace grpc {
class Server;
}

namespace hurray::daemon {

namespace fast_path {
class DirectorySegment;
}

class CpuPool;
class CudaPool;
class ExchangeService;
class GrpcListener;
class MeteredSessionHost;
class MetricsServer;
class PoolSet;
class Preloader;
class TensorJournal;
class Registry;
class RegistrySessionHost;
class ServingProbe;
class RequestMetrics;
class SessionServer;
class Watchdog;

class Daemon {
 public:
  // Sets the log level, builds every part from `config` (as LoadConfig makes it: checked)
  // and starts serving: the CPU pool's segments exist, both sockets accept connections, the
  // metrics endpoint listens (when metrics_address is set), and READY=1 went to systemd
  // (when run under it). ALREADY_EXISTS when another daemon
  // already serves a socket path. A failed start leaves nothing behind.
  //
  // The CPU pool's memory is reserved in the background from then on (STATUS= says how far
  // it got, once a second): allocations that do not fit what is reserved yet are
  // UNAVAILABLE until it is done. With [[preload]] entries, once the reservation is over the
  // Preloader imports them on its own thread: gRPC health
  // (the overall status "" and "hurray.v1.Exchange") answers NOT_SERVING until every entry
  // is in (or skipped), then SERVING; systemd's STATUS= names the file being loaded. A
  // required entry that fails stops the daemon: Wait returns its error. Without entries,
  // health is SERVING from the start.
  [[nodiscard]] static Result<std::unique_ptr<Daemon>> Start(Config config);

  // hurrayd --discard-state: removes the journal of config.state_directory and every
  // segment it keeps (FAILED_PRECONDITION while a daemon runs on it); returns what it did,
  // in words.
  [[nodiscard]] static Result<std::string> DiscardState(const Config& config);

  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Blocks until Stop() or a SIGTERM/SIGINT, then shuts down cleanly: stops a preload in
  // progress (nothing of its entry is published), stops accepting, ends every session,
  // removes the pool segments and unlinks both sockets. The error of a required [[preload]]
  // entry that failed (naming preload[i], the file, the tensor and the field); OK otherwise.
  [[nodiscard]] Status Wait();

  // Asks Wait() to return. Idempotent.
  void Stop();

  [[nodiscard]] std::uint64_t epoch() const { return epoch_; }

 private:
  explicit Daemon(Config config);
  // Starts the parts in order: socket paths, pools (CreatePools), registry and service,
  // gRPC, sessions, io threads. A step that fails stops what it started itself; Start()
  // then stops the parts already running with Shutdown(), which is their reverse order
  // (the io threads start last, once no step can fail).
  Status StartParts();
  // The journal's versions published again (Registry::Adopt), and the journal left naming
  // only what was adopted.
  Status AdoptJournaledVersions();
  // RLIMIT_NOFILE's soft limit raised to the hard one (a warning when it cannot be).
  void RaiseDescriptorLimit();
  // Both socket paths checked, their directory made, stale sockets of a dead daemon removed,
  // before any pool exists: a start refused for a socket in use costs nothing. Each listener
  // then binds its own file (ipc's BoundSocketFile) and removes it as it stops.
  Status PrepareSocketPaths();
  // The CPU pool and a CUDA pool per device (none, saying why, without a driver or device).
  // It and CreateFastPathDirectory are defined in daemon_pools.cc.
  Status CreatePools();
  // Marks the fast-path directory a crashed daemon of the state directory left kEnded (before
  // anything is adopted or freed), then makes this daemon's, unless [fast_path] is off.
  // The directory's path is recorded in "<state directory>/fast_path_directory".
  Status CreateFastPathDirectory(const StateDirectory& state);
  // Returns idle slabs of the CUDA pools every `period`, on the io threads.
  void ReleaseIdleSlabsEvery(std::chrono::milliseconds period);
  // The gRPC server, served on the unix socket (and TCP, when configured) through
  // grpc_listener_, health SERVING.
  Status StartGrpc();
  // The session socket.
  Status StartSessions();
  // The Prometheus endpoint on config_.metrics_address, when it is set.
  Status StartMetrics();
  // The io_context's threads, and signal handling and the idle-slab timer on them.
  void StartIo();
  // The log line and READY=1 to systemd.
  void Announce();
  // The CPU pool's background reservation; OnReserved at its end.
  Status StartReserving();
  // The reservation's end (complete, or short of the capacity with `status` saying why):
  // the preload starts, or STATUS= says the daemon serves.
  void OnReserved(Status status, std::chrono::steady_clock::time_point started);
  // "serving on SOCKET; reserving cpu pool: 3.0 of 8.0 GiB", for STATUS=.
  [[nodiscard]] std::string ReservingStatus(std::uint64_t reserved_bytes,
                                            std::uint64_t capacity_bytes) const;
  // The Preloader of config_.preload, when there are entries.
  Status StartPreload();
  // Under systemd with WatchdogSec=: the Watchdog, probing the registry through the io
  // threads (EventLoopRegistryProbe). After READY=1; stopped before STOPPING=1.
  void StartWatchdog();
  void StopWatchdog();
  // socket_group given to `path`; nothing when the setting is empty.
  [[nodiscard]] Status ApplySocketGroup(const std::string& path) const;
  // Health for "" and "hurray.v1.Exchange".
  void SetServing(bool serving);
  // The Preloader's end: health SERVING, or (a required entry failed) the daemon stops.
  void OnPreloadDone(Status status);
  // Handles SIGINT/SIGTERM (stop) and SIGHUP (ignored, logged), one signal at a time.
  void WaitForSignal();
  // Stops what is running: the metrics endpoint, gRPC, then the sessions (the transports
  // first, so that calls in flight finish on the io threads), then the io threads, the
  // registry and the pools.
  // Idempotent.
  void Shutdown();
  // Stops accepting, ends gRPC calls (after the shutdown grace) and unlinks the gRPC socket.
  void StopGrpc();
  void StopPreload();
  void StopSessions();
  void StopIo();
  // As the daemon stops with tensors in its journal: the CPU pool's segments stay.
  void KeepSegmentsOfLiveTensors();
  // Every `period`, until no earlier daemon's hold is held: then the registry frees what
  // it held for their clients.
  void RecheckEarlierHoldsEvery(std::chrono::milliseconds period);

  const Config config_;
  const std::uint64_t epoch_;
  // Counted by the gRPC service and the session socket (through metered_host_), for metrics.
  std::unique_ptr<RequestMetrics> request_metrics_;
  boost::asio::io_context io_;
  std::optional<StateDirectory> state_directory_;     // Locked while the daemon runs.
  std::unique_ptr<TensorJournal> journal_;            // Outlives registry_, which writes to it.
  std::unique_ptr<VersionJournal> registry_journal_;  // journal_, as registry_ writes to it.
  std::vector<JournalRecord> journaled_versions_;     // For Registry::Adopt, once at start.
  std::vector<JournalRecord> retained_versions_;      // For Registry::Adopt, once at start.
  // The CPU pool is an earlier daemon's and one of its holds was open at start.
  bool holding_for_earlier_clients_ = false;
  // This daemon's hold for its clients, and the earlier daemons' files still held.
  std::optional<EpochHolds> epoch_holds_;
  // Rechecks the earlier daemons' holds while some are held (with them: Registry::Adopt held
  // their retired memory). Guarded by running on io_ only.
  std::unique_ptr<boost::asio::steady_timer> epoch_hold_timer_;
  std::unique_ptr<PoolSet> pools_;
  CpuPool* cpu_pool_ = nullptr;                                    // Of pools_.
  std::vector<CudaPool*> cuda_pools_;                              // Of pools_.
  std::unique_ptr<boost::asio::steady_timer> slab_release_timer_;  // With CUDA pools only.
  // Null with [fast_path] off; shared with registry_, ended before the sessions stop.
  std::shared_ptr<fast_path::DirectorySegment> fast_path_directory_;
  std::string fast_path_record_;  // The file that records its path, while it exists.
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<ExchangeService> service_;
  std::unique_ptr<GrpcListener> grpc_listener_;  // Accepts server_'s connections; outlives it.
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RegistrySessionHost> session_host_;  // The registry, as the sessions see it.
  std::unique_ptr<MeteredSessionHost> metered_host_;   // session_host_, counted.
  std::unique_ptr<SessionServer> session_server_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<Preloader> preloader_;
  // Set by the reserving thread (OnReserved) or the preloader's (OnPreloadDone), read after
  // both are joined.
  std::optional<Error> preload_failure_;
  std::optional<SocketGroup> socket_group_;  // Of config_.socket_group, when set.
  std::unique_ptr<ServingProbe> serving_probe_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<boost::asio::signal_set> signals_;
  std::vector<std::thread> io_threads_;
  std::promise<void> stop_requested_;
  std::once_flag stop_once_;
  bool serving_ = false;  // Whether Announce() ran.
  bool shut_down_ = false;
};

}  // namespace hurray::daemon
