#include "testing/daemon_process.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "hurray/client.h"
#include "testing/daemon_stats.h"

namespace hurray::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kStartTimeout = seconds(60);
constexpr auto kStopTimeout = seconds(60);
// How much of the log an error message carries.
constexpr std::size_t kLogTailBytes = 4096;

bool PathExists(const std::string& path) {
  struct stat status{};
  return ::lstat(path.c_str(), &status) == 0;
}

// Makes the daemon's directory: `options.directory`, or a fresh TempDir when it is empty.
Result<std::optional<TempDir>> MakeDirectory(const DaemonProcess::Options& options) {
  if (options.directory.empty()) {
    HURRAY_ASSIGN_OR_RETURN(TempDir temp_dir, TempDir::Create(options.name));
    return std::optional<TempDir>(std::move(temp_dir));
  }
  std::error_code error;
  std::filesystem::create_directories(options.directory, error);
  if (error) return InternalError(fmt::format("create {}: {}", options.directory, error.message()));
  return std::optional<TempDir>();
}

Status WriteConfig(const std::string& path, const std::string& shm_prefix,
                   const std::string& state_directory, const DaemonProcess::Options& options) {
  std::ofstream config(path);
  config << "# Written by DaemonProcess (tests/testing/daemon_process.cc).\n";
  config << fmt::format("state_directory = \"{}\"\n", state_directory);
  for (const std::string& setting : options.settings) config << setting << "\n";
  config << "[cpu_pool]\n" << fmt::format("shm_prefix = \"{}\"\n", shm_prefix);
  for (const std::string& setting : options.cpu_pool_settings) config << setting << "\n";
  config.flush();
  if (!config) return InternalError(fmt::format("write {}", path));
  return {};
}

}  // namespace

DaemonProcess::DaemonProcess(Options options, std::optional<TempDir> temp_dir,
                             std::string directory, std::string shm_prefix, ChildProcess process)
    : options_(std::move(options)),
      temp_dir_(std::move(temp_dir)),
      directory_(std::move(directory)),
      socket_path_(directory_ + "/d.sock"),
      log_path_(directory_ + "/hurrayd.log"),
      shm_prefix_(std::move(shm_prefix)),
      process_(std::move(process)) {}

Result<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(const Options& options) {
  if (options.binary.empty()) return InvalidArgumentError("DaemonProcess: no hurrayd binary");
  static int next_instance = 1;
  HURRAY_ASSIGN_OR_RETURN(std::optional<TempDir> temp_dir, MakeDirectory(options));
  const std::string directory = temp_dir ? temp_dir->path() : options.directory;
  const std::string shm_prefix =
      options.shm_prefix.empty()
          ? fmt::format("{}-{}-{}", options.name, ::getpid(), next_instance++)
          : options.shm_prefix;
  const std::string state_directory =
      options.state_directory.empty() ? directory + "/state" : options.state_directory;
  const std::string config_path = directory + "/hurrayd.toml";
  HURRAY_RETURN_IF_ERROR(WriteConfig(config_path, shm_prefix, state_directory, options));
  const std::string log_path = directory + "/hurrayd.log";
  std::vector<std::string> argv{options.binary, "--socket",        directory + "/d.sock",
                                "--log-level",  options.log_level, "--config",
                                config_path};
  if (options.pool_capacity_bytes != 0) {
    argv.insert(argv.end(), {"--cpu-pool-capacity", std::to_string(options.pool_capacity_bytes)});
  }
  HURRAY_ASSIGN_OR_RETURN(
      ChildProcess process,
      ChildProcess::Start(argv, ChildProcess::Options{.stdout_path = log_path,
                                                      .stderr_path = log_path,
                                                      .cpus = options.cpus,
                                                      // Shuts down cleanly (segments removed) if
                                                      // the parent dies.
                                                      .parent_death_signal = SIGTERM}));
  std::unique_ptr<DaemonProcess> daemon(
      new DaemonProcess(options, std::move(temp_dir), directory, shm_prefix, std::move(process)));
  HURRAY_RETURN_IF_ERROR(daemon->WaitUntilServing());
  return daemon;
}

