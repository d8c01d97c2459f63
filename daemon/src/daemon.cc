#include "daemon.h"

#include <fmt/format.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <set>

#include "descriptor_reserve.h"
#include "exchange_service.h"
#include "fast_path/directory_segment.h"
#include "grpc/health/v1/health.pb.h"
#include "grpc_listener.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/socket_path.h"
#include "hurray/ipc/unix_socket.h"
#include "journal/cpu_pool_restart.h"
#include "logging.h"
#include "metrics/daemon_collector.h"
#include "metrics/metered_session_host.h"
#include "metrics/metrics_server.h"
#include "metrics/request_metrics.h"
#include "pool/cpu_pool.h"
#include "pool/cuda_pool.h"
#include "pool/pool_set.h"
#include "preload/preloader.h"
#include "registry/registry.h"
#include "serving_probe.h"
#include "session/registry_session_host.h"
#include "session/session_server.h"
#include "socket_group.h"
#include "watchdog.h"

namespace hurray::daemon {
namespace {

// The most often the daemon looks for idle slabs.
constexpr std::chrono::milliseconds kMinSlabCheck{100};
// How often a restarted daemon asks whether the clients of an earlier one still hold their
// hold (EpochHolds): what it held for them is freed within this of their last letting go.
constexpr std::chrono::milliseconds kEarlierHoldCheck{500};
// The most often systemd's STATUS= tells how far the CPU pool's reservation got.
constexpr std::chrono::seconds kReservingStatusPeriod{1};

std::uint64_t NewEpoch() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

Daemon::Daemon(Config config)
    : config_(std::move(config)),
      epoch_(NewEpoch()),
      request_metrics_(std::make_unique<RequestMetrics>()) {}

Result<std::unique_ptr<Daemon>> Daemon::Start(Config config) {
  ConfigureLogging(
      {.format = config.log_format, .level = config.log_level, .journal = StdoutIsJournal()});
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(config)));
  if (auto started = daemon->StartParts(); !started) {
    daemon->Shutdown();
    return std::unexpected(started.error());
  }
  return daemon;
}

Status Daemon::StartParts() {
  for (const std::string& warning : ConfigWarnings(config_)) spdlog::warn("{}", warning);
  RaiseDescriptorLimit();
  HURRAY_RETURN_IF_ERROR(PrepareSocketPaths());
  HURRAY_RETURN_IF_ERROR(CreatePools());
  HURRAY_ASSIGN_OR_RETURN(AccessPolicy access, MakeAccessPolicy(config_));
  registry_ = std::make_unique<Registry>(
      *pools_, io_,
      Registry::Options{
          .daemon_epoch = epoch_,
          .session_quota_bytes = config_.session_quota_bytes,
          .max_wait_ms = config_.max_wait_ms,
          .max_batch_names = config_.max_batch_names,
          .max_waits_per_uid = config_.max_waits_per_uid,
          .fence_shm_prefix = config_.cpu_pool.shm_prefix,
          .access = std::make_shared<const AccessPolicy>(std::move(access)),
          .uid_quota = config_.uid_quota,
          .journal = registry_journal_.get(),
          .fast_path = {
              .directory = fast_path_directory_,
              .lease_slots = config_.fast_path.lease_slots,
              .rescan_interval = std::chrono::milliseconds(config_.fast_path.rescan_interval_ms),
              .max_entries_per_uid = config_.fast_path.max_entries_per_uid}});
  HURRAY_RETURN_IF_ERROR(AdoptJournaledVersions());
  service_ = std::make_unique<ExchangeService>(
      *registry_, ExchangeService::Options{
                      .watch_queue_length = config_.watch_queue_length,
                      .watch_queue_bytes = static_cast<std::size_t>(config_.watch_queue_bytes),
                      .max_watchers = config_.max_watchers,
                      .max_watchers_per_uid = config_.max_watchers_per_uid,
                      // Calls come only while server_ runs, which grpc_listener_ outlives.
                      .connection_peer = [this](std::string_view peer) -> std::optional<PeerKey> {
                        return grpc_listener_ ? grpc_listener_->PeerOf(peer) : std::nullopt;
                      },
                      .request_metrics = request_metrics_.get()});
  session_host_ = std::make_unique<RegistrySessionHost>(*registry_);
  metered_host_ = std::make_unique<MeteredSessionHost>(*session_host_, *request_metrics_);
  HURRAY_RETURN_IF_ERROR(StartGrpc());
  HURRAY_RETURN_IF_ERROR(StartSessions());
  HURRAY_RETURN_IF_ERROR(StartMetrics());
  StartIo();
  Announce();
  StartWatchdog();
  return StartReserving();
}

