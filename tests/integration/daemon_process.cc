#include "daemon_process.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "hurray/client.h"
#include "hurray/v1/exchange.pb.h"

#ifndef HURRAYD_PATH
#error "HURRAYD_PATH must name the hurrayd binary"
#endif

namespace hurray::integration {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kStartTimeout = seconds(15);
constexpr auto kStopTimeout = seconds(30);

bool PathExists(const std::string& path) {
  struct stat status {};
  return ::lstat(path.c_str(), &status) == 0;
}

}  // namespace

DaemonProcess::DaemonProcess(Options options, std::string directory, std::string shm_prefix,
                             ChildProcess process)
    : options_(options),
      directory_(std::move(directory)),
      socket_path_(directory_ + "/d.sock"),
      log_path_(directory_ + "/hurrayd.log"),
      shm_prefix_(std::move(shm_prefix)),
      process_(std::move(process)) {}

std::unique_ptr<DaemonProcess> DaemonProcess::Start(const Options& options) {
  static std::atomic<int> next_instance{1};
  // A short fixed root keeps the socket path far below sockaddr_un's 107 bytes.
  std::string directory = "/tmp/hurray-it-XXXXXX";
  if (::mkdtemp(directory.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return nullptr;
  }
  const std::string shm_prefix =
      "hurray-it-" + std::to_string(::getpid()) + "-" + std::to_string(next_instance++);
  const std::string config_path = directory + "/hurrayd.toml";
  {
    std::ofstream config(config_path);
    config << "# Written by the integration tests (daemon_process.cc).\n"
           << "[cpu_pool]\n"
           << "shm_prefix = \"" << shm_prefix << "\"\n";
    if (!config) {
      ADD_FAILURE() << "cannot write " << config_path;
      return nullptr;
    }
  }
  const std::string socket_path = directory + "/d.sock";
  const std::string log_path = directory + "/hurrayd.log";
  ChildProcess process = ChildProcess::Start(
      {HURRAYD_PATH, "--socket", socket_path, "--cpu-pool-capacity",
       std::to_string(options.pool_capacity_bytes), "--log-level", "warn", "--config", config_path},
      ChildProcess::Options{.stdout_path = log_path,
                            .stderr_path = log_path,
                            // Shuts down cleanly (segments removed) if the test dies.
                            .parent_death_signal = SIGTERM});
  std::unique_ptr<DaemonProcess> daemon(
      new DaemonProcess(options, std::move(directory), shm_prefix, std::move(process)));

  const auto deadline = Clock::now() + kStartTimeout;
  std::string last_error = "never tried";
  while (true) {
    if (!daemon->process_.Running()) {
      ADD_FAILURE() << "hurrayd " << DescribeWaitStatus(*daemon->process_.Wait(milliseconds(0)))
                    << " before serving; log:\n"
                    << daemon->Log();
      daemon->stopped_ = true;
      return nullptr;
    }
    auto client = Client::Connect({.socket_path = socket_path, .client_name = "it-readiness"});
    if (client) {
      auto stats = (*client)->Stats();
      if (stats) return daemon;
      last_error = stats.error().ToString();
    } else {
      last_error = client.error().ToString();
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  ADD_FAILURE() << "hurrayd did not serve within " << kStartTimeout.count()
                << " s; last attempt: " << last_error << "; log:\n"
                << daemon->Log();
  return nullptr;
}

DaemonProcess::~DaemonProcess() {
  process_.Kill();
  for (const std::string& segment : Segments()) ::shm_unlink(("/" + segment).c_str());
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::vector<std::string> DaemonProcess::Segments() const {
  std::vector<std::string> segments;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(shm_prefix_ + "-")) segments.push_back(name);
  }
  return segments;
}

std::string DaemonProcess::Log() const {
  std::ifstream log(log_path_);
  std::ostringstream text;
  text << log.rdbuf();
  return text.str();
}

void DaemonProcess::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (!process_.Running()) {
    ADD_FAILURE() << "hurrayd " << DescribeWaitStatus(*process_.Wait(milliseconds(0)))
                  << " before it was told to stop; log:\n"
                  << Log();
    return;
  }
  // The segments must exist while it runs, or the check below proves nothing.
  EXPECT_FALSE(Segments().empty()) << "no /dev/shm/" << shm_prefix_ << "-* segment while running";
  process_.Signal(SIGTERM);
  const std::optional<int> status = process_.Wait(kStopTimeout);
  if (!status) {
    ADD_FAILURE() << "hurrayd still runs " << kStopTimeout.count()
                  << " s after SIGTERM; killed; log:\n"
                  << Log();
    process_.Kill();
    return;
  }
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "hurrayd " << DescribeWaitStatus(*status) << " after SIGTERM; log:\n"
      << Log();
  EXPECT_FALSE(PathExists(socket_path_)) << socket_path_ << " left behind";
  EXPECT_FALSE(PathExists(session_socket_path())) << session_socket_path() << " left behind";
  const std::vector<std::string> left = Segments();
  EXPECT_TRUE(left.empty()) << left.size() << " segment(s) left in /dev/shm, first "
                            << (left.empty() ? "" : left.front());
}

}  // namespace hurray::integration
