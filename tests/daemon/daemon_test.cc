// Daemon assembled in this process: the settings reach its parts, and a start that fails
// midway stops what it had started.
#include "daemon.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "hurray/ipc/socket_path.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "daemon_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    shm_prefix_ = "hurray-daemon-test-" + std::to_string(::getpid());
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  [[nodiscard]] Config SmallConfig() const {
    Config config = DefaultConfig();
    config.socket_path = directory_ + "/run/d.sock";
    config.log_level = "warn";
    config.cpu_pool.capacity_bytes = std::uint64_t{64} << 20;
    config.cpu_pool.shm_prefix = shm_prefix_;
    return config;
  }

  // The permission bits of `path`, or -1 when it does not exist.
  static int ModeOf(const std::string& path) {
    struct stat info{};
    if (::lstat(path.c_str(), &info) != 0) return -1;
    return static_cast<int>(info.st_mode & 0777);
  }

  // The pool segments in /dev/shm with this test's prefix.
  [[nodiscard]] int SegmentCount() const {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
      count += entry.path().filename().string().starts_with(shm_prefix_) ? 1 : 0;
    }
    return count;
  }

  std::string directory_;
  std::string shm_prefix_;
};

TEST_F(DaemonTest, SocketsGetTheConfiguredModes) {
  Config config = SmallConfig();
  config.socket_mode = 0600;
  config.session_socket_mode = 0640;
  config.socket_directory_mode = 0700;
  config.io_threads = 1;
  config.shutdown_grace_ms = 0;
  auto daemon = Daemon::Start(config);
  ASSERT_OK(daemon);
  EXPECT_EQ(ModeOf(config.socket_path), 0600);
  EXPECT_EQ(ModeOf(SessionSocketPath(config.socket_path)), 0640);
  EXPECT_EQ(ModeOf(directory_ + "/run"), 0700);
  EXPECT_EQ(SegmentCount(), 1);
  (*daemon)->Stop();
  EXPECT_OK((*daemon)->Wait());
  EXPECT_EQ(ModeOf(config.socket_path), -1);
  EXPECT_EQ(ModeOf(SessionSocketPath(config.socket_path)), -1);
  EXPECT_EQ(SegmentCount(), 0);
}

TEST_F(DaemonTest, AFailedStartStopsWhatHadStarted) {
  Config config = SmallConfig();
  // gRPC cannot listen there: the start fails after the pools exist.
  config.tcp_address = "256.256.256.256:1";
  EXPECT_ERROR(Daemon::Start(config), StatusCode::kFailedPrecondition,
               {"gRPC server could not listen", config.tcp_address});
  EXPECT_EQ(SegmentCount(), 0);
  EXPECT_EQ(ModeOf(SessionSocketPath(config.socket_path)), -1);
  // Nothing is left that a second start could trip on.
  config.tcp_address.clear();
  auto daemon = Daemon::Start(config);
  ASSERT_OK(daemon);
  (*daemon)->Stop();
  EXPECT_OK((*daemon)->Wait());
}

}  // namespace
}  // namespace hurray::daemon
