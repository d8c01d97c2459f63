#include "daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include <boost/asio/executor_work_guard.hpp>
#include <cerrno>
#include <chrono>

#include "cpu_pool.h"
#include "exchange_service.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/socket_path.h"
#include "hurray/ipc/unix_socket.h"
#include "pool_set.h"
#include "registry.h"
#include "session_server.h"

namespace hurray::daemon {
namespace {

constexpr int kIoThreads = 2;

std::uint64_t NewEpoch() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

Daemon::Daemon(Config config) : config_(std::move(config)), epoch_(NewEpoch()) {}

Result<std::unique_ptr<Daemon>> Daemon::Start(Config config) {
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(config)));
  if (auto started = daemon->StartParts(); !started) {
    daemon->Shutdown();
    return std::unexpected(started.error());
  }
  return daemon;
}

Status Daemon::StartParts() {
  const std::string session_path = SessionSocketPath(config_.socket_path);
  for (const std::string& path : {config_.socket_path, session_path}) {
    HURRAY_ASSIGN_OR_RETURN(const bool removed_stale, PrepareSocketPath(path));
    if (removed_stale) spdlog::info("removed the stale socket {} of a daemon that is gone", path);
  }

  // Explicit or transparent that the host cannot honour stops the start; only auto falls
  // back, and says why.
  auto huge_pages = ChooseHugePages(config_.cpu_pool.huge_pages, config_.cpu_pool.capacity_bytes,
                                    ReadHostHugePageFacts());
  if (!huge_pages) return std::unexpected(huge_pages.error().WithContext("cpu_pool"));
  spdlog::info("cpu pool: huge pages: {}", huge_pages->explanation);
  auto cpu_pool = CpuPool::Create(CpuPool::Options{.name = "cpu",
                                                   .capacity_bytes = config_.cpu_pool.capacity_bytes,
                                                   .segment_bytes = config_.cpu_pool.segment_bytes,
                                                   .page_size = config_.cpu_pool.page_size,
                                                   .shm_prefix = config_.cpu_pool.shm_prefix,
                                                   .first_segment_id = 1,
                                                   .huge_pages = huge_pages->backing});
  if (!cpu_pool) return std::unexpected(cpu_pool.error().WithContext("cpu_pool"));
  for (std::uint32_t i = 0; i < (*cpu_pool)->segment_count(); ++i) {
    const std::uint64_t segment = (*cpu_pool)->first_segment_id() + i;
    spdlog::info("cpu pool: segment {} is {} ({} MiB)", segment,
                 (*cpu_pool)->SegmentPath(segment).value_or("?"),
                 (*cpu_pool)->SegmentSize(segment).value_or(0) >> 20);
  }
  pools_ = std::make_unique<PoolSet>();
  pools_->Add(std::move(*cpu_pool));

  registry_ = std::make_unique<Registry>(
      *pools_, io_,
      Registry::Options{.daemon_epoch = epoch_,
                        .session_quota_bytes = config_.session_quota_bytes,
                        .max_wait_ms = config_.max_wait_ms});
  service_ = std::make_unique<ExchangeService>(*registry_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + config_.socket_path, grpc::InsecureServerCredentials());
  if (!config_.tcp_address.empty()) {
    builder.AddListeningPort(config_.tcp_address, grpc::InsecureServerCredentials());
  }
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes));
  builder.RegisterService(service_.get());
  // The socket is born 0660: owner and group may connect, nobody else, not even briefly.
  const mode_t old_umask = ::umask(0117);
  server_ = builder.BuildAndStart();
  ::umask(old_umask);
  if (!server_) {
    return FailedPreconditionError("gRPC server could not listen on unix:" + config_.socket_path +
                                   (config_.tcp_address.empty() ? "" : " and " + config_.tcp_address));
  }
  grpc_socket_bound_ = true;
  if (::chmod(config_.socket_path.c_str(), 0660) != 0) {
    return std::unexpected(ErrnoError("chmod 0660", config_.socket_path, errno));
  }
  server_->GetHealthCheckService()->SetServingStatus(true);

  auto session_server = SessionServer::Create(io_, session_path, *registry_, epoch_);
  if (!session_server) return std::unexpected(session_server.error());
  session_server_ = std::move(*session_server);

  signals_ = std::make_unique<boost::asio::signal_set>(io_, SIGINT, SIGTERM, SIGHUP);
  WaitForSignal();
  for (int i = 0; i < kIoThreads; ++i) {
    io_threads_.emplace_back([this] {
      auto work = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }

  const auto usage = pools_->Find("cpu")->Usage();
  spdlog::info("hurrayd serving gRPC on unix:{}, sessions on {}, cpu pool {} MiB, epoch {}",
               config_.socket_path, session_path, usage.capacity_bytes >> 20, epoch_);
  sd_notifyf(0, "READY=1\nSTATUS=serving on %s\nMAINPID=%lu", config_.socket_path.c_str(),
             static_cast<unsigned long>(::getpid()));
  return {};
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
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (session_server_) session_server_->Stop();
  if (signals_) signals_->cancel();
  io_.stop();
  for (auto& thread : io_threads_) thread.join();
  io_threads_.clear();
  server_.reset();
  session_server_.reset();
  service_.reset();
  registry_.reset();
  pools_.reset();  // Removes the segments.
  // Only our own socket: a refused start must not unlink another daemon's. (The session
  // server unlinks its socket itself when it stops.)
  if (grpc_socket_bound_) ::unlink(config_.socket_path.c_str());
  if (grpc_socket_bound_) spdlog::info("hurrayd stopped");
}

Daemon::~Daemon() { Shutdown(); }

}  // namespace hurray::daemon
