// Daemon assembled in this process: the settings reach its parts, and a start that fails
// midway stops what it had started.
#include "daemon.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

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
    config.state_directory = directory_ + "/state";
    return config;
  }

  // The permission bits of `path`, or -1 when it does not exist.
  static int ModeOf(const std::string& path) {
    struct stat info{};
    if (::lstat(path.c_str(), &info) != 0) return -1;
    return static_cast<int>(info.st_mode & 0777);
  }

  // The group of `path`, or nullopt when it does not exist.
  static std::optional<gid_t> GroupOf(const std::string& path) {
    struct stat info{};
    if (::lstat(path.c_str(), &info) != 0) return std::nullopt;
    return info.st_gid;
  }

  // A group other than this process's own that it may give its files: a supplementary
  // group, or (as root) group 1. nullopt when there is none.
  static std::optional<group> OtherGroup() {
    std::vector<gid_t> gids(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
    gids.resize(static_cast<std::size_t>(
        std::max(::getgroups(static_cast<int>(gids.size()), gids.data()), 0)));
    if (::geteuid() == 0) gids.push_back(1);
    for (const gid_t gid : gids) {
      if (gid == ::getegid()) continue;
      if (const group* entry = ::getgrgid(gid); entry != nullptr) return *entry;
    }
    return std::nullopt;
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

TEST_F(DaemonTest, SocketsAndTheirNewDirectoryGetTheSocketGroup) {
  const std::optional<group> other = OtherGroup();
  if (!other) GTEST_SKIP() << "this process is in no group but its own, and is not root";
  Config config = SmallConfig();
  config.socket_group = other->gr_name;
  auto daemon = Daemon::Start(config);
  ASSERT_OK(daemon);
  EXPECT_EQ(GroupOf(config.socket_path), other->gr_gid);
  EXPECT_EQ(GroupOf(SessionSocketPath(config.socket_path)), other->gr_gid);
  EXPECT_EQ(GroupOf(directory_ + "/run"), other->gr_gid);  // The daemon made it.
  EXPECT_NE(GroupOf(directory_), other->gr_gid);           // It did not make this one.
  (*daemon)->Stop();
  EXPECT_OK((*daemon)->Wait());
}

TEST_F(DaemonTest, UnknownSocketGroupRefusesTheStartBeforeAnyPool) {
  Config config = SmallConfig();
  config.socket_group = "hurray-no-such-group";
  EXPECT_ERROR(Daemon::Start(config), StatusCode::kFailedPrecondition,
               {"socket_group", "no group \"hurray-no-such-group\""});
  EXPECT_EQ(SegmentCount(), 0);
  EXPECT_EQ(ModeOf(config.socket_path), -1);
}

}  // namespace
}  // namespace hurray::daemon
