#include "soak_run.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "hurray/client.h"
#include "soak_content.h"
#include "soak_ledger.h"
#include "testing/daemon_process.h"
#include "testing/temp_dir.h"

namespace hurray::soak {
namespace {

using Clock = std::chrono::steady_clock;
using testing::ChildProcess;
using testing::DaemonProcess;

constexpr int kExitWrong = 3;       // soak_worker.cc
constexpr int kExitDaemonGone = 4;  // soak_worker.cc
constexpr auto kTick = std::chrono::milliseconds(20);
constexpr char kDaemonName[] = "hurray-soak";

// What a consumer reports (soak_worker.cc).
struct ConsumerCounts {
  std::uint64_t checked = 0;
  std::uint64_t fast = 0;
  std::uint64_t bytes = 0;

  ConsumerCounts& operator+=(const ConsumerCounts& other) {
    checked += other.checked;
    fast += other.fast;
    bytes += other.bytes;
    return *this;
  }
};

// "checked N fast F bytes B"; nullopt for a line of another shape.
std::optional<ConsumerCounts> ParseCounts(std::string_view line) {
  ConsumerCounts counts;
  const std::pair<std::string_view, std::uint64_t*> fields[] = {
      {"checked ", &counts.checked}, {" fast ", &counts.fast}, {" bytes ", &counts.bytes}};
  for (const auto& [label, value] : fields) {
    if (!line.starts_with(label)) return std::nullopt;
    line.remove_prefix(label.size());
    const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), *value);
    if (error != std::errc()) return std::nullopt;
    line.remove_prefix(static_cast<std::size_t>(end - line.data()));
  }
  if (!line.empty()) return std::nullopt;
  return counts;
}

struct Worker {
  ChildProcess process;
  bool producer = false;
  int index = 0;                  // Producer or consumer number.
  std::uint64_t incarnation = 0;  // Global start count: unique per process.
  std::string stderr_path;
  ConsumerCounts counts;  // A consumer's last "checked N fast F bytes B".
  Clock::time_point started;
};

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Bytes of the /dev/shm files of every daemon this process started (DaemonProcess names
// their segments "<name>-<parent pid>-<n>-...").
std::uint64_t DaemonShmBytes() {
  const std::string prefix = fmt::format("{}-{}-", kDaemonName, ::getpid());
  std::uint64_t bytes = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    if (!entry.path().filename().string().starts_with(prefix)) continue;
    bytes += entry.file_size(error);
  }
  return bytes;
}

class Soak {
 public:
  Soak(const SoakOptions& options, std::string directory)
      : options_(options), directory_(std::move(directory)), random_(options.seed) {}

  Result<SoakFigures> Run();

 private:
  [[nodiscard]] DaemonProcess::Options DaemonOptions() const;
  // Starts the daemon on the soak's directory, state directory and shared-memory prefix:
  // a restarted one adopts its killed predecessor's journal and segments.
  Status StartDaemon();
  Status StartWorker(bool producer, int index);
  Status Drain(Worker& worker, std::chrono::milliseconds wait);
  Status Retire(Worker& worker);
  Status CheckEnded(Worker& worker, int status);
  Status Poll();
  Status Supervise();
  Status KillClient();
  Status KillAndRestartDaemon();
  Status CheckLedger();
  // With fast_path: fails when the consumers made no fast-path acquire since the last call
  // (or the start), if that was at least kFastPathWindow ago; then starts the next stretch.
  Status CheckFastPathTaken();
  [[nodiscard]] ConsumerCounts AllCounts() const;
  Status DeleteEverythingAndCheckEmpty();
  Clock::duration Jitter(std::chrono::milliseconds mean);
  [[nodiscard]] bool daemon_kills_seen() const { return figures_.daemon_kills > 0; }

  SoakOptions options_;
  std::string directory_;
  std::mt19937_64 random_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::vector<std::unique_ptr<DaemonProcess>> killed_daemons_;  // Their segments stay.
  std::string shm_prefix_;  // The first daemon's, kept by every restarted one.
  std::unique_ptr<Client> client_;
  Clock::time_point last_daemon_start_;
  std::uint64_t first_daemon_shm_bytes_ = 0;  // What one daemon's segments take.
  std::vector<Worker> workers_;
  std::uint64_t next_incarnation_ = 0;
  ConsumerCounts retired_counts_;    // Of consumers no longer running.
  Clock::time_point stretch_start_;  // CheckFastPathTaken's.
  std::uint64_t stretch_start_fast_ = 0;
  SoakLedger ledger_;
  SoakFigures figures_;
};

