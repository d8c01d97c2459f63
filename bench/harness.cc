#include "harness.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "echo_server.h"
#include "hurray/v1/exchange.pb.h"
#include "memory_touch.h"
#include "system_info.h"

namespace hurray::bench {
namespace {

using ::hurray::testing::ChildProcess;
using ::hurray::testing::DaemonProcess;
using ::hurray::testing::DescribeWaitStatus;
using ::hurray::testing::TempDir;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kDefaultPoolCapacity = 4 * kGiB;
// Left free in /dev/shm for everyone else when the pool is scaled down.
constexpr std::uint64_t kDevShmMargin = 256 * kMiB;
constexpr auto kServerStartTimeout = seconds(30);
// How long a fresh hurrayd may take to reserve its pools in the background.
constexpr auto kReserveTimeout = seconds(300);

// Waits until every pool of the daemon at `socket_path` has reserved all its memory, so that
// no section measures while the background reservation still runs (or is refused by it:
// an allocation larger than what is reserved so far is UNAVAILABLE until then).
Status WaitUntilReserved(const std::string& socket_path) {
  HURRAY_ASSIGN_OR_RETURN(const auto client,
                          Client::Connect({.socket_path = socket_path, .client_name = "bench"}));
  const auto deadline = std::chrono::steady_clock::now() + kReserveTimeout;
  while (true) {
    HURRAY_ASSIGN_OR_RETURN(const DaemonStats stats, client->Stats());
    const bool reserved = std::ranges::all_of(stats.pools, [](const PoolStats& pool) {
      return pool.kind != "cpu" || pool.reserved_bytes >= pool.capacity_bytes;
    });
    if (reserved) return {};
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceededError(
          fmt::format("hurrayd did not reserve its pools within {} s", kReserveTimeout.count()));
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

std::string ReadTail(const std::string& path, std::size_t max_bytes) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  std::string all = text.str();
  if (all.size() > max_bytes) all = "..." + all.substr(all.size() - max_bytes);
  return all;
}

std::uint64_t LargestPowerOfTwoAtMost(std::uint64_t value) {
  std::uint64_t power = 1;
  while (power * 2 <= value) power *= 2;
  return power;
}

}  // namespace

Harness::Harness(Options options, TempDir work_directory)
    : options_(std::move(options)),
      scale_(ScaleFor(options_.quick)),
      work_directory_(std::move(work_directory)),
      self_(SelfExecutable()),
      started_(std::chrono::steady_clock::now()) {}

Result<std::unique_ptr<Harness>> Harness::Create(const Options& options) {
  if (options.hurrayd_path.empty() || !std::filesystem::exists(options.hurrayd_path)) {
    return InvalidArgumentError("--hurrayd \"" + options.hurrayd_path + "\" does not exist");
  }
  HURRAY_ASSIGN_OR_RETURN(TempDir directory, TempDir::Create("hurray-bench"));
  std::unique_ptr<Harness> harness(new Harness(options, std::move(directory)));
  Report& report = harness->report_;

  const std::vector<int> allowed = AllowedCpus();
  int pin = options.pin_cpu >= 0 ? options.pin_cpu : allowed.back();
  if (std::ranges::find(allowed, pin) == allowed.end()) {
    return InvalidArgumentError("--pin-cpu " + std::to_string(pin) +
                                " is not a CPU this process "
                                "may use");
  }
  harness->cpus_ = PlacementCpus{.pinned = {pin}, .unpinned = allowed};
  if (allowed.size() < 2) {
    report.AddNote(0, "only one CPU is usable: the two placements are the same");
  }

  // The pool: 4 GiB (the 1 GiB and 2 GiB cases need room for a second version while the
  // first lives), less when /dev/shm is smaller, and every size scaled to fit.
  const std::uint64_t wanted =
      options.pool_capacity_bytes != 0 ? options.pool_capacity_bytes : kDefaultPoolCapacity;
  const std::uint64_t shm_free = DevShmFreeBytes();
  std::uint64_t capacity = wanted;
  if (shm_free < wanted + kDevShmMargin) {
    capacity =
        shm_free > kDevShmMargin ? (shm_free - kDevShmMargin) / (64 * kMiB) * (64 * kMiB) : 0;
    if (capacity < 256 * kMiB) {
      return FailedPreconditionError("/dev/shm has " + FormatBytes(shm_free) +
                                     " free; the benchmark needs at least 512 MiB");
    }
    report.AddNote(0, "/dev/shm has only " + FormatBytes(shm_free) + " free: the pool is " +
                          FormatBytes(capacity) + " instead of " + FormatBytes(wanted) +
                          ", and the sizes below are scaled down to fit");
  }
  harness->pool_capacity_bytes_ = capacity;
  Scale& scale = harness->scale_;
  // Section 1 holds a consumer tensor and two producer versions of the largest size.
  const std::uint64_t largest = LargestPowerOfTwoAtMost(capacity / 4);
  if (scale.tensor_sizes.back() > largest) {
    std::erase_if(scale.tensor_sizes, [&](std::uint64_t size) { return size > largest; });
    if (scale.tensor_sizes.empty() || scale.tensor_sizes.back() != largest) {
      scale.tensor_sizes.push_back(largest);
    }
    report.AddNote(1, "the largest size is " + FormatBytes(largest) + " (pool " +
                          FormatBytes(capacity) + "), not 1 GiB: the ratios compare it with 4 KiB");
  }
  if (scale.read_bytes > largest) {
    scale.read_bytes = largest;
    report.AddNote(2, "the tensor read is " + FormatBytes(largest) + ", not 1 GiB (pool " +
                          FormatBytes(capacity) + ")");
  }
  if (scale.model_total_bytes > capacity / 2) {
    scale.model_total_bytes = capacity / 2;
    report.AddNote(5, "the model-like set is " + FormatBytes(scale.model_total_bytes) +
                          ", not 2 GiB (pool " + FormatBytes(capacity) + ")");
  }
  return harness;
}

Harness::~Harness() {
  setup_client_.reset();
  daemon_.reset();
  StopBulkBaselines();
  echo_server_.reset();
  if (options_.keep_work_directory) {
    work_directory_.Keep();
    std::fprintf(stderr, "hurray_bench: kept %s\n", work_directory_.path().c_str());
  }
}

void Harness::Progress(std::string_view what) const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::fprintf(stderr, "[%7.1f s] %.*s\n", elapsed, static_cast<int>(what.size()), what.data());
}

Result<DaemonProcess*> Harness::Daemon(bool huge_pages) {
  if (daemon_ && daemon_huge_pages_ == huge_pages) return daemon_.get();
  return FreshDaemon(huge_pages);
}

Result<DaemonProcess*> Harness::FreshDaemon(bool huge_pages) {
  if (auto stopped = StopDaemon(); !stopped) return std::unexpected(stopped.error());
  if (huge_pages && huge_pages_setting_.empty()) {
    return FailedPreconditionError("huge pages asked for, but no huge_pages setting is known");
  }
  Progress("starting hurrayd, pool " + FormatBytes(pool_capacity_bytes_) +
           (huge_pages ? ", huge_pages = " + huge_pages_setting_ : ""));
  std::vector<std::string> cpu_pool_settings;
  // HOOK (huge pages): the CPU pool option comes from another change; the harness passes
  // it only when `hurrayd --print-config` shows it (section_huge_pages.cc).
  if (huge_pages) cpu_pool_settings.push_back("huge_pages = " + huge_pages_setting_);
  HURRAY_ASSIGN_OR_RETURN(
      daemon_, DaemonProcess::Start(DaemonProcess::Options{
                   .binary = options_.hurrayd_path,
                   .name = "hurray-bench",
                   .directory = work_directory_.Path("hurrayd-" + std::to_string(next_daemon_++)),
                   .pool_capacity_bytes = pool_capacity_bytes_,
                   // Info logs only start-up and shut-down (the pool, huge pages), never a
                   // request.
                   .log_level = "info",
                   .settings = {fmt::format("sealed_pool.capacity = {}", kSealedPoolCapacityBytes)},
                   .cpu_pool_settings = std::move(cpu_pool_settings),
                   .cpus = cpus_.For(current_placement_)}));
  Progress("waiting for hurrayd to reserve its pools");
  HURRAY_RETURN_IF_ERROR(WaitUntilReserved(daemon_->socket_path()));
  daemon_huge_pages_ = huge_pages;
  return daemon_.get();
}

Status Harness::StopDaemon() {
  setup_client_.reset();
  if (!daemon_) return {};
  Status stopped = daemon_->Stop();
  daemon_.reset();
  return stopped;
}

Result<Client*> Harness::SetupClient() {
  if (setup_client_) return setup_client_.get();
  auto daemon = Daemon(daemon_ && daemon_huge_pages_);
  if (!daemon) return std::unexpected(daemon.error());
  auto client = Client::Connect(
      {.socket_path = (*daemon)->socket_path(), .client_name = "hurray_bench setup"});
  if (!client) return std::unexpected(client.error());
  setup_client_ = std::move(*client);
  return setup_client_.get();
}

Status Harness::PublishTensor(const std::string& name, std::uint64_t bytes, bool fill,
                              const std::string& pool) {
  auto client = SetupClient();
  if (!client) return std::unexpected(client.error());
  auto descriptor = TensorDescriptor::Dense(ElementType::kUint8, {bytes});
  if (!descriptor) return std::unexpected(descriptor.error());
  auto tensor = (*client)->Allocate(*descriptor, pool);
  if (!tensor) return std::unexpected(tensor.error().WithContext("allocate " + name));
  if (fill) FillPattern(tensor->buffer(0));
  auto published = tensor->Publish(name);
  if (!published) return std::unexpected(published.error().WithContext("publish " + name));
  return {};
}

void Harness::DeleteTensors(const std::vector<std::string>& names) {
  auto client = SetupClient();
  if (!client) return;
  for (const std::string& name : names) (void)(*client)->Delete(name);
}

Result<ChildProcess> Harness::StartServerRole(const WorkerArgs& role_and_args) {
  std::string stderr_path;
  auto server = StartWorker(current_placement_, role_and_args, false, &stderr_path);
  if (!server) return std::unexpected(server.error());
  auto line = server->ReadLine(kServerStartTimeout);
  if (!line || *line != "ready") {
    return UnavailableError(role_and_args.front() +
                            " did not start: " + ReadTail(stderr_path, 2000));
  }
  return std::move(*server);
}

Result<std::string> Harness::EchoServerSocket() {
  std::string socket = work_directory_.Path("echo.sock");
  if (!echo_server_) {
    auto server = StartServerRole({"echo-server", socket});
    if (!server) return std::unexpected(server.error());
    echo_server_ = std::move(*server);
  }
  return socket;
}

Result<std::string> Harness::GrpcServerSocket(std::uint64_t bytes) {
  std::string socket = work_directory_.Path("grpc.sock");
  if (grpc_server_ && grpc_server_bytes_ < bytes) grpc_server_.reset();
  if (!grpc_server_) {
    auto server = StartServerRole({"grpc-server", socket, std::to_string(bytes)});
    if (!server) return std::unexpected(server.error());
    grpc_server_ = std::move(*server);
    grpc_server_bytes_ = bytes;
  }
  return socket;
}

Result<RedisServer*> Harness::Redis() {
  if (!redis_) {
    auto server = RedisServer::Start(work_directory_.path(), cpus_.For(current_placement_));
    if (!server) return std::unexpected(server.error());
    redis_ = std::move(*server);
  }
  return redis_.get();
}

void Harness::StopBulkBaselines() {
  redis_.reset();
  grpc_server_.reset();
}

std::vector<pid_t> Harness::ServerPids() const {
  std::vector<pid_t> pids;
  if (daemon_) pids.push_back(daemon_->pid());
  if (echo_server_) pids.push_back(echo_server_->pid());
  if (grpc_server_) pids.push_back(grpc_server_->pid());
  if (redis_) pids.push_back(redis_->pid());
  return pids;
}

Status Harness::Place(Placement placement) {
  current_placement_ = placement;
  for (pid_t pid : ServerPids()) {
    if (auto placed = SetProcessAffinity(pid, cpus_.For(placement)); !placed) return placed;
  }
  return {};
}

Result<ChildProcess> Harness::StartWorker(Placement placement, const WorkerArgs& args,
                                          bool stdin_pipe, std::string* stderr_path) {
  std::vector<std::string> argv = {self_, "worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  *stderr_path = work_directory_.Path("worker-" + std::to_string(next_worker_++) + ".stderr");
  return ChildProcess::Start(argv, ChildProcess::Options{.stderr_path = *stderr_path,
                                                         .stdin_pipe = stdin_pipe,
                                                         .cpus = cpus_.For(placement)});
}

Result<WorkerResults> Harness::RunWorker(Placement placement, const WorkerArgs& role_and_args,
                                         std::chrono::seconds timeout) {
  auto results = RunWorkers(placement, {role_and_args}, timeout, /*together=*/false);
  if (!results) return std::unexpected(results.error());
  return std::move(results->front());
}

Result<std::vector<WorkerResults>> Harness::RunWorkersTogether(
    Placement placement, const std::vector<WorkerArgs>& workers, std::chrono::seconds timeout) {
  return RunWorkers(placement, workers, timeout, /*together=*/true);
}

Result<std::vector<WorkerResults>> Harness::RunWorkers(Placement placement,
                                                       const std::vector<WorkerArgs>& workers,
                                                       std::chrono::seconds timeout,
                                                       bool together) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto remaining = [&] {
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                         deadline - std::chrono::steady_clock::now()));
  };
  std::vector<ChildProcess> children;
  std::vector<std::string> stderr_paths(workers.size());
  std::vector<WorkerResults> results(workers.size());
  const auto failure = [&](std::size_t index, const std::string& what) {
    std::string command;
    for (const std::string& argument : workers[index]) command += " " + argument;
    return InternalError("worker" + command + ": " + what +
                         "; stderr: " + ReadTail(stderr_paths[index], 2000));
  };
  for (std::size_t i = 0; i < workers.size(); ++i) {
    auto child = StartWorker(placement, workers[i], together, &stderr_paths[i]);
    if (!child) return std::unexpected(child.error());
    children.push_back(std::move(*child));
  }
  if (together) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      while (true) {
        auto line = children[i].ReadLine(remaining());
        if (!line) return failure(i, "ended or timed out before \"ready\"");
        if (*line == "ready") break;
        ParseWorkerLine(*line, results[i]);
      }
    }
    for (ChildProcess& child : children) {
      if (auto said = child.WriteLine("go"); !said) return std::unexpected(said.error());
    }
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    while (auto line = children[i].ReadLine(remaining())) ParseWorkerLine(*line, results[i]);
    const auto status = children[i].Wait(remaining());
    if (!status) {
      children[i].Kill();
      return failure(i, "still running after " + std::to_string(timeout.count()) + " s; killed");
    }
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      return failure(i, DescribeWaitStatus(*status));
    }
  }
  return results;
}

Status Harness::MeasureSocketRoundTrip(int section, const std::string& key) {
  auto socket = EchoServerSocket();
  if (!socket) return std::unexpected(socket.error());
  for (Placement placement : kBothPlacements) {
    if (auto placed = Place(placement); !placed) return placed;
    auto results =
        RunWorker(placement, {"socket-round-trip", *socket, std::to_string(scale_.round_trips)},
                  seconds(120));
    if (!results) return std::unexpected(results.error());
    report_.AddFigure(FigureSpec{.key = key,
                                 .section = section,
                                 .label = "raw unix-socket round trip (same placement)",
                                 .unit = "us"},
                      placement, Scaled(Summarize(results->Values("round_trip_ns")), 1e-3));
  }
  return {};
}

}  // namespace hurray::bench
