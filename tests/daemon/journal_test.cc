// The journal's file (checksummed records, torn tail ignored, replace), its records, and
// what a journal on disk says survives.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "journal/journal_file.h"
#include "journal/journal_record.h"
#include "journal/state_directory.h"
#include "journal/tensor_journal.h"
#include "pool/range_allocator.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "journal_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  [[nodiscard]] std::string path() const { return directory_ + "/journal"; }

  std::string directory_;
};

JournalRecord Publish(std::string name, std::uint64_t number) {
  return {.kind = JournalRecord::Kind::kPublish,
          .name = std::move(name),
          .number = number,
          .publisher_uid = 1000,
          .namespace_owner_uid = 1001,
          .info_without_name = "stored-info"};
}

TEST_F(JournalTest, RecordsRoundTrip) {
  const JournalRecord segments{.kind = JournalRecord::Kind::kSegments,
                               .name = "cpu",
                               .segments = {{.path = "/dev/shm/x-00", .size = 4096}}};
  for (const JournalRecord& record :
       {Publish("ns/a", 3), segments,
        JournalRecord{.kind = JournalRecord::Kind::kRemoval, .name = "ns/a", .number = 3}}) {
    ASSERT_OK_AND_ASSIGN(const JournalRecord decoded,
                         DecodeJournalRecord(EncodeJournalRecord(record)));
    EXPECT_EQ(decoded, record);
  }
}

TEST_F(JournalTest, DecodeRejectsTruncatedRecord) {
  const std::string bytes = EncodeJournalRecord(Publish("ns/a", 1));
  auto decoded = DecodeJournalRecord(std::string_view(bytes).substr(0, 33));
  ASSERT_FALSE(decoded.has_value());
  EXPECT_EQ(decoded.error().code(), StatusCode::kDataLoss);
}

TEST_F(JournalTest, TornTailIsIgnoredAndEarlierRecordsKept) {
  ASSERT_OK_AND_ASSIGN(JournalFile file, JournalFile::Replace(path(), {"one"}));
  ASSERT_OK(file.Append("two"));
  ASSERT_OK(file.Append("three-is-torn"));
  // A crash in the middle of the last write: cut its payload short.
  ASSERT_EQ(::truncate(path().c_str(), static_cast<off_t>(file.size() - 4)), 0);
  ASSERT_OK_AND_ASSIGN(const JournalFile::Contents contents, JournalFile::Read(path()));
  EXPECT_EQ(contents.records, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(contents.ignored_bytes, 16u + 13u - 4u);
}

TEST_F(JournalTest, CorruptChecksumEndsTheReadThere) {
  ASSERT_OK_AND_ASSIGN(JournalFile file, JournalFile::Replace(path(), {"one", "two", "three"}));
  std::fstream bytes(path(), std::ios::in | std::ios::out | std::ios::binary);
  bytes.seekp(16 + 16 + 3 + 16);  // The payload of "two".
  bytes.put('X');
  bytes.close();
  ASSERT_OK_AND_ASSIGN(const JournalFile::Contents contents, JournalFile::Read(path()));
  EXPECT_EQ(contents.records, (std::vector<std::string>{"one"}));
}

TEST_F(JournalTest, NotAJournalIsDataLoss) {
  std::ofstream(path()) << "definitely not a journal";
  auto contents = JournalFile::Read(path());
  ASSERT_FALSE(contents.has_value());
  EXPECT_EQ(contents.error().code(), StatusCode::kDataLoss);
}

TEST_F(JournalTest, RecoverKeepsLatestLiveVersionOfEachName) {
  {
    ASSERT_OK_AND_ASSIGN(
        auto journal,
        TensorJournal::Create({.path = path()}, {{"cpu", {{.path = "/dev/shm/x-1", .size = 8192}}}},
                              {Publish("ns/kept", 1)}));
    TensorVersion superseding{.number = 2};
    superseding.info_without_name = "v2";
    ASSERT_OK(journal->RecordPublish("ns/kept", superseding));
    TensorVersion deleted{.number = 1};
    ASSERT_OK(journal->RecordPublish("ns/deleted", deleted));
    journal->RecordRemoval("ns/deleted", 1);
    EXPECT_EQ(journal->live_version_count(), 1u);
  }
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal recovered, RecoverJournal(path()));
  ASSERT_EQ(recovered.versions.size(), 1u);
  EXPECT_EQ(recovered.versions[0].name, "ns/kept");
  EXPECT_EQ(recovered.versions[0].number, 2u);
  EXPECT_EQ(recovered.versions[0].info_without_name, "v2");
  ASSERT_EQ(recovered.segments.at("cpu").size(), 1u);
  EXPECT_EQ(recovered.segments.at("cpu")[0].size, 8192u);
}