DaemonProcess::Options Soak::DaemonOptions() const {
  return {.binary = options_.hurrayd,
          .name = kDaemonName,
          .directory = directory_ + "/daemon",
          .pool_capacity_bytes = options_.pool_capacity_bytes,
          .log_level = "warn",
          .settings = {},
          .cpu_pool_settings = {},
          .cpus = {},
          .state_directory = directory_ + "/daemon/state",
          .shm_prefix = shm_prefix_};
}

Status Soak::StartDaemon() {
  HURRAY_ASSIGN_OR_RETURN(daemon_, DaemonProcess::Start(DaemonOptions()));
  shm_prefix_ = daemon_->shm_prefix();
  HURRAY_ASSIGN_OR_RETURN(client_, Client::Connect({.socket_path = daemon_->socket_path(),
                                                    .client_name = "soak supervisor"}));
  last_daemon_start_ = Clock::now();
  const std::uint64_t shm_bytes = DaemonShmBytes();
  if (!daemon_kills_seen()) {
    first_daemon_shm_bytes_ = shm_bytes;
  } else if (shm_bytes > first_daemon_shm_bytes_) {
    return InternalError(fmt::format(
        "after {} daemon kills /dev/shm holds {} bytes of the soak's daemons' segments; one "
        "daemon's take {}",
        figures_.daemon_kills, shm_bytes, first_daemon_shm_bytes_));
  }
  return {};
}

Status Soak::StartWorker(bool producer, int index) {
  const std::uint64_t incarnation = next_incarnation_++;
  const std::string seed = std::to_string(options_.seed * 1'000'003 + incarnation);
  const char* role = producer ? "producer" : options_.fast_path ? "fast-consumer" : "consumer";
  std::vector<std::string> argv{options_.worker, role, daemon_->socket_path()};
  if (producer) {
    argv.insert(argv.end(), {std::to_string(index), std::to_string(incarnation), seed});
  } else {
    argv.insert(argv.end(), {std::to_string(options_.producers), seed});
  }
  const std::string stderr_path = fmt::format("{}/worker-{}.err", directory_, incarnation);
  HURRAY_ASSIGN_OR_RETURN(ChildProcess process,
                          ChildProcess::Start(argv, {.stderr_path = stderr_path}));
  workers_.push_back({.process = std::move(process),
                      .producer = producer,
                      .index = index,
                      .incarnation = incarnation,
                      .stderr_path = stderr_path,
                      .counts = {},
                      .started = Clock::now()});
  return {};
}

// Records every line the worker wrote, waiting up to `wait` for each (0: only those there).
Status Soak::Drain(Worker& worker, std::chrono::milliseconds wait) {
  while (const std::optional<std::string> line = worker.process.ReadLine(wait)) {
    if (!worker.producer) {
      const std::optional<ConsumerCounts> counts = ParseCounts(*line);
      if (!counts) {
        return InternalError(fmt::format("{}: unreadable consumer line \"{}\"",
                                         worker.process.command_line(), *line));
      }
      worker.counts = *counts;
      continue;
    }
    if (const std::string problem = ledger_.Record(*line); !problem.empty()) {
      return InternalError(fmt::format("{}: {}", worker.process.command_line(), problem));
    }
  }
  return {};
}

// SIGKILL, then every line it wrote before it died (its stdout ends with it), then reap.
Status Soak::Retire(Worker& worker) {
  worker.process.Signal(SIGKILL);
  HURRAY_RETURN_IF_ERROR(Drain(worker, std::chrono::seconds(10)));
  worker.process.Kill();
  retired_counts_ += worker.counts;
  return {};
}

Clock::duration Soak::Jitter(std::chrono::milliseconds mean) {
  std::uniform_int_distribution<std::int64_t> spread(mean.count() / 2, mean.count() * 3 / 2);
  return std::chrono::milliseconds(spread(random_));
}

// A worker that ended by itself: after a daemon kill, UNAVAILABLE is expected (it is
// replaced); anything else fails the soak.
Status Soak::CheckEnded(Worker& worker, int status) {
  const bool daemon_gone = WIFEXITED(status) && WEXITSTATUS(status) == kExitDaemonGone;
  if (daemon_gone && worker.started < last_daemon_start_) return {};
  const std::string what = fmt::format(
      "{} (started {} ms after the daemon): {}\n{}", worker.process.command_line(),
      std::chrono::duration_cast<std::chrono::milliseconds>(worker.started - last_daemon_start_)
          .count(),
      testing::DescribeWaitStatus(status), ReadFile(worker.stderr_path));
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitWrong) return DataLossError(what);
  return InternalError(fmt::format("{}\nhurrayd log:\n{}", what, daemon_->Log(4000)));
}