Status Daemon::AdoptJournaledVersions() {
  const Registry::Adoption adoption = registry_->Adopt(
      std::move(journaled_versions_), retained_versions_, holding_for_earlier_clients_);
  if (holding_for_earlier_clients_) {
    spdlog::info(
        "restart: clients of an earlier hurrayd may still map its memory: {} retired tensor "
        "versions, and the adopted ones as they retire, keep their memory until they let go",
        retained_versions_.size());
  }
  retained_versions_.clear();
  // What was not adopted is free memory now: a later restart must not adopt it over what
  // reuses it.
  if (journal_ != nullptr) {
    if (Status kept = journal_->KeepOnly(adoption.adopted, adoption.held); !kept) {
      return std::unexpected(kept.error().WithContext("restart: journal"));
    }
  }
  if (!adoption.adopted.empty() || adoption.lost != 0) {
    spdlog::info("restart: {} tensors of the daemon before served again, {} lost",
                 adoption.adopted.size(), adoption.lost);
  }
  return {};
}

void Daemon::RaiseDescriptorLimit() {
  auto limit = RaiseDescriptorLimitToHard();
  if (!limit) {
    spdlog::warn("descriptors: {}; RLIMIT_NOFILE stays as it is", limit.error().ToString());
    return;
  }
  spdlog::info(
      "descriptors: RLIMIT_NOFILE {}; connections leave the last {} (reserved_descriptors)",
      limit->soft, config_.reserved_descriptors);
}

Status Daemon::PrepareSocketPaths() {
  if (!config_.socket_group.empty()) {
    HURRAY_ASSIGN_OR_RETURN(socket_group_, ResolveSocketGroup(config_.socket_group));
  }
  const std::string directory = std::filesystem::path(config_.socket_path).parent_path().string();
  std::error_code unused;
  const bool directory_existed = directory.empty() || std::filesystem::exists(directory, unused);
  for (const std::string& path : {config_.socket_path, SessionSocketPath(config_.socket_path)}) {
    HURRAY_ASSIGN_OR_RETURN(const bool removed_stale,
                            PrepareSocketPath(path, config_.socket_directory_mode));
    if (removed_stale) spdlog::info("removed the stale socket {} of a daemon that is gone", path);
  }
  return directory_existed ? Status() : ApplySocketGroup(directory);
}

Status Daemon::ApplySocketGroup(const std::string& path) const {
  if (!socket_group_) return {};
  return GiveSocketGroup(path, *socket_group_);
}

void Daemon::RecheckEarlierHoldsEvery(std::chrono::milliseconds period) {
  epoch_hold_timer_->expires_after(period);
  epoch_hold_timer_->async_wait([this, period](const boost::system::error_code& error) {
    if (error) return;
    if (epoch_holds_->Recheck()) {
      RecheckEarlierHoldsEvery(period);
      return;
    }
    const std::size_t freed = registry_->ReleaseEarlierEpochs();
    spdlog::info(
        "restart: no client of an earlier hurrayd maps its memory any more; {} retired tensor "
        "versions held for them were freed",
        freed);
  });
}

void Daemon::ReleaseIdleSlabsEvery(std::chrono::milliseconds period) {
  slab_release_timer_->expires_after(period);
  slab_release_timer_->async_wait([this, period](const boost::system::error_code& error) {
    if (error) return;
    const auto now = std::chrono::steady_clock::now();
    const std::set<std::uint64_t> mapped = registry_->MappedSlabs();
    for (CudaPool* pool : cuda_pools_) pool->ReleaseIdleSlabs(now, mapped);
    ReleaseIdleSlabsEvery(period);
  });
}

