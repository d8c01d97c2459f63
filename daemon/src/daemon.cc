#include "daemon.h"

#include <fmt/format.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include <boost/asio/executor_work_guard.hpp>
#include <cerrno>
#include <chrono>

#include "exchange_service.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/socket_path.h"
#include "hurray/ipc/unix_socket.h"
#include "pool/cpu_pool.h"
#include "pool/pool_set.h"
#include "registry/registry.h"
#include "session/session_server.h"

namespace hurray::daemon {
namespace {

std::uint64_t NewEpoch() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// The CPU pool the configuration describes, with the huge pages the host can give it.
Result<std::unique_ptr<Pool>> CreateCpuPool(const Config::CpuPool& config) {
  // Explicit or transparent that the host cannot honour stops the start; only auto falls
  // back, and says why.
  auto huge_pages =
      ChooseHugePages(config.huge_pages, config.capacity_bytes, ReadHostHugePageFacts());
  if (!huge_pages) return std::unexpected(huge_pages.error().WithContext("cpu_pool"));
  spdlog::info("cpu pool: huge pages: {}", huge_pages->explanation);
  auto pool = CpuPool::Create(CpuPool::Options{.name = std::string(kDefaultPoolName),
                                               .capacity_bytes = config.capacity_bytes,
                                               .segment_bytes = config.segment_bytes,
                                               .page_size = config.page_size,
                                               .shm_prefix = config.shm_prefix,
                                               .first_segment_id = 1,
                                               .huge_pages = huge_pages->backing});
  if (!pool) return std::unexpected(pool.error().WithContext("cpu_pool"));
  for (std::uint32_t i = 0; i < (*pool)->segment_count(); ++i) {
    const std::uint64_t segment = (*pool)->first_segment_id() + i;
    spdlog::info("cpu pool: segment {} is {} ({} MiB)", segment,
                 (*pool)->SegmentPath(segment).value_or("?"),
                 (*pool)->SegmentSize(segment).value_or(0) >> 20);
  }
  return std::unique_ptr<Pool>(std::move(*pool));
}

// The daemon's pools, one of each kind the configuration describes. A pool that fails
// leaves none behind: the pools already made are destroyed with the set.
Result<std::unique_ptr<PoolSet>> CreatePools(const Config& config) {
  auto pools = std::make_unique<PoolSet>();
  HURRAY_ASSIGN_OR_RETURN(std::unique_ptr<Pool> cpu_pool, CreateCpuPool(config.cpu_pool));
  pools->Add(std::move(cpu_pool));
  return pools;
}

}  // namespace

Daemon::Daemon(Config config) : config_(std::move(config)), epoch_(NewEpoch()) {}

Result<std::unique_ptr<Daemon>> Daemon::Start(Config config) {
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(config)));
  if (auto started = daemon->StartParts(); !started) {
    daemon->Shutdown();
    return std::unexpected(started.error());
  }
  return daemon;
}

Status Daemon::StartParts() {
  HURRAY_RETURN_IF_ERROR(PrepareSocketPaths());
  HURRAY_ASSIGN_OR_RETURN(pools_, CreatePools(config_));
  registry_ = std::make_unique<Registry>(
      *pools_, io_,
      Registry::Options{.daemon_epoch = epoch_,
                        .session_quota_bytes = config_.session_quota_bytes,
                        .max_wait_ms = config_.max_wait_ms,
                        .max_batch_names = config_.max_batch_names,
                        .fence_shm_prefix = config_.cpu_pool.shm_prefix});
  service_ = std::make_unique<ExchangeService>(
      *registry_, ExchangeService::Options{.watch_queue_length = config_.watch_queue_length});
  HURRAY_RETURN_IF_ERROR(StartGrpc());
  HURRAY_RETURN_IF_ERROR(StartSessions());
  StartIo();
  Announce();
  return {};
}

Status Daemon::PrepareSocketPaths() {
  for (const std::string& path : {config_.socket_path, SessionSocketPath(config_.socket_path)}) {
    HURRAY_ASSIGN_OR_RETURN(const bool removed_stale,
                            PrepareSocketPath(path, config_.socket_directory_mode));
    if (removed_stale) spdlog::info("removed the stale socket {} of a daemon that is gone", path);
  }
  return {};
}

Status Daemon::StartGrpc() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(fmt::format("unix:{}", config_.socket_path),
                           grpc::InsecureServerCredentials());
  if (!config_.tcp_address.empty()) {
    builder.AddListeningPort(config_.tcp_address, grpc::InsecureServerCredentials());
  }
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes));
  builder.RegisterService(service_.get());
  // The socket is born with its mode (owner and group may connect, by default): nobody it
  // leaves out can connect, not even briefly.
  const mode_t old_umask = ::umask(static_cast<mode_t>(~config_.socket_mode & 0777u));
  server_ = builder.BuildAndStart();
  ::umask(old_umask);
  if (!server_) {
    return FailedPreconditionError(fmt::format(
        "gRPC server could not listen on unix:{}{}", config_.socket_path,
        config_.tcp_address.empty() ? std::string() : fmt::format(" and {}", config_.tcp_address)));
  }
  if (::chmod(config_.socket_path.c_str(), static_cast<mode_t>(config_.socket_mode)) != 0) {
    const int error = errno;
    StopGrpc();
    return std::unexpected(
        ErrnoError(fmt::format("chmod {:04o}", config_.socket_mode), config_.socket_path, error));
  }
  server_->GetHealthCheckService()->SetServingStatus(true);
  return {};
}

Status Daemon::StartSessions() {
  HURRAY_ASSIGN_OR_RETURN(
      session_server_,
      SessionServer::Create(io_, SessionSocketPath(config_.socket_path), *registry_, epoch_,
                            config_.session_socket_mode, config_.socket_directory_mode));
  return {};
}

void Daemon::StartIo() {
  signals_ = std::make_unique<boost::asio::signal_set>(io_, SIGINT, SIGTERM, SIGHUP);
  WaitForSignal();
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
  sd_notifyf(0, "READY=1\nSTATUS=serving on %s\nMAINPID=%lu", config_.socket_path.c_str(),
             static_cast<unsigned long>(::getpid()));
  serving_ = true;
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

void Daemon::Wait() {
  stop_requested_.get_future().wait();
  Shutdown();
}

void Daemon::Stop() {
  std::call_once(stop_once_, [this] { stop_requested_.set_value(); });
}

void Daemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  sd_notify(0, "STOPPING=1");
  StopGrpc();
  StopSessions();
  // The sessions' unreached fences are poisoned as they end; this catches any left, so that
  // no consumer stream waits for a fence after the daemon is gone.
  if (registry_) registry_->PoisonUnreachedFences();
  StopIo();
  service_.reset();
  registry_.reset();
  pools_.reset();  // Removes the segments.
  if (serving_) spdlog::info("hurrayd stopped");
}

void Daemon::StopGrpc() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(config_.shutdown_grace_ms));
  server_.reset();
  // Only a socket this server bound: a refused start must not unlink another daemon's.
  ::unlink(config_.socket_path.c_str());
}

// The session server unlinks its socket itself when it stops.
void Daemon::StopSessions() {
  if (!session_server_) return;
  session_server_->Stop();
  session_server_.reset();
}

void Daemon::StopIo() {
  if (signals_) signals_->cancel();
  io_.stop();
  for (auto& thread : io_threads_) thread.join();
  io_threads_.clear();
}

// Shutdown() throws only where a mutex or thread cannot be handled (std::system_error), which
// no recovery could follow.
Daemon::~Daemon() { Shutdown(); }  // NOLINT(bugprone-exception-escape)

}  // namespace hurray::daemon