// Reads every worker's lines, and replaces those that ended by themselves.
Status Soak::Poll() {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    Worker& worker = workers_[i];
    HURRAY_RETURN_IF_ERROR(Drain(worker, std::chrono::milliseconds(0)));
    if (worker.process.Running()) continue;
    HURRAY_RETURN_IF_ERROR(Drain(worker, std::chrono::seconds(10)));
    HURRAY_RETURN_IF_ERROR(CheckEnded(worker, *worker.process.Wait(std::chrono::seconds(0))));
    retired_counts_ += worker.counts;
    const bool producer = worker.producer;
    const int index = worker.index;
    workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(i));
    HURRAY_RETURN_IF_ERROR(StartWorker(producer, index));
    --i;
  }
  return {};
}

Status Soak::KillClient() {
  std::uniform_int_distribution<std::size_t> pick(0, workers_.size() - 1);
  const std::size_t i = pick(random_);
  HURRAY_RETURN_IF_ERROR(Retire(workers_[i]));
  const bool producer = workers_[i].producer;
  const int index = workers_[i].index;
  workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(i));
  ++figures_.client_kills;
  return StartWorker(producer, index);
}

// Kills the daemon and, with it, every producer (so that what the daemon must hold is
// known), restarts it on the same directory, checks it against the ledger, and starts new
// producers. Consumers live on: they reconnect, or end with UNAVAILABLE and are replaced.
Status Soak::KillAndRestartDaemon() {
  HURRAY_RETURN_IF_ERROR(CheckFastPathTaken());
  client_.reset();
  HURRAY_RETURN_IF_ERROR(daemon_->Kill());
  std::vector<int> producers;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].producer) continue;
    HURRAY_RETURN_IF_ERROR(Retire(workers_[i]));
    producers.push_back(workers_[i].index);
    workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(i--));
  }
  killed_daemons_.push_back(std::move(daemon_));
  ++figures_.daemon_kills;
  HURRAY_RETURN_IF_ERROR(StartDaemon());
  HURRAY_RETURN_IF_ERROR(CheckLedger());
  for (const int index : producers) HURRAY_RETURN_IF_ERROR(StartWorker(true, index));
  return {};
}

// Every soak tensor the daemon lists against the ledger, and each one's bytes.
Status Soak::CheckLedger() {
  std::vector<TensorSummary> listed;
  std::string token;
  do {
    HURRAY_ASSIGN_OR_RETURN(TensorListPage page, client_->List(kSoakPrefix, 1000, token));
    listed.insert(listed.end(), page.tensors.begin(), page.tensors.end());
    token = page.next_page_token;
  } while (!token.empty());
  if (const std::vector<std::string> problems = ledger_.Check(listed); !problems.empty()) {
    std::string text;
    for (const std::string& problem : problems) text += "\n  " + problem;
    return DataLossError(
        fmt::format("the daemon's tensors differ from the ledger in {} "
                    "names:{}\nhurrayd log (the restarted daemon's, after the killed one's):\n{}",
                    problems.size(), text, daemon_->Log(8000)));
  }
  for (const TensorSummary& tensor : listed) {
    HURRAY_ASSIGN_OR_RETURN(TensorView view, client_->Acquire(tensor.name));
    if (const std::string wrong = CheckSoakTensor(view.buffer(0), view.name(), view.version());
        !wrong.empty()) {
      return DataLossError(wrong);
    }
    ++figures_.tensors_checked;
  }
  ++figures_.ledger_checks;
  return {};
}

ConsumerCounts Soak::AllCounts() const {
  ConsumerCounts counts = retired_counts_;
  for (const Worker& worker : workers_) counts += worker.counts;
  return counts;
}

Status Soak::CheckFastPathTaken() {
  const Clock::time_point now = Clock::now();
  const ConsumerCounts counts = AllCounts();
  const std::uint64_t fast = counts.fast;
  if (options_.fast_path && fast == stretch_start_fast_ &&
      now - stretch_start_ >= kFastPathWindow) {
    return InternalError(fmt::format(
        "the consumers made no fast-path acquire in {} ms ({} daemon kills so far; {} views "
        "checked, {} through the fast path)",
        std::chrono::duration_cast<std::chrono::milliseconds>(now - stretch_start_).count(),
        figures_.daemon_kills, counts.checked, fast));
  }
  stretch_start_ = now;
  stretch_start_fast_ = fast;
  return {};
}

