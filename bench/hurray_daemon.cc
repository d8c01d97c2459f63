#include "hurray_daemon.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "hurray/client.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::bench {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kStartTimeout = seconds(60);
constexpr auto kStopTimeout = seconds(60);

}  // namespace

Result<ProcessMemory> ReadProcessMemory(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  std::ifstream status(path);
  if (!status) return NotFoundError("open " + path);
  ProcessMemory memory;
  int found = 0;
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string name;
    std::uint64_t kib = 0;
    fields >> name >> kib;
    const std::uint64_t bytes = kib * 1024;
    if (name == "VmRSS:") {
      memory.vm_rss = bytes;
      ++found;
    } else if (name == "RssAnon:") {
      memory.rss_anon = bytes;
      ++found;
    } else if (name == "RssFile:") {
      memory.rss_file = bytes;
      ++found;
    } else if (name == "RssShmem:") {
      memory.rss_shmem = bytes;
      ++found;
    }
  }
  if (found != 4) return InternalError(path + ": VmRSS, RssAnon, RssFile or RssShmem missing");
  return memory;
}

Result<std::optional<std::string>> HugePagesSetting(const std::string& hurrayd_path,
                                                    const std::string& mode) {
  auto child = ChildProcess::Start({hurrayd_path, "--print-config"}, {});
  if (!child) return std::unexpected(child.error());
  std::string text;
  while (auto line = child->ReadLine(seconds(10))) text += *line + "\n";
  const auto status = child->Wait(seconds(10));
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return InternalError(hurrayd_path + " --print-config " +
                         (status ? DescribeWaitStatus(*status) : std::string("did not end")));
  }
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("huge_pages")) continue;
    const auto equals = line.find('=');
    if (equals == std::string::npos) continue;
    const auto value = line.find_first_not_of(' ', equals + 1);
    if (value == std::string::npos) continue;
    if (line[value] == '\'' || line[value] == '"') return "\"" + mode + "\"";
    return std::string("true");
  }
  return std::nullopt;
}

HurrayDaemon::HurrayDaemon(Options options, std::string shm_prefix, ChildProcess process)
    : options_(std::move(options)),
      socket_path_(options_.directory + "/d.sock"),
      log_path_(options_.directory + "/hurrayd.log"),
      shm_prefix_(std::move(shm_prefix)),
      process_(std::move(process)) {}

Result<std::unique_ptr<HurrayDaemon>> HurrayDaemon::Start(const Options& options) {
  std::error_code error;
  std::filesystem::create_directories(options.directory, error);
  if (error) return InternalError("create " + options.directory + ": " + error.message());
  static int next_instance = 1;
  const std::string shm_prefix =
      "hurray-bench-" + std::to_string(::getpid()) + "-" + std::to_string(next_instance++);
  const std::string config_path = options.directory + "/hurrayd.toml";
  {
    std::ofstream config(config_path);
    config << "# Written by hurray_bench (bench/hurray_daemon.cc).\n"
           // Info logs only start-up and shut-down (the pool, huge pages), never a request.
           << "log_level = \"info\"\n"
           << "[cpu_pool]\n"
           << "shm_prefix = \"" << shm_prefix << "\"\n";
    // HOOK (huge pages): the CPU pool option comes from another change; the harness passes
    // it only when `hurrayd --print-config` shows it (HugePagesSetting).
    if (!options.huge_pages_setting.empty()) {
      config << "huge_pages = " << options.huge_pages_setting << "\n";
    }
    if (!config) return InternalError("write " + config_path);
  }
  const std::string socket_path = options.directory + "/d.sock";
  const std::string log_path = options.directory + "/hurrayd.log";
  auto process = ChildProcess::Start(
      {options.binary, "--socket", socket_path, "--cpu-pool-capacity",
       std::to_string(options.pool_capacity_bytes), "--config", config_path},
      ChildProcess::Options{.stdout_path = log_path,
                            .stderr_path = log_path,
                            .cpus = options.cpus,
                            // Shuts down cleanly (segments removed) if the harness dies.
                            .parent_death_signal = SIGTERM});
  if (!process) return std::unexpected(process.error());
  std::unique_ptr<HurrayDaemon> daemon(new HurrayDaemon(options, shm_prefix, std::move(*process)));

  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  std::string last_error = "never tried";
  while (std::chrono::steady_clock::now() < deadline) {
    if (!daemon->process_.Running()) {
      return UnavailableError("hurrayd " +
                              DescribeWaitStatus(*daemon->process_.Wait(milliseconds(0))) +
                              " before serving; log:\n" + daemon->Log());
    }
    auto client = Client::Connect({.socket_path = socket_path, .client_name = "bench-readiness"});
    if (client) {
      auto stats = (*client)->Stats();
      if (stats) return daemon;
      last_error = stats.error().ToString();
    } else {
      last_error = client.error().ToString();
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return UnavailableError("hurrayd did not serve within " + std::to_string(kStartTimeout.count()) +
                          " s; last attempt: " + last_error + "; log:\n" + daemon->Log());
}

HurrayDaemon::~HurrayDaemon() {
  if (process_.Running()) (void)Stop();
  process_.Kill();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(shm_prefix_ + "-")) ::shm_unlink(("/" + name).c_str());
  }
}

std::string HurrayDaemon::Log(std::size_t max_bytes) const {
  std::ifstream log(log_path_);
  std::ostringstream text;
  text << log.rdbuf();
  std::string all = text.str();
  if (all.size() > max_bytes) all = "..." + all.substr(all.size() - max_bytes);
  return all;
}

Status HurrayDaemon::Stop() {
  if (!process_.Running()) {
    return InternalError("hurrayd " + DescribeWaitStatus(*process_.Wait(milliseconds(0))) +
                         " before it was told to stop; log:\n" + Log());
  }
  process_.Signal(SIGTERM);
  const auto status = process_.Wait(kStopTimeout);
  if (!status) {
    process_.Kill();
    return InternalError("hurrayd still ran " + std::to_string(kStopTimeout.count()) +
                         " s after SIGTERM; killed; log:\n" + Log());
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return InternalError("hurrayd " + DescribeWaitStatus(*status) + " after SIGTERM; log:\n" +
                         Log());
  }
  return {};
}

}  // namespace hurray::bench