Status Daemon::StartGrpc() {
  grpc::EnableDefaultHealthCheckService(true);
  // gRPC's default health service answers grpc.health.v1 without protobuf's generated code,
  // so nothing would put health.proto in the descriptor pool that reflection serves, and
  // grpcurl could list the service but not call it. Naming one of its messages links the
  // generated file, which registers it.
  static_cast<void>(grpc::health::v1::HealthCheckRequest::descriptor());
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // The server listens on no port of its own: grpc_listener_ accepts every connection and
  // hands it over, so that it can cap them (gRPC 1.51 cannot).
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes));
  builder.RegisterService(service_.get());
  const std::string where = fmt::format(
      "unix:{}{}", config_.socket_path,
      config_.tcp_address.empty() ? std::string() : fmt::format(" and {}", config_.tcp_address));
  auto listener =
      GrpcListener::Create(io_, {.socket_path = config_.socket_path,
                                 .socket_mode = config_.socket_mode,
                                 .tcp_address = config_.tcp_address,
                                 .max_connections = config_.max_grpc_connections,
                                 .max_connections_per_uid = config_.max_grpc_connections_per_uid,
                                 .reserved_descriptors = config_.reserved_descriptors});
  if (!listener) {
    return FailedPreconditionError(
        fmt::format("gRPC server could not listen on {}: {}", where, listener.error().message()));
  }
  grpc_listener_ = std::move(*listener);
  server_ = builder.BuildAndStart();
  if (!server_) {
    StopGrpc();
    return FailedPreconditionError(fmt::format("gRPC server could not start on {}", where));
  }
  grpc_listener_->Serve(*server_);
  if (!config_.tcp_address.empty()) {
    spdlog::info("gRPC also on TCP port {} ({})", grpc_listener_->tcp_port(), config_.tcp_address);
  }
  if (auto grouped = ApplySocketGroup(config_.socket_path); !grouped) {
    StopGrpc();
    return grouped;
  }
  // Until the preload is in, health says NOT_SERVING (the default health service answered
  // SERVING for "" from BuildAndStart until this line).
  SetServing(config_.preload.empty());
  return {};
}

void Daemon::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus("", serving);
  health->SetServingStatus(std::string(v1::Exchange::service_full_name()), serving);
}

Status Daemon::StartSessions() {
  HURRAY_ASSIGN_OR_RETURN(
      session_server_,
      SessionServer::Create(io_, SessionSocketPath(config_.socket_path), *metered_host_, epoch_,
                            config_.session_socket_mode,
                            {.max_sessions = config_.max_sessions,
                             .max_sessions_per_uid = config_.max_sessions_per_uid,
                             .hello_timeout = std::chrono::milliseconds(config_.hello_timeout_ms),
                             .frame_timeout = std::chrono::milliseconds(config_.frame_timeout_ms),
                             .event_loops = config_.io_threads,
                             .reserved_descriptors = config_.reserved_descriptors,
                             .max_wait_ms = config_.max_wait_ms},
                            epoch_holds_ ? epoch_holds_->hold() : nullptr));
  return ApplySocketGroup(session_server_->socket_path());
}

Status Daemon::StartMetrics() {
  if (config_.metrics_address.empty()) return {};
  HURRAY_ASSIGN_OR_RETURN(const MetricsAddress address,
                          ParseMetricsAddress(config_.metrics_address));
  // A host that is not loopback was warned of as the start began (ConfigWarnings).
  const Registry& registry = *registry_;
  HURRAY_ASSIGN_OR_RETURN(
      metrics_server_,
      MetricsServer::Start(
          address, std::make_shared<DaemonCollector>(
                       [&registry] { return registry.Stats(); }, *request_metrics_,
                       [this] {
                         return GrpcFigures{.connections = grpc_listener_->connection_count(),
                                            .refused_connections = grpc_listener_->refused_count(),
                                            .watchers = service_->watcher_count()};
                       })));
  spdlog::info("metrics on http://{}:{}/metrics", address.host, metrics_server_->port());
  return {};
}