Status Soak::Supervise() {
  stretch_start_ = Clock::now();
  const Clock::time_point end = Clock::now() + options_.duration;
  Clock::time_point next_client_kill = Clock::now() + Jitter(options_.client_kill_interval);
  Clock::time_point next_daemon_kill = Clock::now() + Jitter(options_.daemon_kill_interval);
  while (Clock::now() < end) {
    HURRAY_RETURN_IF_ERROR(Poll());
    if (Clock::now() >= next_client_kill) {
      HURRAY_RETURN_IF_ERROR(KillClient());
      next_client_kill = Clock::now() + Jitter(options_.client_kill_interval);
    }
    if (options_.daemon_kills && Clock::now() >= next_daemon_kill) {
      HURRAY_RETURN_IF_ERROR(KillAndRestartDaemon());
      next_daemon_kill = Clock::now() + Jitter(options_.daemon_kill_interval);
    }
    std::this_thread::sleep_for(kTick);
  }
  return CheckFastPathTaken();
}

// With every worker gone: deletes every soak tensor and waits for the pool to be empty.
Status Soak::DeleteEverythingAndCheckEmpty() {
  HURRAY_ASSIGN_OR_RETURN(TensorListPage page, client_->List(kSoakPrefix, 1000));
  while (!page.tensors.empty()) {
    for (const TensorSummary& tensor : page.tensors) {
      HURRAY_RETURN_IF_ERROR(client_->Delete(tensor.name));
    }
    HURRAY_ASSIGN_OR_RETURN(page, client_->List(kSoakPrefix, 1000));
  }
  DaemonStats stats;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  while (true) {
    HURRAY_ASSIGN_OR_RETURN(stats, client_->Stats());
    std::uint64_t used = 0;
    std::uint64_t allocations = 0;
    for (const PoolStats& pool : stats.pools) {
      used += pool.used_bytes;
      allocations += pool.allocation_count;
    }
    if (used == 0 && allocations == 0 && stats.lease_count == 0 &&
        stats.pending_allocation_count == 0 && stats.version_count == 0) {
      return {};
    }
    if (Clock::now() > deadline) {
      return InternalError(fmt::format(
          "the pool is not empty at the end: {} bytes in {} allocations, {} pending, {} "
          "leases, {} versions",
          used, allocations, stats.pending_allocation_count, stats.lease_count,
          stats.version_count));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Result<SoakFigures> Soak::Run() {
  HURRAY_RETURN_IF_ERROR(StartDaemon());
  for (int i = 0; i < options_.producers; ++i) HURRAY_RETURN_IF_ERROR(StartWorker(true, i));
  for (int i = 0; i < options_.consumers; ++i) HURRAY_RETURN_IF_ERROR(StartWorker(false, i));
  HURRAY_RETURN_IF_ERROR(Supervise());
  for (Worker& worker : workers_) HURRAY_RETURN_IF_ERROR(Retire(worker));
  workers_.clear();
  HURRAY_RETURN_IF_ERROR(CheckLedger());
  HURRAY_RETURN_IF_ERROR(DeleteEverythingAndCheckEmpty());
  figures_.publishes = ledger_.publish_count();
  figures_.deletes = ledger_.delete_count();
  figures_.views_checked = retired_counts_.checked;
  figures_.fast_path_acquires = retired_counts_.fast;
  figures_.bytes_checked = retired_counts_.bytes;
  if (options_.fast_path && figures_.fast_path_acquires == 0) {
    return InternalError(fmt::format("the consumers checked {} views, none through the fast path",
                                     figures_.views_checked));
  }
  client_.reset();
  HURRAY_RETURN_IF_ERROR(daemon_->Stop());
  return figures_;
}

}  // namespace

Result<SoakFigures> RunSoak(const SoakOptions& options) {
  HURRAY_ASSIGN_OR_RETURN(testing::TempDir directory, testing::TempDir::Create("hurray-soak"));
  return Soak(options, directory.path()).Run();
}

std::string DescribeSoak(const SoakOptions& options, const SoakFigures& figures) {
  return fmt::format(
      "{} s, {} producers, {} {}consumers: {} publishes, {} deletes, {} views checked byte for "
      "byte by consumers (counted in fifties; {} through the fast path, {} bytes checked), {} "
      "client kills, {} daemon kills, {} ledger checks ({} tensors read back); no wrong byte, "
      "nothing lost, the pool empty at the end",
      options.duration.count(), options.producers, options.consumers,
      options.fast_path ? "fast-path " : "", figures.publishes, figures.deletes,
      figures.views_checked, figures.fast_path_acquires, figures.bytes_checked,
      figures.client_kills, figures.daemon_kills, figures.ledger_checks, figures.tensors_checked);
}

}  // namespace hurray::soak