TEST_F(JournalTest, CompactionKeepsOnlyLiveRecords) {
  ASSERT_OK_AND_ASSIGN(
      auto journal,
      TensorJournal::Create({.path = path(), .sync = JournalSync::kNone, .compact_min_bytes = 4096},
                            {}, {}));
  for (std::uint64_t number = 1; number <= 500; ++number) {
    ASSERT_OK(journal->RecordPublish("ns/churn", TensorVersion{.number = number}));
  }
  EXPECT_LT(journal->file_bytes(), 8192u);
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal recovered, RecoverJournal(path()));
  ASSERT_EQ(recovered.versions.size(), 1u);
  EXPECT_EQ(recovered.versions[0].number, 500u);
}

TEST_F(JournalTest, MissingJournalRecoversEmpty) {
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal recovered, RecoverJournal(path()));
  EXPECT_TRUE(recovered.versions.empty());
  EXPECT_TRUE(recovered.segments.empty());
}

TEST_F(JournalTest, StateDirectoryIsHeldByOneDaemonAtATime) {
  ASSERT_OK_AND_ASSIGN(const StateDirectory held, StateDirectory::Open(directory_ + "/state"));
  auto second = StateDirectory::Open(directory_ + "/state");
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.error().message().find("in use by another hurrayd"), std::string::npos);
}

TEST(DefaultStateDirectoryTest, PrefersSystemdThenXdgThenHome) {
  EXPECT_EQ(DefaultStateDirectory({.state_directory = "/var/lib/hurray:/var/lib/other",
                                   .xdg_state_home = "/x",
                                   .home = "/h"}),
            "/var/lib/hurray");
  EXPECT_EQ(DefaultStateDirectory({.xdg_state_home = "/x", .home = "/h"}), "/x/hurray");
  EXPECT_EQ(DefaultStateDirectory({.xdg_state_home = "relative", .home = "/h"}),
            "/h/.local/state/hurray");
  EXPECT_EQ(DefaultStateDirectory({}), "/var/lib/hurray");
}

TEST(RangeAllocatorClaimTest, ClaimedRangeIsTakenAndFreedLikeAnAllocation) {
  RangeAllocator allocator(16 * 4096, 4096);
  ASSERT_TRUE(allocator.Claim(4 * 4096, 100));
  EXPECT_FALSE(allocator.Claim(4 * 4096, 100)) << "claimed twice";
  EXPECT_FALSE(allocator.Claim(4 * 4096 + 1, 100)) << "unaligned";
  EXPECT_FALSE(allocator.Claim(15 * 4096, 2 * 4096)) << "past the end";
  EXPECT_EQ(allocator.allocated_bytes(), 4096u);
  EXPECT_EQ(allocator.free_range_count(), 2u);
  EXPECT_TRUE(allocator.Free(4 * 4096, 100));
  EXPECT_EQ(allocator.free_range_count(), 1u);
  EXPECT_EQ(allocator.largest_free_range(), 16u * 4096);
}

}  // namespace
}  // namespace hurray::daemon