void Daemon::StartIo() {
  signals_ = std::make_unique<boost::asio::signal_set>(io_, SIGINT, SIGTERM, SIGHUP);
  WaitForSignal();
  if (holding_for_earlier_clients_) {
    epoch_hold_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    RecheckEarlierHoldsEvery(kEarlierHoldCheck);
  }
  if (!cuda_pools_.empty()) {
    // Empty slabs go back to the device between idle_slab_release_ms and 1.5 times it.
    slab_release_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    ReleaseIdleSlabsEvery(std::max(
        std::chrono::milliseconds(config_.cuda_pool.idle_slab_release_ms / 2), kMinSlabCheck));
  }
  for (std::uint32_t i = 0; i < config_.io_threads; ++i) {
    io_threads_.emplace_back([this] {
      auto work = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }
}

void Daemon::Announce() {
  const auto usage = pools_->Find(kDefaultPoolName)->Usage();
  spdlog::info("hurrayd serving gRPC on unix:{}, sessions on {}, cpu pool {} MiB, epoch {}",
               config_.socket_path, session_server_->socket_path(), usage.capacity_bytes >> 20,
               epoch_);
  const std::string status = usage.reserved_bytes < usage.capacity_bytes
                                 ? ReservingStatus(usage.reserved_bytes, usage.capacity_bytes)
                                 : fmt::format("serving on {}", config_.socket_path);
  sd_notifyf(0, "READY=1\nSTATUS=%s\nMAINPID=%lu", status.c_str(),
             static_cast<unsigned long>(::getpid()));
  serving_ = true;
}

void Daemon::StartWatchdog() {
  const std::optional<std::chrono::microseconds> interval = SystemdWatchdogInterval();
  if (!interval) return;
  serving_probe_ = std::make_unique<EventLoopRegistryProbe>(io_, *registry_);
  watchdog_ =
      Watchdog::Start(*serving_probe_, {.interval = *interval, .ping = SendSystemdWatchdogPing});
  spdlog::info("watchdog: WATCHDOG=1 every {} ms while the registry and the event loop answer",
               std::chrono::duration_cast<std::chrono::milliseconds>(*interval / 2).count());
}

void Daemon::StopWatchdog() {
  watchdog_.reset();
  serving_probe_.reset();
}

std::string Daemon::ReservingStatus(std::uint64_t reserved_bytes,
                                    std::uint64_t capacity_bytes) const {
  return fmt::format("serving on {}; reserving cpu pool: {}", config_.socket_path,
                     FormatPartOf(reserved_bytes, capacity_bytes));
}

Status Daemon::StartReserving() {
  const auto started = std::chrono::steady_clock::now();
  return cpu_pool_->StartReserving(
      {.progress =
           [this, last_status = started](std::uint64_t reserved, std::uint64_t capacity) mutable {
             const auto now = std::chrono::steady_clock::now();
             if (now - last_status < kReservingStatusPeriod) return;
             last_status = now;
             sd_notifyf(0, "STATUS=%s", ReservingStatus(reserved, capacity).c_str());
           },
       .done = [this, started](Status status) { OnReserved(std::move(status), started); }});
}

void Daemon::OnReserved(Status status, std::chrono::steady_clock::time_point started) {
  const PoolUsage usage = cpu_pool_->Usage();
  const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started);
  if (status) {
    spdlog::info("cpu pool: all {} MiB reserved, {:.1f} s after serving began",
                 usage.reserved_bytes >> 20, took.count());
  } else {
    sd_notifyf(0, "STATUS=serving on %s; cpu pool reserved only %s: %s",
               config_.socket_path.c_str(),
               FormatPartOf(usage.reserved_bytes, usage.capacity_bytes).c_str(),
               status.error().message().c_str());
  }
  // The preload allocates big tensors: it starts once the pool is as big as it gets.
  if (Status preload = StartPreload(); !preload) {
    preload_failure_ = preload.error();
    spdlog::critical("hurrayd stops: the preload could not start: {}", preload.error().message());
    Stop();
    return;
  }
  if (config_.preload.empty() && status) {
    sd_notifyf(0, "STATUS=serving on %s", config_.socket_path.c_str());
  }
}

Status Daemon::StartPreload() {
  if (config_.preload.empty()) return {};
  sd_notify(0, "STATUS=preloading");
  HURRAY_ASSIGN_OR_RETURN(
      preloader_, Preloader::Start(
                      *registry_, *pools_, config_.preload,
                      {.loading =
                           [](const Config::Preload& entry, std::size_t index, std::size_t count) {
                             sd_notifyf(0, "STATUS=preloading %s (%zu of %zu) under \"%s\"",
                                        entry.path.c_str(), index + 1, count, entry.prefix.c_str());
                           },
                       .done = [this](Status status) { OnPreloadDone(std::move(status)); }}));
  return {};
}

void Daemon::OnPreloadDone(Status status) {
  if (!status) {
    preload_failure_ = status.error();
    spdlog::critical("hurrayd stops: a required preload failed");
    Stop();
    return;
  }
  SetServing(true);
  spdlog::info("preload done: health SERVING");
  sd_notifyf(0, "STATUS=serving on %s", config_.socket_path.c_str());
}

void Daemon::WaitForSignal() {
  signals_->async_wait([this](const boost::system::error_code& error, int signal) {
    if (error) return;
    if (signal == SIGHUP) {
      // A hangup must not kill the daemon and orphan its segments; there is nothing to
      // reload yet.
      spdlog::warn("SIGHUP ignored: configuration reload is not supported; restart instead");
      WaitForSignal();
      return;
    }
    spdlog::info("signal {} received: shutting down", signal);
    Stop();
  });
}

Status Daemon::Wait() {
  stop_requested_.get_future().wait();
  Shutdown();
  if (preload_failure_) return std::unexpected(*preload_failure_);
  return {};
}

void Daemon::Stop() {
  std::call_once(stop_once_, [this] { stop_requested_.set_value(); });
}

void Daemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  StopWatchdog();
  sd_notify(0, "STOPPING=1");
  // No fast-path acquire confirms from now on.
  if (fast_path_directory_) fast_path_directory_->End();
  // Health watchers see the stop begin, not only the server going away.
  if (server_) SetServing(false);
  // First: its end starts the preload.
  if (cpu_pool_ != nullptr) cpu_pool_->StopReserving();
  StopPreload();            // Next: its end touches the gRPC server's health.
  metrics_server_.reset();  // No scrape reads the registry once it goes.
  StopGrpc();
  StopSessions();
  // The sessions' unreached fences are poisoned as they end; this catches any left, so that
  // no consumer stream waits for a fence after the daemon is gone.
  if (registry_) registry_->PoisonUnreachedFences();
  StopIo();
  service_.reset();
  metered_host_.reset();
  session_host_.reset();
  registry_.reset();
  if (fast_path_directory_) {
    fast_path_directory_.reset();  // Removes its segment.
    ::unlink(fast_path_record_.c_str());
  }
  slab_release_timer_.reset();
  epoch_hold_timer_.reset();
  cuda_pools_.clear();
  KeepSegmentsOfLiveTensors();
  cpu_pool_ = nullptr;
  pools_.reset();  // Removes the segments (unless kept) and releases the slabs.
  registry_journal_.reset();
  journal_.reset();
  if (serving_) spdlog::info("hurrayd stopped");
}

