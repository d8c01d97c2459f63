// The daemon trusts only paths it owns: the state directory's owner and mode (another
// user's, group- or other-writable, a link, a planted lock link), and the segment files a
// planted journal names, which a restart and --discard-state remove only within the pool's
// own place (SegmentPlace).
#include "journal/state_directory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hurray/v1/exchange.pb.h"
#include "journal/cpu_pool_restart.h"
#include "journal/tensor_journal.h"
#include "pool/segment_place.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr uid_t kOtherUser = 65534;

std::string Contents(const std::string& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

bool Exists(const std::string& path) {
  struct stat info{};
  return ::lstat(path.c_str(), &info) == 0;
}

class StateDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/hurray-state-directory-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    state_ = root_ + "/state";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string root_;
  std::string state_;
};

TEST_F(StateDirectoryTest, MakesAMissingDirectoryWithMode0700) {
  const mode_t old_umask = ::umask(0);
  auto opened = StateDirectory::Open(state_ + "/deeper");
  ::umask(old_umask);
  ASSERT_OK(opened);
  struct stat info{};
  ASSERT_EQ(::lstat((state_ + "/deeper").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u);
  EXPECT_EQ(opened->JournalPath(), state_ + "/deeper/journal");
}

TEST_F(StateDirectoryTest, RefusesADirectoryOfAnotherUserEvenAsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give the directory to another user";
  ASSERT_EQ(::mkdir(state_.c_str(), 0700), 0);
  ASSERT_EQ(::chown(state_.c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_ERROR(StateDirectory::Open(state_), StatusCode::kFailedPrecondition,
               {"state directory " + state_, "owned by uid 65534 with mode 0700",
                "owned by uid 0 (this process's user) or root"});
  EXPECT_FALSE(Exists(state_ + "/lock"));  // Nothing was made in it.
}

TEST_F(StateDirectoryTest, RefusesADirectoryThatGroupOrOthersMayWrite) {
  ASSERT_EQ(::mkdir(state_.c_str(), 0700), 0);
  for (const mode_t mode : {0770, 0707, 0777, 01777}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(::chmod(state_.c_str(), mode), 0);
    EXPECT_ERROR(StateDirectory::Open(state_), StatusCode::kFailedPrecondition,
                 {"state directory " + state_, "writable only by its owner"});
  }
  EXPECT_FALSE(Exists(state_ + "/lock"));
  ASSERT_EQ(::chmod(state_.c_str(), 0755), 0);
  EXPECT_OK(StateDirectory::Open(state_));
}

TEST_F(StateDirectoryTest, RefusesALinkToADirectory) {
  const std::string real = root_ + "/real";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(real.c_str(), state_.c_str()), 0);
  EXPECT_ERROR(StateDirectory::Open(state_), StatusCode::kFailedPrecondition,
               {"state directory " + state_ + " is a symbolic link", "not a directory"});
  EXPECT_FALSE(Exists(real + "/lock"));
}

TEST_F(StateDirectoryTest, NeverFollowsALinkPlantedAsItsLock) {
  ASSERT_EQ(::mkdir(state_.c_str(), 0700), 0);
  const std::string victim = root_ + "/victim";
  std::ofstream(victim) << "keep me";
  ASSERT_EQ(::symlink(victim.c_str(), (state_ + "/lock").c_str()), 0);
  EXPECT_ERROR(StateDirectory::Open(state_), StatusCode::kInternal, {state_ + "/lock"});
  EXPECT_EQ(Contents(victim), "keep me");
}

TEST(SegmentPlaceTest, AcceptsOnlyThePoolsOwnNames) {
  const SegmentPlace place{.shm_prefix = "hurray-a"};
  EXPECT_OK(place.Check("/dev/shm/hurray-a-0123456789abcdef0123456789abcdef"));
  EXPECT_OK(place.Check("/dev/shm/hurray-a-0"));
  for (const std::string& path : std::vector<std::string>{
           "/dev/shm/hurray-a-",                         // No random part.
           "/dev/shm/hurray-a",                          // No dash.
           "/dev/shm/hurray-b-0123",                     // Another prefix.
           "/dev/shm/hurray-a-test-0123",                // Another daemon's prefix "hurray-a-test".
           "/dev/shm/hurray-a-0123/x",                   // Below the directory.
           "/dev/shm/hurray-a-../../etc/passwd",         // Out of it.
           "/dev/shm/../shm/hurray-a-0123",              // Not directly under it.
           "/dev/shmx/hurray-a-0123",                    // Another directory.
           "/tmp/hurray-a-0123",                         // Another directory.
           "/dev/hugepages/hurray-a-0123",               // No hugetlbfs directory in this pool.
           "/dev/shm/hurray-a-0123ABCD",                 // Not as ShmSegment writes them.
           "/dev/shm/hurray-a-" + std::string(65, '0'),  // Longer than any.
           "relative/hurray-a-0123",
           "",
       }) {
    SCOPED_TRACE(path);
    EXPECT_ERROR(place.Check(path), StatusCode::kFailedPrecondition,
                 {"is not a segment file of this daemon", "/dev/shm/hurray-a-<hex>"});
  }
}

TEST(SegmentPlaceTest, AcceptsThePoolsHugetlbfsDirectory) {
  const SegmentPlace place{.shm_prefix = "p", .hugetlbfs_directory = "/dev/hugepages/"};
  EXPECT_OK(place.Check("/dev/hugepages/p-00ff"));
  EXPECT_OK(place.Check("/dev/shm/p-00ff"));
  EXPECT_ERROR(place.Check("/mnt/huge/p-00ff"), StatusCode::kFailedPrecondition,
               {"or /dev/hugepages/"});
}

TEST(SegmentPlaceTest, NamesALongOrBinaryPathByABoundedExcerpt) {
  const SegmentPlace place{.shm_prefix = "p"};
  const std::string path = "/etc/\x1b[2J" + std::string(100000, 'x');
  auto checked = place.Check(path);
  ASSERT_FALSE(checked);
  EXPECT_LT(checked.error().message().size(), 400u);
  EXPECT_NE(checked.error().message().find("/etc/\\x1b[2J"), std::string::npos);
  EXPECT_NE(checked.error().message().find("(" + std::to_string(path.size()) + " bytes)"),
            std::string::npos);
}

// A journal planted in a state directory of ours (as by an earlier daemon of another
// configuration, or a file copied in): it names files that are not this pool's segments.
class PlantedJournalTest : public StateDirectoryTest {
 protected:
  void SetUp() override {
    StateDirectoryTest::SetUp();
    prefix_ = "hurray-planted-" + std::to_string(::getpid());
    ASSERT_OK_AND_ASSIGN(StateDirectory state, StateDirectory::Open(state_));
    state_directory_.emplace(std::move(state));
    victims_ = {root_ + "/victim",  // Outside /dev/shm.
                "/dev/shm/hurray-other-" + std::to_string(::getpid()) + "-0123abcd",  // Prefix.
                "/dev/shm/" + prefix_ + "-0123abcd/../" + prefix_ + "-x"};
    for (const std::string& victim : {victims_[0], victims_[1]}) {
      std::ofstream(victim) << "keep me";
    }
    own_ = "/dev/shm/" + prefix_ + "-00aa";
    std::ofstream(own_) << "a segment of this pool";
  }
  void TearDown() override {
    for (const std::string& file : {victims_[1], own_, theirs_}) std::filesystem::remove(file);
    StateDirectoryTest::TearDown();
  }

  // Writes the journal naming `paths` as the segments of pool "cpu" (of 1 MiB each), with a
  // live version in that pool when `with_version`.
  void PlantJournal(const std::vector<std::string>& paths, bool with_version = false) {
    std::vector<JournaledSegment> segments;
    segments.reserve(paths.size());
    for (const std::string& path : paths) segments.push_back({.path = path, .size = 1 << 20});
    std::vector<JournalRecord> versions;
    if (with_version) {
      v1::TensorInfo info;
      info.set_pool("cpu");
      versions.push_back({.kind = JournalRecord::Kind::kPublish,
                          .name = "planted/t",
                          .number = 1,
                          .info_without_name = info.SerializeAsString()});
    }
    ASSERT_OK_AND_ASSIGN(auto journal,
                         TensorJournal::Create({.path = state_directory_->JournalPath()},
                                               {{"cpu", segments}}, versions));
  }

  [[nodiscard]] CpuPool::Options PoolOptions() const {
    return {.name = "cpu",
            .capacity_bytes = 1 << 20,
            .shm_prefix = prefix_,
            .reserve_at_create_bytes = 0};
  }

  void ExpectVictimsUntouched() {
    EXPECT_EQ(Contents(victims_[0]), "keep me");
    EXPECT_EQ(Contents(victims_[1]), "keep me");
  }

  std::string prefix_;
  std::optional<StateDirectory> state_directory_;
  std::vector<std::string> victims_;
  std::string own_;
  std::string theirs_ = "/dev/shm/hurray-planted-theirs-" + std::to_string(::getpid());
};

TEST_F(PlantedJournalTest, DiscardStateRemovesOnlyThePoolsOwnSegments) {
  std::vector<std::string> named = victims_;
  named.push_back(own_);
  PlantJournal(named);
  ASSERT_OK_AND_ASSIGN(const std::size_t removed,
                       DiscardState(*state_directory_, {.shm_prefix = prefix_}));
  EXPECT_EQ(removed, 1u);
  EXPECT_FALSE(Exists(own_));
  ExpectVictimsUntouched();
  EXPECT_FALSE(Exists(state_directory_->JournalPath()));
}

TEST_F(PlantedJournalTest, DiscardStateLeavesAFileOfAnotherUserUnderThePrefix) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give the file to another user";
  theirs_ = "/dev/shm/" + prefix_ + "-00bb";
  std::ofstream(theirs_) << "another user's";
  ASSERT_EQ(::chown(theirs_.c_str(), kOtherUser, kOtherUser), 0);
  PlantJournal({theirs_});
  ASSERT_OK_AND_ASSIGN(const std::size_t removed,
                       DiscardState(*state_directory_, {.shm_prefix = prefix_}));
  EXPECT_EQ(removed, 0u);
  EXPECT_EQ(Contents(theirs_), "another user's");
}

TEST_F(PlantedJournalTest, RestartLeavesWhatIsNotThePoolsOwn) {
  std::vector<std::string> named = victims_;
  named.push_back(own_);
  PlantJournal(named);
  ASSERT_OK_AND_ASSIGN(RestartedCpuPool restarted,
                       RestartCpuPool(*state_directory_, JournalSync::kNone, PoolOptions()));
  EXPECT_FALSE(restarted.adopted);
  EXPECT_FALSE(Exists(own_));
  ExpectVictimsUntouched();
}

TEST_F(PlantedJournalTest, RestartAdoptsNoFileOutsideThePool) {
  // A file of this user, of the segment's size and mode, in /dev/shm: adopting it would make
  // its bytes pool memory, and the pool would unlink it one day.
  std::filesystem::remove(victims_[1]);
  {
    const int fd = ::open(victims_[1].c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 1 << 20), 0);
    ASSERT_EQ(::pwrite(fd, "keep me", 7, 0), 7);
    ::close(fd);
  }
  PlantJournal({victims_[1]}, /*with_version=*/true);
  ASSERT_OK_AND_ASSIGN(RestartedCpuPool restarted,
                       RestartCpuPool(*state_directory_, JournalSync::kNone, PoolOptions()));
  EXPECT_FALSE(restarted.adopted);
  EXPECT_EQ(Contents(victims_[1]).substr(0, 7), "keep me");
  EXPECT_EQ(std::filesystem::file_size(victims_[1]), 1u << 20);
}