Status DaemonProcess::WaitUntilServing() {
  const auto deadline = Clock::now() + kStartTimeout;
  std::string last_error = "never tried";
  while (true) {
    if (!process_.Running()) {
      return UnavailableError(fmt::format("hurrayd {} before serving; log:\n{}",
                                          DescribeWaitStatus(*process_.Wait(milliseconds(0))),
                                          Log(kLogTailBytes)));
    }
    auto client = Client::Connect({.socket_path = socket_path_, .client_name = "readiness"});
    if (client) {
      auto stats = (*client)->Stats();
      if (stats) return {};
      last_error = stats.error().ToString();
    } else {
      last_error = client.error().ToString();
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return UnavailableError(
      fmt::format("hurrayd did not serve within {} s; last attempt: {}; log:\n{}",
                  kStartTimeout.count(), last_error, Log(kLogTailBytes)));
}

DaemonProcess::~DaemonProcess() {
  if (!stopped()) (void)Stop();
  process_.Kill();
  // Its segments, and the fast path's directory of a killed daemon that no later one
  // removed.
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.shm_directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(shm_prefix_ + "-") || name.starts_with("fast-path." + shm_prefix_ + "-")) {
      std::filesystem::remove(entry.path(), error);
    }
  }
}

std::vector<std::string> DaemonProcess::Segments() const {
  std::vector<std::string> segments;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.shm_directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(shm_prefix_ + "-")) segments.push_back(name);
  }
  return segments;
}

std::string DaemonProcess::Log(std::size_t max_bytes) const {
  std::ifstream log(log_path_);
  std::string all{std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>()};
  if (all.size() > max_bytes) all = "..." + all.substr(all.size() - max_bytes);
  return all;
}

Status DaemonProcess::Stop() {
  if (!stop_result_) stop_result_ = StopAndCheck();
  return *stop_result_;
}

Status DaemonProcess::Kill() {
  if (!process_.Running()) {
    return InternalError(fmt::format("hurrayd {} before it was killed; log:\n{}",
                                     DescribeWaitStatus(*process_.Wait(milliseconds(0))),
                                     Log(kLogTailBytes)));
  }
  process_.Kill();
  stop_result_ = Status();
  return {};
}

Status DaemonProcess::StopAndCheck() {
  if (!process_.Running()) {
    return InternalError(fmt::format("hurrayd {} before it was told to stop; log:\n{}",
                                     DescribeWaitStatus(*process_.Wait(milliseconds(0))),
                                     Log(kLogTailBytes)));
  }
  // A daemon that serves tensors keeps their segments as it stops, for the next one.
  const Result<v1::StatsResponse> stats = FetchDaemonStats(socket_path_);
  const bool tensors_live = stats && stats->version_count() != 0;
  process_.Signal(SIGTERM);
  const std::optional<int> status = process_.Wait(kStopTimeout);
  if (!status) {
    process_.Kill();
    return InternalError(fmt::format("hurrayd still ran {} s after SIGTERM; killed; log:\n{}",
                                     kStopTimeout.count(), Log(kLogTailBytes)));
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return InternalError(fmt::format("hurrayd {} after SIGTERM; log:\n{}",
                                     DescribeWaitStatus(*status), Log(kLogTailBytes)));
  }
  for (const std::string& path : {socket_path_, session_socket_path()}) {
    if (PathExists(path)) return InternalError(fmt::format("hurrayd left {} behind", path));
  }
  if (const std::vector<std::string> left = Segments(); !left.empty() && !tensors_live) {
    return InternalError(
        fmt::format("hurrayd left {} segment(s) in /dev/shm, first {}", left.size(), left.front()));
  }
  return {};
}

int DescriptorEnd(pid_t pid) {
  int end = 0;
  std::error_code ignored;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ignored)) {
    end = std::max(end, std::stoi(entry.path().filename().string()) + 1);
  }
  return end;
}

}  // namespace hurray::testing
