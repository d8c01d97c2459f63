// EpochHolds: an earlier daemon's hold counts as held for exactly as long as a descriptor of
// its open file description lives somewhere, whatever became of the daemon that made it.
#include "journal/epoch_holds.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "journal/state_directory.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

class EpochHoldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "epoch_holds_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    ASSERT_OK_AND_ASSIGN(state_, StateDirectory::Open(directory_ + "/state"));
  }
  void TearDown() override {
    state_.reset();
    std::filesystem::remove_all(directory_);
  }

  [[nodiscard]] bool HoldFileExists(std::uint64_t epoch) const {
    struct stat info{};
    return ::lstat(state_->directory().PathOf("clients-" + std::to_string(epoch)).c_str(), &info) ==
           0;
  }
  // A client's copy of `holds`' hold, as a welcome carries it.
  static UniqueFd ClientCopy(const EpochHolds& holds) {
    return UniqueFd(::fcntl(holds.hold()->get(), F_DUPFD_CLOEXEC, 0));
  }

  std::string directory_;
  std::optional<StateDirectory> state_;
};

TEST_F(EpochHoldsTest, AnEarlierHoldCountsUntilItsLastClientCloses) {
  UniqueFd first_client;
  UniqueFd second_client;
  {
    ASSERT_OK_AND_ASSIGN(const EpochHolds first, EpochHolds::Open(state_->directory(), 1));
    EXPECT_FALSE(first.earlier_held());
    first_client = ClientCopy(first);
    second_client = ClientCopy(first);
    ASSERT_TRUE(first_client && second_client);
  }  // The daemon's own descriptor goes, as when it is killed.
  ASSERT_OK_AND_ASSIGN(EpochHolds next, EpochHolds::Open(state_->directory(), 2));
  EXPECT_TRUE(next.earlier_held());
  first_client.Reset();
  EXPECT_TRUE(next.Recheck()) << "a second client still holds it";
  EXPECT_TRUE(HoldFileExists(1));
  second_client.Reset();
  EXPECT_FALSE(next.Recheck());
  EXPECT_FALSE(HoldFileExists(1));
  EXPECT_TRUE(HoldFileExists(2));
}

TEST_F(EpochHoldsTest, AnEarlierDaemonWithoutClientsIsGoneAtOnce) {
  {
    ASSERT_OK_AND_ASSIGN(const EpochHolds first, EpochHolds::Open(state_->directory(), 1));
  }
  ASSERT_OK_AND_ASSIGN(const EpochHolds next, EpochHolds::Open(state_->directory(), 2));
  EXPECT_FALSE(next.earlier_held());
  EXPECT_FALSE(HoldFileExists(1));
}

TEST_F(EpochHoldsTest, AnyOtherOpenDescriptionCountsAsHeld) {
  {
    ASSERT_OK_AND_ASSIGN(const EpochHolds first, EpochHolds::Open(state_->directory(), 1));
  }
  // Only the daemon's user can open the file anew; whoever has it open, the answer errs on
  // the side of keeping the memory.
  ASSERT_OK_AND_ASSIGN(UniqueFd reopened, state_->directory().OpenFile("clients-1", O_RDONLY));
  ASSERT_OK_AND_ASSIGN(EpochHolds next, EpochHolds::Open(state_->directory(), 2));
  EXPECT_TRUE(next.earlier_held());
  reopened.Reset();
  EXPECT_FALSE(next.Recheck());
}

TEST_F(EpochHoldsTest, EveryEarlierDaemonIsWaitedFor) {
  UniqueFd client_of_first;
  UniqueFd client_of_second;
  {
    ASSERT_OK_AND_ASSIGN(const EpochHolds first, EpochHolds::Open(state_->directory(), 1));
    client_of_first = ClientCopy(first);
  }
  {
    ASSERT_OK_AND_ASSIGN(const EpochHolds second, EpochHolds::Open(state_->directory(), 2));
    EXPECT_TRUE(second.earlier_held());
    client_of_second = ClientCopy(second);
  }
  ASSERT_OK_AND_ASSIGN(EpochHolds third, EpochHolds::Open(state_->directory(), 3));
  client_of_first.Reset();
  EXPECT_TRUE(third.Recheck());
  client_of_second.Reset();
  EXPECT_FALSE(third.Recheck());
}

}  // namespace
}  // namespace hurray::daemon
