// Unix sockets by path: addresses, connecting, and PrepareSocketPath's one policy for every
// listener, on real files in a temporary directory.
#include "hurray/ipc/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "hurray/ipc/unique_fd.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/hurray-ipc-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    path_ = directory_ + "/hurrayd.sock";
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // A socket bound at `path`, listening when `listen` (else as a process that died leaves
  // it once the descriptor closes).
  static UniqueFd Bind(const std::string& path, bool listen) {
    UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    auto address = UnixSocketAddress(path);
    EXPECT_OK(address);
    if (!address) return {};
    EXPECT_EQ(::bind(socket.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)),
              0);
    if (listen) {
      EXPECT_EQ(::listen(socket.get(), 4), 0);
    }
    return socket;
  }

  static bool Exists(const std::string& path) {
    struct stat info{};
    return ::lstat(path.c_str(), &info) == 0;
  }

  std::string directory_;
  std::string path_;
};

TEST_F(UnixSocketTest, SocketPathTooLongIsInvalid) {
  EXPECT_ERROR(UnixSocketAddress(std::string(200, 'x')), StatusCode::kInvalidArgument,
               {"200 bytes", "at most 107"});
  EXPECT_ERROR(UnixSocketAddress(""), StatusCode::kInvalidArgument, {"empty"});
  EXPECT_ERROR(UnixSocketAddress(std::string("a\0b", 3)), StatusCode::kInvalidArgument,
               {"NUL byte"});
}

TEST_F(UnixSocketTest, ConnectToMissingSocketIsUnavailable) {
  EXPECT_ERROR(ConnectUnixSocket("/nonexistent-hurray-dir/session.sock"), StatusCode::kUnavailable,
               {"connect /nonexistent-hurray-dir/session.sock", "no daemon listens there"});
}

TEST_F(UnixSocketTest, ConnectToStaleSocketIsUnavailable) {
  {
    UniqueFd stale = Bind(path_, /*listen=*/false);
  }
  EXPECT_ERROR(ConnectUnixSocket(path_), StatusCode::kUnavailable,
               {"connect " + path_, "no daemon listens there"});
}

TEST_F(UnixSocketTest, ConnectsToListener) {
  UniqueFd listener = Bind(path_, /*listen=*/true);
  auto socket = ConnectUnixSocket(path_);
  ASSERT_OK(socket);
  EXPECT_NE(::fcntl(socket->get(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST_F(UnixSocketTest, PrepareCreatesMissingDirectoriesWithMode0755) {
  const std::string path = directory_ + "/run/hurray/hurrayd.sock";
  const mode_t old_umask = ::umask(0077);
  auto prepared = PrepareSocketPath(path);
  ::umask(old_umask);
  ASSERT_OK(prepared);
  EXPECT_FALSE(*prepared);  // Nothing was there to remove.
  for (const std::string& made : {directory_ + "/run", directory_ + "/run/hurray"}) {
    struct stat info{};
    ASSERT_EQ(::stat(made.c_str(), &info), 0) << made;
    EXPECT_TRUE(S_ISDIR(info.st_mode)) << made;
    EXPECT_EQ(info.st_mode & 07777, 0755u) << made;
  }
  EXPECT_FALSE(Exists(path));
}

TEST_F(UnixSocketTest, PrepareRemovesStaleSocketFile) {
  {
    UniqueFd stale = Bind(path_, /*listen=*/false);
  }
  ASSERT_TRUE(Exists(path_));
  auto prepared = PrepareSocketPath(path_);
  ASSERT_OK(prepared);
  EXPECT_TRUE(*prepared);
  EXPECT_FALSE(Exists(path_));
}

TEST_F(UnixSocketTest, PrepareRefusesSocketInUse) {
  UniqueFd listener = Bind(path_, /*listen=*/true);
  EXPECT_ERROR(PrepareSocketPath(path_), StatusCode::kAlreadyExists, {path_, "in use"});
  EXPECT_OK(ConnectUnixSocket(path_));  // Still there, still listening.
}

TEST_F(UnixSocketTest, PrepareRefusesFileThatIsNotASocket) {
  {
    UniqueFd file(::open(path_.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  }
  EXPECT_ERROR(PrepareSocketPath(path_), StatusCode::kFailedPrecondition,
               {path_, "is not a socket"});
  struct stat info{};
  ASSERT_EQ(::lstat(path_.c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));  // Left alone.
}

TEST_F(UnixSocketTest, PrepareRefusesInvalidPath) {
  EXPECT_ERROR(PrepareSocketPath(directory_ + "/" + std::string(120, 's')),
               StatusCode::kInvalidArgument, {"at most 107"});
  EXPECT_ERROR(PrepareSocketPath(""), StatusCode::kInvalidArgument, {"empty"});
}

TEST_F(UnixSocketTest, PrepareRefusesDirectoryOfAnotherUser) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root, to give the directory to another user and to act as a third";
  }
  constexpr uid_t kOwner = 61001;
  constexpr uid_t kSomeoneElse = 61002;
  const std::string socket_directory = directory_ + "/theirs";
  ASSERT_EQ(::chmod(directory_.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(socket_directory.c_str(), 0777), 0);
  ASSERT_EQ(::chown(socket_directory.c_str(), kOwner, kOwner), 0);
  const std::string path = socket_directory + "/hurrayd.sock";
  // In a child, as neither root nor the owner: the check must refuse.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setresuid(kSomeoneElse, kSomeoneElse, kSomeoneElse) != 0) ::_exit(2);
    auto prepared = PrepareSocketPath(path);
    const bool refused =
        !prepared && prepared.error().code() == StatusCode::kFailedPrecondition &&
        prepared.error().message().find("belongs to uid 61001") != std::string::npos;
    ::_exit(refused ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not refused as expected; 2: setresuid failed";
  // As its owner's, or root's, it is fine.
  EXPECT_OK(PrepareSocketPath(path));
}

}  // namespace
}  // namespace hurray
