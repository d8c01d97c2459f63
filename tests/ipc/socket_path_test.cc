// The client's fallback socket directory, /tmp/hurray-$UID: connected through only when it
// is the caller's own (or root's) and only its owner may write it. The checks run in child
// processes as an otherwise unused uid, whose fallback directory the test makes and gives
// away, as another user could make it first.
#include "hurray/ipc/socket_path.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "hurray/ipc/unique_fd.h"
#include "hurray/ipc/unix_socket.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

constexpr uid_t kCaller = 61004;    // Whose fallback directory is checked.
constexpr uid_t kSquatter = 65534;  // nobody, who made it first.

// What the child saw: 0 as expected, 1 not, 2 setresuid failed.
template <typename Check>
int InChildAs(uid_t uid, Check check) {
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    if (::setresuid(uid, uid, uid) != 0) ::_exit(2);
    ::_exit(check() ? 0 : 1);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(FallbackSocketDirectoryTest, IsPerUidUnderTmp) {
  EXPECT_EQ(FallbackSocketDirectory(), "/tmp/hurray-" + std::to_string(::getuid()));
}

TEST(FallbackSocketDirectoryTest, OtherPathsAreNotChecked) {
  EXPECT_OK(CheckFallbackSocketDirectory("/nonexistent-hurray-dir/hurrayd.sock"));
  EXPECT_OK(CheckFallbackSocketDirectory("/tmp/hurrayd.sock"));
}

class SquattedFallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to act as two other users";
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
    ASSERT_EQ(::mkdir(directory_.c_str(), 0755), 0);
    // A listener there, as a fake daemon would have.
    listener_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    ASSERT_OK_AND_ASSIGN(const sockaddr_un address, UnixSocketAddress(socket_));
    ASSERT_EQ(::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)),
              0);
    ASSERT_EQ(::chmod(socket_.c_str(), 0666), 0);
    ASSERT_EQ(::listen(listener_.get(), 4), 0);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  // Whether a connection reached the listener (accepted and closed at once).
  bool Reached() {
    const UniqueFd accepted(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    return accepted.valid();
  }

  // Connecting as kCaller through its fallback path fails with FAILED_PRECONDITION naming
  // `found`.
  int RefusedAsCaller(const std::string& found) {
    return InChildAs(kCaller, [&] {
      if (CheckFallbackSocketDirectory(socket_)) return false;
      auto connected = ConnectUnixSocket(socket_);
      return !connected && connected.error().code() == StatusCode::kFailedPrecondition &&
             connected.error().message().find("socket directory " + directory_) !=
                 std::string::npos &&
             connected.error().message().find(found) != std::string::npos &&
             connected.error().message().find("not connecting") != std::string::npos;
    });
  }

  int ConnectsAsCaller() {
    return InChildAs(kCaller, [&] { return ConnectUnixSocket(socket_).has_value(); });
  }

  const std::string directory_ = "/tmp/hurray-" + std::to_string(kCaller);
  const std::string socket_ = directory_ + "/hurrayd.sock";
  UniqueFd listener_;
};

TEST_F(SquattedFallbackTest, RefusesADirectoryAnotherUserOwns) {
  ASSERT_EQ(::chown(directory_.c_str(), kSquatter, kSquatter), 0);
  EXPECT_EQ(RefusedAsCaller("owned by uid 65534 with mode 0755"), 0)
      << "1: not refused as expected; 2: setresuid failed";
  EXPECT_FALSE(Reached()) << "the client connected to the squatter's socket";
}

TEST_F(SquattedFallbackTest, RefusesADirectoryOthersMayWrite) {
  ASSERT_EQ(::chown(directory_.c_str(), kCaller, kCaller), 0);
  ASSERT_EQ(::chmod(directory_.c_str(), 0777), 0);
  EXPECT_EQ(RefusedAsCaller("owned by uid 61004 with mode 0777"), 0);
  EXPECT_FALSE(Reached());
}

TEST_F(SquattedFallbackTest, RefusesALinkToAnotherDirectory) {
  const std::string real = directory_ + "-real";
  std::filesystem::remove_all(real);
  std::filesystem::rename(directory_, real);
  ASSERT_EQ(::symlink(real.c_str(), directory_.c_str()), 0);
  EXPECT_EQ(RefusedAsCaller("is a symbolic link"), 0);
  EXPECT_FALSE(Reached());
  std::filesystem::remove(directory_);
  std::filesystem::rename(real, directory_);
}

TEST_F(SquattedFallbackTest, ConnectsThroughItsOwnOrRootsDirectory) {
  EXPECT_EQ(ConnectsAsCaller(), 0) << "root's directory";
  EXPECT_TRUE(Reached());
  ASSERT_EQ(::chown(directory_.c_str(), kCaller, kCaller), 0);
  EXPECT_EQ(ConnectsAsCaller(), 0) << "the caller's own directory";
  EXPECT_TRUE(Reached());
}

}  // namespace
}  // namespace hurray
