// Unix sockets by path: addresses, connecting, PrepareSocketPath's one policy for every
// listener and BoundSocketFile, on real files in a temporary directory.
#include "hurray/ipc/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

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

// The uid that owns the directories of another user in these tests (nobody), and a third
// uid that is neither root nor that owner.
constexpr uid_t kOtherUser = 65534;
constexpr uid_t kSomeoneElse = 61002;

// "0755", as the messages write modes.
std::string Octal(mode_t mode) {
  std::array<char, 16> text{};
  std::snprintf(text.data(), text.size(), "%04o", static_cast<unsigned>(mode));
  return text.data();
}

// Runs `check` in a child process as `uid`; true when it returned true.
template <typename Check>
bool InChildAs(uid_t uid, Check check) {
  const pid_t child = ::fork();
  if (child < 0) return false;
  if (child == 0) {
    if (::setresuid(uid, uid, uid) != 0) ::_exit(2);
    ::_exit(check() ? 0 : 1);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST_F(UnixSocketTest, PrepareRefusesDirectoryOfAnotherUserEvenAsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give the directory to another user";
  const std::string theirs = directory_ + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  const std::string stale = theirs + "/hurrayd.sock";
  {
    UniqueFd socket = Bind(stale, /*listen=*/false);  // A stale socket a daemon would remove.
  }
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_ERROR(PrepareSocketPath(stale), StatusCode::kFailedPrecondition,
               {"socket directory " + theirs, "owned by uid 65534 with mode 0755",
                "owned by uid 0 (this process's user) or root", "writable only by its owner"});
  EXPECT_TRUE(Exists(stale));  // Nothing in it was touched.
}

TEST_F(UnixSocketTest, PrepareAcceptsRootsDirectoryForAnyUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to act as another user";
  ASSERT_EQ(::chmod(directory_.c_str(), 0755), 0);
  // Root's, as /run is; a user's daemon may serve in it.
  EXPECT_TRUE(InChildAs(kSomeoneElse, [&] {
    auto prepared = PrepareSocketPath(path_);
    return prepared.has_value() && !*prepared;
  }));
  // Another user's is refused to a third as it is to root.
  const std::string theirs = directory_ + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_TRUE(InChildAs(kSomeoneElse, [&] {
    auto prepared = PrepareSocketPath(theirs + "/hurrayd.sock");
    return !prepared && prepared.error().code() == StatusCode::kFailedPrecondition &&
           prepared.error().message().find("owned by uid 65534") != std::string::npos;
  }));
}

TEST_F(UnixSocketTest, PrepareRefusesDirectoryThatGroupOrOthersMayWrite) {
  {
    UniqueFd stale = Bind(path_, /*listen=*/false);
  }
  for (const mode_t mode : {0775, 0757, 0770, 01777}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(::chmod(directory_.c_str(), mode), 0);
    EXPECT_ERROR(PrepareSocketPath(path_), StatusCode::kFailedPrecondition,
                 {"socket directory " + directory_, "with mode " + Octal(mode),
                  "writable only by its owner"});
    EXPECT_TRUE(Exists(path_));
  }
  // Search permission for the group and others, to connect, is fine.
  ASSERT_EQ(::chmod(directory_.c_str(), 0711), 0);
  ASSERT_OK_AND_ASSIGN(const bool removed, PrepareSocketPath(path_));
  EXPECT_TRUE(removed);
}

TEST_F(UnixSocketTest, PrepareRefusesALinkToADirectory) {
  const std::string real = directory_ + "/real";
  const std::string link = directory_ + "/link";
  ASSERT_EQ(::mkdir(real.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  {
    UniqueFd stale = Bind(real + "/hurrayd.sock", /*listen=*/false);
  }
  EXPECT_ERROR(PrepareSocketPath(link + "/hurrayd.sock"), StatusCode::kFailedPrecondition,
               {"socket directory " + link, "is a symbolic link", "not a directory"});
  EXPECT_TRUE(Exists(real + "/hurrayd.sock"));
}

TEST_F(UnixSocketTest, PrepareRefusesADirectoryModeThatLetsOthersWrite) {
  const std::string path = directory_ + "/run/hurrayd.sock";
  EXPECT_ERROR(PrepareSocketPath(path, 0775), StatusCode::kInvalidArgument,
               {"mode 0775", "lets group or others write"});
  EXPECT_FALSE(Exists(directory_ + "/run"));
}

TEST_F(UnixSocketTest, PrepareMakesTheDirectoryWithExactlyItsMode) {
  const std::string path = directory_ + "/run/hurrayd.sock";
  const mode_t old_umask = ::umask(0077);
  auto prepared = PrepareSocketPath(path, 0750);
  ::umask(old_umask);
  ASSERT_OK(prepared);
  struct stat info{};
  ASSERT_EQ(::lstat((directory_ + "/run").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0750u);
}

// A unix stream socket, neither bound nor listening.
UniqueFd NewSocket() { return UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)); }

mode_t ModeOf(const std::string& path) {
  struct stat info{};
  EXPECT_EQ(::lstat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

TEST_F(UnixSocketTest, BoundSocketFileHasItsModeWhateverTheUmask) {
  for (const auto& [umask, mode] :
       {std::pair<mode_t, std::uint32_t>{0, 0600}, std::pair<mode_t, std::uint32_t>{0077, 0666},
        std::pair<mode_t, std::uint32_t>{0022, 0660}}) {
    UniqueFd socket = NewSocket();
    const mode_t old_umask = ::umask(umask);
    auto bound = BoundSocketFile::Bind(socket.get(), path_, mode);
    ::umask(old_umask);
    ASSERT_OK(bound);
    EXPECT_EQ(ModeOf(path_), mode) << "umask " << umask;
    EXPECT_EQ(bound->path(), path_);
    // Bound, not listening: nobody connects until the owner listens.
    EXPECT_ERROR(ConnectUnixSocket(path_), StatusCode::kUnavailable, {"no daemon listens"});
    ASSERT_EQ(::listen(socket.get(), 4), 0);
    EXPECT_OK(ConnectUnixSocket(path_));
    EXPECT_OK(bound->Remove());
    EXPECT_FALSE(Exists(path_));
  }
}

TEST_F(UnixSocketTest, BoundSocketFileGoesWithItsOwnerAndOnlyOnce) {
  UniqueFd socket = NewSocket();
  {
    auto bound = BoundSocketFile::Bind(socket.get(), path_, 0600);
    ASSERT_OK(bound);
    BoundSocketFile moved = std::move(*bound);
    EXPECT_OK(bound->Remove());  // Moved from: nothing to remove.
    EXPECT_TRUE(Exists(path_));
  }
  EXPECT_FALSE(Exists(path_));  // The destructor removed it.
  UniqueFd again = NewSocket();
  auto bound = BoundSocketFile::Bind(again.get(), path_, 0600);
  ASSERT_OK(bound);
  EXPECT_OK(bound->Remove());
  EXPECT_FALSE(Exists(path_));
  // Again: nothing to remove, and a file made at the path since is not touched.
  UniqueFd later = Bind(path_, /*listen=*/true);
  EXPECT_OK(bound->Remove());
  EXPECT_TRUE(Exists(path_));
}

TEST_F(UnixSocketTest, BoundSocketFileLeavesAFileThatReplacedItAlone) {
  UniqueFd socket = NewSocket();
  auto bound = BoundSocketFile::Bind(socket.get(), path_, 0600);
  ASSERT_OK(bound);
  // Another daemon took the path over: its socket is there now.
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  UniqueFd other = Bind(path_, /*listen=*/true);
  EXPECT_ERROR(bound->Remove(), StatusCode::kFailedPrecondition,
               {path_, "no longer our socket file", "left in place"});
  EXPECT_OK(ConnectUnixSocket(path_));
  // A file that is simply gone is nothing to remove.
  UniqueFd third = NewSocket();
  auto gone = BoundSocketFile::Bind(third.get(), directory_ + "/gone.sock", 0600);
  ASSERT_OK(gone);
  ASSERT_EQ(::unlink((directory_ + "/gone.sock").c_str()), 0);
  EXPECT_OK(gone->Remove());
  EXPECT_FALSE(Exists(directory_ + "/gone.sock"));
}

TEST_F(UnixSocketTest, BoundSocketFileRefusesAPathTakenAndLeavesItAlone) {
  {
    UniqueFd file(::open(path_.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0640));
  }
  UniqueFd socket = NewSocket();
  EXPECT_ERROR(BoundSocketFile::Bind(socket.get(), path_, 0600), StatusCode::kAlreadyExists,
               {"bind " + path_});
  EXPECT_EQ(ModeOf(path_), 0640u);
  EXPECT_ERROR(BoundSocketFile::Bind(socket.get(), std::string(200, 'x'), 0600),
               StatusCode::kInvalidArgument, {"at most 107"});
}

}  // namespace
}  // namespace hurray