void Daemon::KeepSegmentsOfLiveTensors() {
  if (cpu_pool_ == nullptr || journal_ == nullptr) return;
  const std::size_t live = journal_->live_version_count();
  if (live == 0) return;
  const std::uint64_t released = cpu_pool_->KeepSegments();
  spdlog::info(
      "keeping the cpu pool's {} segments for the {} tensors the journal holds, for "
      "the next hurrayd on state directory {} (hurrayd --discard-state removes them); "
      "their {} free bytes were given back",
      cpu_pool_->segment_count(), live, config_.state_directory, released);
}

void Daemon::StopGrpc() {
  if (!grpc_listener_) return;
  grpc_listener_->Stop();  // No new connection reaches the server.
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(config_.shutdown_grace_ms));
    server_.reset();
  }
  grpc_listener_.reset();  // Removes the socket file it made (only that one).
}

void Daemon::StopPreload() {
  if (!preloader_) return;
  preloader_->Stop();
  preloader_.reset();
}

// The session server unlinks its socket itself when it stops.
void Daemon::StopSessions() {
  if (!session_server_) return;
  session_server_->Stop();
  session_server_.reset();
}

void Daemon::StopIo() {
  if (signals_) signals_->cancel();
  if (slab_release_timer_) slab_release_timer_->cancel();
  if (epoch_hold_timer_) epoch_hold_timer_->cancel();
  io_.stop();
  for (auto& thread : io_threads_) thread.join();
  io_threads_.clear();
}

// Shutdown() throws only where a mutex or thread cannot be handled (std::system_error), which
// no recovery could follow.
Daemon::~Daemon() { Shutdown(); }  // NOLINT(bugprone-exception-escape)

}  // namespace hurray::daemon