// A restart adopts the segments at the sizes the daemon before made them, whatever today's
// configuration (or today's free /dev/shm, which those segments take) computes.
TEST_F(PlantedJournalTest, RestartAdoptsTheSegmentsAtTheirJournaledSizesWhateverTheCapacity) {
  CpuPool::Options before = PoolOptions();
  before.capacity_bytes = 3 << 20;
  before.segment_bytes = 2 << 20;
  {
    ASSERT_OK_AND_ASSIGN(RestartedCpuPool first,
                         RestartCpuPool(*state_directory_, JournalSync::kNone, before));
    ASSERT_FALSE(first.adopted);
    EXPECT_EQ(first.pool->Usage().capacity_bytes, 3u << 20);
    v1::TensorInfo info;
    info.set_pool("cpu");
    ASSERT_OK(first.journal->RecordPublish({.kind = JournalRecord::Kind::kPublish,
                                            .name = "kept/t",
                                            .number = 1,
                                            .info_without_name = info.SerializeAsString()}));
    first.pool->KeepSegments();  // As a killed daemon leaves them.
  }
  ASSERT_OK_AND_ASSIGN(RestartedCpuPool restarted,
                       RestartCpuPool(*state_directory_, JournalSync::kNone, PoolOptions()));
  EXPECT_TRUE(restarted.adopted);
  EXPECT_EQ(restarted.pool->Usage().capacity_bytes, 3u << 20);  // Not PoolOptions()'s 1 MiB.
  EXPECT_EQ(restarted.pool->segment_count(), 2u);
  ASSERT_EQ(restarted.versions.size(), 1u);
  EXPECT_EQ(restarted.versions[0].name, "kept/t");
}

}  // namespace
}  // namespace hurray::daemon
