// OwnedDirectory: the owner and mode check, on facts and on real directories (another
// user's, group- or other-writable, a link), and the files made and read through the held
// descriptor with links planted where they go.
#include "hurray/ipc/owned_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "testing/status_matchers.h"

namespace hurray {
namespace {

constexpr uid_t kOtherUser = 65534;

struct stat DirectoryFacts(uid_t owner, mode_t mode) {
  struct stat info{};
  info.st_uid = owner;
  info.st_mode = S_IFDIR | mode;
  return info;
}

std::string Contents(const std::string& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

TEST(CheckOwnedDirectoryTest, AcceptsItsOwnAndRootsWhenOnlyTheOwnerMayWrite) {
  for (const mode_t mode : {0700, 0750, 0755, 0711, 02750, 0500}) {
    SCOPED_TRACE(mode);
    EXPECT_OK(CheckOwnedDirectory("state directory", "/d", DirectoryFacts(1000, mode), 1000));
    EXPECT_OK(CheckOwnedDirectory("state directory", "/d", DirectoryFacts(0, mode), 1000));
  }
}

TEST(CheckOwnedDirectoryTest, RefusesAnotherUsersDirectoryEvenToRoot) {
  EXPECT_ERROR(
      CheckOwnedDirectory("state directory", "/d", DirectoryFacts(kOtherUser, 0700), 0),
      StatusCode::kFailedPrecondition,
      {"state directory /d is owned by uid 65534 with mode 0700",
       "must be owned by uid 0 (this process's user) or root", "writable only by its owner"});
  EXPECT_ERROR(
      CheckOwnedDirectory("socket directory", "/d", DirectoryFacts(kOtherUser, 0755), 1000),
      StatusCode::kFailedPrecondition, {"owned by uid 65534", "owned by uid 1000"});
}

TEST(CheckOwnedDirectoryTest, RefusesWriteForGroupOrOthersWhoeverOwnsIt) {
  for (const mode_t mode : {0770, 0720, 0707, 0777, 01777, 01770}) {
    SCOPED_TRACE(mode);
    for (const uid_t owner : {uid_t{0}, uid_t{1000}}) {
      EXPECT_ERROR(CheckOwnedDirectory("state directory", "/d", DirectoryFacts(owner, mode), 1000),
                   StatusCode::kFailedPrecondition, {"writable only by its owner"});
    }
  }
}

TEST(CheckOwnedDirectoryTest, RefusesWhatIsNoDirectory) {
  struct stat link{};
  link.st_mode = S_IFLNK | 0777;
  link.st_uid = kOtherUser;
  EXPECT_ERROR(CheckOwnedDirectory("state directory", "/d", link, 0),
               StatusCode::kFailedPrecondition,
               {"state directory /d is a symbolic link (owned by uid 65534), not a directory"});
  struct stat file{};
  file.st_mode = S_IFREG | 0600;
  EXPECT_ERROR(CheckOwnedDirectory("state directory", "/d", file, 0),
               StatusCode::kFailedPrecondition, {"is a regular file"});
}

class OwnedDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/hurray-owned-directory-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // A file holding `text` at `path`.
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }

  std::string root_;
};

TEST_F(OwnedDirectoryTest, OpensItsOwnDirectory) {
  ASSERT_OK_AND_ASSIGN(const OwnedDirectory held, OwnedDirectory::Open(root_ + "/", "test"));
  EXPECT_EQ(held.path(), root_);
  EXPECT_EQ(held.PathOf("x"), root_ + "/x");
  EXPECT_NE(::fcntl(held.fd(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST_F(OwnedDirectoryTest, RefusesADirectoryThatOthersMayWrite) {
  ASSERT_EQ(::chmod(root_.c_str(), 0777), 0);
  EXPECT_ERROR(OwnedDirectory::Open(root_, "state directory"), StatusCode::kFailedPrecondition,
               {"state directory " + root_, "with mode 0777", "writable only by its owner"});
}

TEST_F(OwnedDirectoryTest, RefusesAnotherUsersDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a directory to another user";
  const std::string theirs = root_ + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_ERROR(OwnedDirectory::Open(theirs, "state directory"), StatusCode::kFailedPrecondition,
               {"state directory " + theirs, "owned by uid 65534 with mode 0700"});
  EXPECT_ERROR(OwnedDirectory::Create(theirs, 0700, "state directory"),
               StatusCode::kFailedPrecondition, {"owned by uid 65534"});
}

TEST_F(OwnedDirectoryTest, RefusesALinkToADirectory) {
  const std::string real = root_ + "/real";
  const std::string link = root_ + "/link";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  EXPECT_ERROR(OwnedDirectory::Open(link, "state directory"), StatusCode::kFailedPrecondition,
               {"state directory " + link + " is a symbolic link", "not a directory"});
  // With a trailing slash as well, which would make open(2) follow it.
  EXPECT_ERROR(OwnedDirectory::Open(link + "/", "state directory"), StatusCode::kFailedPrecondition,
               {"is a symbolic link"});
  EXPECT_ERROR(OwnedDirectory::Create(link, 0700, "state directory"),
               StatusCode::kFailedPrecondition, {"is a symbolic link"});
}

TEST_F(OwnedDirectoryTest, MissingDirectoryIsNotFound) {
  EXPECT_ERROR(OwnedDirectory::Open(root_ + "/missing", "state directory"), StatusCode::kNotFound,
               {root_ + "/missing"});
}

TEST_F(OwnedDirectoryTest, CreateMakesTheDirectoryWithExactlyItsMode) {
  const mode_t old_umask = ::umask(0077);
  auto made = OwnedDirectory::Create(root_ + "/made", 0755, "socket directory");
  ::umask(old_umask);
  ASSERT_OK(made);
  struct stat info{};
  ASSERT_EQ(::lstat((root_ + "/made").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0755u);
  // An existing one keeps its mode.
  ASSERT_EQ(::chmod((root_ + "/made").c_str(), 0700), 0);
  ASSERT_OK(OwnedDirectory::Create(root_ + "/made", 0755, "socket directory"));
  ASSERT_EQ(::lstat((root_ + "/made").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u);
}

TEST_F(OwnedDirectoryTest, CreateRefusesAModeThatLetsOthersWrite) {
  EXPECT_ERROR(OwnedDirectory::Create(root_ + "/made", 0775, "socket directory"),
               StatusCode::kInvalidArgument,
               {"socket directory " + root_ + "/made", "mode 0775", "lets group or others write"});
  EXPECT_FALSE(std::filesystem::exists(root_ + "/made"));
}

TEST_F(OwnedDirectoryTest, OpenFileNeverFollowsALink) {
  ASSERT_OK_AND_ASSIGN(const OwnedDirectory held, OwnedDirectory::Open(root_, "test"));
  const std::string victim = root_ + "/victim";
  Write(victim, "keep me");
  ASSERT_EQ(::symlink(victim.c_str(), (root_ + "/lock").c_str()), 0);
  EXPECT_ERROR(held.OpenFile("lock", O_RDWR | O_CREAT | O_TRUNC), StatusCode::kInternal,
               {"openat(O_NOFOLLOW) " + root_ + "/lock"});
  EXPECT_EQ(Contents(victim), "keep me");
}

TEST_F(OwnedDirectoryTest, NamesAreOneComponent) {
  ASSERT_OK_AND_ASSIGN(const OwnedDirectory held, OwnedDirectory::Open(root_, "test"));
  for (const char* name : {"", ".", "..", "a/b", "../x"}) {
    SCOPED_TRACE(name);
    EXPECT_ERROR(held.OpenFile(name, O_RDONLY), StatusCode::kInvalidArgument,
                 {"is not the name of a file in"});
    EXPECT_ERROR(held.RemoveFile(name), StatusCode::kInvalidArgument, {"is not the name"});
  }
}

TEST_F(OwnedDirectoryTest, ReplaceFileWritesAndReadFileReadsBack) {
  ASSERT_OK_AND_ASSIGN(const OwnedDirectory held, OwnedDirectory::Open(root_, "test"));
  ASSERT_OK(held.ReplaceFile("record", "first"));
  ASSERT_OK(held.ReplaceFile("record", "second"));
  ASSERT_OK_AND_ASSIGN(const std::optional<std::string> text, held.ReadFile("record", 4096));
  EXPECT_EQ(text, std::optional<std::string>("second"));
  ASSERT_OK_AND_ASSIGN(const std::optional<std::string> cut, held.ReadFile("record", 3));
  EXPECT_EQ(cut, std::optional<std::string>("sec"));
  struct stat info{};
  ASSERT_EQ(::lstat((root_ + "/record").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/record.new"));
  ASSERT_OK(held.RemoveFile("record"));
  ASSERT_OK(held.RemoveFile("record"));  // Gone already is fine.
  ASSERT_OK_AND_ASSIGN(const std::optional<std::string> none, held.ReadFile("record", 4096));
  EXPECT_FALSE(none.has_value());
}

TEST_F(OwnedDirectoryTest, ReplaceFileRefusesALinkPlantedAsItsTemporaryFile) {
  ASSERT_OK_AND_ASSIGN(const OwnedDirectory held, OwnedDirectory::Open(root_, "test"));
  const std::string victim = root_ + "/victim";
  Write(victim, "keep me");
  ASSERT_EQ(::symlink(victim.c_str(), (root_ + "/record.new").c_str()), 0);
  EXPECT_ERROR(held.ReplaceFile("record", "/dev/shm/x"), StatusCode::kFailedPrecondition,
               {root_ + "/record.new is a symbolic link", "left alone"});
  EXPECT_EQ(Contents(victim), "keep me");
  EXPECT_FALSE(std::filesystem::exists(root_ + "/record"));
  EXPECT_TRUE(std::filesystem::is_symlink(root_ + "/record.new"));
}

TEST_F(OwnedDirectoryTest, ReplaceFileRemovesAStaleTemporaryFile) {
  ASSERT_OK_AND_ASSIGN(const OwnedDirectory held, OwnedDirectory::Open(root_, "test"));
  Write(root_ + "/record.new", "left by a process that died");
  ASSERT_OK(held.ReplaceFile("record", "new"));
  EXPECT_EQ(Contents(root_ + "/record"), "new");
}

TEST_F(OwnedDirectoryTest, ReplaceFileReplacesALinkInsteadOfFollowingIt) {
  ASSERT_OK_AND_ASSIGN(const OwnedDirectory held, OwnedDirectory::Open(root_, "test"));
  const std::string victim = root_ + "/victim";
  Write(victim, "keep me");
  ASSERT_EQ(::symlink(victim.c_str(), (root_ + "/record").c_str()), 0);
  ASSERT_OK(held.ReplaceFile("record", "new"));
  EXPECT_EQ(Contents(victim), "keep me");
  EXPECT_FALSE(std::filesystem::is_symlink(root_ + "/record"));
  EXPECT_EQ(Contents(root_ + "/record"), "new");
}

TEST_F(OwnedDirectoryTest, ReadFileRefusesALinkOrAFifo) {
  ASSERT_OK_AND_ASSIGN(const OwnedDirectory held, OwnedDirectory::Open(root_, "test"));
  Write(root_ + "/victim", "secret");
  ASSERT_EQ(::symlink((root_ + "/victim").c_str(), (root_ + "/link").c_str()), 0);
  EXPECT_ERROR(held.ReadFile("link", 4096), StatusCode::kFailedPrecondition,
               {root_ + "/link is a symbolic link"});
  ASSERT_EQ(::mkfifo((root_ + "/fifo").c_str(), 0600), 0);
  EXPECT_ERROR(held.ReadFile("fifo", 4096), StatusCode::kFailedPrecondition,
               {root_ + "/fifo is a FIFO"});
}

}  // namespace
}  // namespace hurray
