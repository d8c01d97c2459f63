// The journal's file (checksummed records, torn tail ignored, damage before it refused,
// replace), its records, and what a journal on disk says survives.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hurray/descriptor_codec.h"
#include "journal/journal_file.h"
#include "journal/journal_record.h"
#include "journal/state_directory.h"
#include "journal/tensor_journal.h"
#include "pool/cpu_pool.h"
#include "pool/range_allocator.h"
#include "registry/registry.h"
#include "registry/version_journal.h"
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
        JournalRecord{.kind = JournalRecord::Kind::kRemoval, .name = "ns/a", .number = 3},
        JournalRecord{.kind = JournalRecord::Kind::kRetained,
                      .name = "ns/a",
                      .number = 2,
                      .publisher_uid = 7,
                      .info_without_name = "v2"},
        JournalRecord{.kind = JournalRecord::Kind::kFreed, .name = "ns/a", .number = 2}}) {
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

// The bytes of a journal of "one", "two" and "three": the header (16 bytes), then each
// record's 16-byte frame and payload, at offsets 16, 35 and 54; 75 bytes in all.
constexpr std::size_t kSecondRecord = 16 + 16 + 3;
constexpr std::size_t kThirdRecord = kSecondRecord + 16 + 3;

std::string ThreeRecordJournal(const std::string& path) {
  EXPECT_OK(JournalFile::Replace(path, {"one", "two", "three"}));
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_F(JournalTest, DamagedMiddleRecordIsDataLossNamingItsOffset) {
  std::string bytes = ThreeRecordJournal(path());
  ASSERT_EQ(bytes.size(), kThirdRecord + 16 + 5);
  bytes[kSecondRecord + 16 + 1] ^= 0x01;  // The payload of "two".
  WriteBytes(path(), bytes);
  EXPECT_ERROR(JournalFile::Read(path()), StatusCode::kDataLoss,
               {path(), "record 1 (counted from 0) at offset 35 is damaged (checksum mismatch)",
                "a whole record follows it at offset 54", "not a torn last write"});
}

TEST_F(JournalTest, DamagedLengthOfAMiddleRecordIsDataLoss) {
  const std::string intact = ThreeRecordJournal(path());
  // Shorter (the next record seems to start inside "two"), longer (it seems to swallow
  // "three"), and past the end of the file.
  for (const char length : {'\x02', '\x09', '\x70'}) {
    std::string bytes = intact;
    bytes[kSecondRecord] = length;
    EXPECT_ERROR(
        JournalFile::Parse(bytes, "j"), StatusCode::kDataLoss,
        {"record 1 (counted from 0) at offset 35", "a whole record follows it at offset 54"})
        << "length " << int{length};
  }
}

TEST_F(JournalTest, EveryFlippedBitBeforeTheLastRecordIsDataLoss) {
  const std::string intact = ThreeRecordJournal(path());
  for (std::size_t offset = 16; offset < kThirdRecord; ++offset) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bytes = intact;
      bytes[offset] = static_cast<char>(bytes[offset] ^ (1 << bit));
      auto contents = JournalFile::Parse(bytes, "j");
      ASSERT_FALSE(contents.has_value()) << "offset " << offset << " bit " << bit << ": read "
                                         << contents->records.size() << " records";
      EXPECT_EQ(contents.error().code(), StatusCode::kDataLoss);
      EXPECT_NE(contents.error().message().find(offset < kSecondRecord ? "at offset 16 "
                                                                       : "at offset 35 "),
                std::string::npos)
          << contents.error().message();
    }
  }
}

TEST_F(JournalTest, EveryFlippedBitOfTheLastRecordDropsItAsATornTail) {
  const std::string intact = ThreeRecordJournal(path());
  for (std::size_t offset = kThirdRecord; offset < intact.size(); ++offset) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bytes = intact;
      bytes[offset] = static_cast<char>(bytes[offset] ^ (1 << bit));
      ASSERT_OK_AND_ASSIGN(const JournalFile::Contents contents, JournalFile::Parse(bytes, "j"));
      EXPECT_EQ(contents.records, (std::vector<std::string>{"one", "two"}))
          << "offset " << offset << " bit " << bit;
      EXPECT_EQ(contents.valid_bytes, kThirdRecord);
      EXPECT_EQ(contents.ignored_bytes, 16u + 5u);
    }
  }
}

TEST_F(JournalTest, EveryTruncationKeepsTheWholeRecordsBeforeIt) {
  const std::string intact = ThreeRecordJournal(path());
  for (std::size_t size = 16; size <= intact.size(); ++size) {
    ASSERT_OK_AND_ASSIGN(const JournalFile::Contents contents,
                         JournalFile::Parse(std::string_view(intact).substr(0, size), "j"));
    const std::size_t whole = size == intact.size()   ? 3
                              : size >= kThirdRecord  ? 2
                              : size >= kSecondRecord ? 1
                                                      : 0;
    EXPECT_EQ(contents.records.size(), whole) << "size " << size;
    EXPECT_EQ(contents.valid_bytes + contents.ignored_bytes, size);
  }
}

TEST_F(JournalTest, SkipReadsOnAfterTheDamage) {
  std::string bytes = ThreeRecordJournal(path());
  bytes[kSecondRecord] = '\x09';  // The length of "two", so that the next is searched for.
  ASSERT_OK_AND_ASSIGN(const JournalFile::Contents contents,
                       JournalFile::Parse(bytes, "j", JournalFile::Damage::kSkip));
  EXPECT_EQ(contents.records, (std::vector<std::string>{"one", "three"}));
  EXPECT_EQ(contents.ignored_bytes, 16u + 3u);
  // A header that is not a journal's is damage too.
  bytes[0] = 'X';
  ASSERT_OK_AND_ASSIGN(const JournalFile::Contents headless,
                       JournalFile::Parse(bytes, "j", JournalFile::Damage::kSkip));
  EXPECT_EQ(headless.records, (std::vector<std::string>{"one", "three"}));
  ASSERT_OK_AND_ASSIGN(const JournalFile::Contents tiny,
                       JournalFile::Parse("HRRY", "j", JournalFile::Damage::kSkip));
  EXPECT_TRUE(tiny.records.empty());
}

TEST_F(JournalTest, RecoverRefusesADamagedJournalNamingTheWayOut) {
  {
    ASSERT_OK_AND_ASSIGN(
        auto journal,
        TensorJournal::Create({.path = path()}, {{"cpu", {{.path = "/dev/shm/x-1", .size = 8192}}}},
                              {Publish("ns/a", 1)}));
    ASSERT_OK(journal->RecordPublish(Publish("ns/a", 2)));
    ASSERT_OK(journal->RecordPublish(Publish("ns/b", 1)));
  }
  std::ifstream file(path(), std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  file.close();
  // The records: segments, ns/a 1 (the snapshot), ns/a 2, ns/b 1. Damage ns/a 2's payload.
  ASSERT_OK_AND_ASSIGN(const JournalFile::Contents contents, JournalFile::Parse(bytes, "j"));
  ASSERT_EQ(contents.records.size(), 4u);
  const std::size_t third = 16 + 16 + contents.records[0].size() + 16 + contents.records[1].size();
  bytes[third + 16 + 33] ^= 0x20;  // In the name (after the 32-byte record header).
  WriteBytes(path(), bytes);
  EXPECT_ERROR(RecoverJournal(path()), StatusCode::kDataLoss,
               {"record 2 (counted from 0) at offset " + std::to_string(third) + " is damaged",
                "run hurrayd --discard-state"});
  // Discarding reads what it can: the segments to remove.
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal salvaged,
                       RecoverJournal(path(), JournalFile::Damage::kSkip));
  ASSERT_EQ(salvaged.segments.at("cpu").size(), 1u);
  EXPECT_EQ(salvaged.segments.at("cpu")[0].path, "/dev/shm/x-1");
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
    JournalRecord superseding = Publish("ns/kept", 2);
    superseding.info_without_name = "v2";
    ASSERT_OK(journal->RecordPublish(superseding));
    ASSERT_OK(journal->RecordPublish(Publish("ns/deleted", 1)));
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

// A superseded or deleted version counts as keeping its memory until the journal records it
// freed (a kill before that errs on the side of keeping it), through compactions and into the
// snapshot of the daemon after.
TEST_F(JournalTest, RetiredVersionsAreRecoveredAsRetainedUntilFreed) {
  {
    ASSERT_OK_AND_ASSIGN(
        auto journal,
        TensorJournal::Create(
            {.path = path(), .sync = JournalSync::kNone, .compact_min_bytes = 4096}, {}, {}));
    JournalRecord held = Publish("ns/held", 1);
    held.info_without_name = "v1";
    ASSERT_OK(journal->RecordPublish(held));
    ASSERT_OK(journal->RecordPublish(Publish("ns/held", 2)));
    ASSERT_OK(journal->RecordPublish(Publish("ns/deleted", 1)));
    journal->RecordRemoval("ns/deleted", 1);
    journal->RecordFreed("ns/deleted", 1);
    journal->RecordFreed("ns/held", 2);     // Live: nothing to record.
    journal->RecordFreed("ns/unknown", 1);  // Never journaled: nothing to record.
    ASSERT_OK(journal->RecordPublish(Publish("ns/churn", 1)));
    for (std::uint64_t number = 2; number <= 300; ++number) {  // Compacts.
      ASSERT_OK(journal->RecordPublish(Publish("ns/churn", number)));
      journal->RecordFreed("ns/churn", number - 1);
    }
    EXPECT_EQ(journal->retained_version_count(), 1u);
    EXPECT_LT(journal->file_bytes(), 8192u);
  }
  ASSERT_OK_AND_ASSIGN(RecoveredJournal recovered, RecoverJournal(path()));
  ASSERT_EQ(recovered.retained.size(), 1u);
  EXPECT_EQ(recovered.retained[0].kind, JournalRecord::Kind::kRetained);
  EXPECT_EQ(recovered.retained[0].name, "ns/held");
  EXPECT_EQ(recovered.retained[0].number, 1u);
  EXPECT_EQ(recovered.retained[0].publisher_uid, 1000u);
  EXPECT_EQ(recovered.retained[0].info_without_name, "v1");
  EXPECT_EQ(recovered.versions.size(), 2u);  // ns/held v2, ns/churn v300.

  // The next daemon's journal starts with it, and frees it.
  ASSERT_OK_AND_ASSIGN(auto next, TensorJournal::Create({.path = path()}, {}, recovered.versions,
                                                        recovered.retained));
  EXPECT_EQ(next->retained_version_count(), 1u);
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal snapshot, RecoverJournal(path()));
  EXPECT_EQ(snapshot.retained, recovered.retained);
  next->RecordFreed("ns/held", 1);
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal after, RecoverJournal(path()));
  EXPECT_TRUE(after.retained.empty());
  EXPECT_EQ(after.versions.size(), 2u);
}

// A restart keeps only what the registry adopted: the rest is free memory in the new daemon,
// and neither a later record nor a later restart may name it.
TEST_F(JournalTest, KeepOnlyForgetsWhatARestartDidNotAdopt) {
  {
    ASSERT_OK_AND_ASSIGN(auto journal, TensorJournal::Create({.path = path()}, {}, {}));
    ASSERT_OK(journal->RecordPublish(Publish("ns/kept", 1)));
    ASSERT_OK(journal->RecordPublish(Publish("ns/kept", 2)));  // v1 retained.
    ASSERT_OK(journal->RecordPublish(Publish("ns/lost", 1)));
    ASSERT_OK(journal->RecordPublish(Publish("ns/old", 1)));
    journal->RecordRemoval("ns/old", 1);  // Retained.
  }
  ASSERT_OK_AND_ASSIGN(RecoveredJournal recovered, RecoverJournal(path()));
  ASSERT_EQ(recovered.versions.size(), 2u);
  ASSERT_EQ(recovered.retained.size(), 2u);
  ASSERT_OK_AND_ASSIGN(auto next, TensorJournal::Create({.path = path()}, {}, recovered.versions,
                                                        recovered.retained));
  // Everything adopted: nothing to forget.
  ASSERT_OK(next->KeepOnly(recovered.versions, recovered.retained));
  EXPECT_EQ(next->live_version_count(), 2u);
  EXPECT_EQ(next->retained_version_count(), 2u);
  // Adopted: ns/kept v2 (served) and ns/kept v1 (held); ns/lost and ns/old v1 were not.
  std::vector<JournalRecord> adopted;
  std::vector<JournalRecord> held;
  for (const JournalRecord& record : recovered.versions) {
    if (record.name == "ns/kept") adopted.push_back(record);
  }
  for (const JournalRecord& record : recovered.retained) {
    if (record.name == "ns/kept") held.push_back(record);
  }
  ASSERT_OK(next->KeepOnly(adopted, held));
  EXPECT_EQ(next->live_version_count(), 1u);
  EXPECT_EQ(next->retained_version_count(), 1u);
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal kept, RecoverJournal(path()));
  EXPECT_EQ(kept.versions, adopted);
  EXPECT_EQ(kept.retained, held);
  // Appends go on to the rewritten file.
  next->RecordFreed("ns/kept", 1);
  ASSERT_OK(next->RecordPublish(Publish("ns/new", 1)));
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal after, RecoverJournal(path()));
  EXPECT_TRUE(after.retained.empty());
  EXPECT_EQ(after.versions.size(), 2u);  // ns/kept v2, ns/new v1.
}

TEST_F(JournalTest, CompactionKeepsOnlyLiveRecords) {
  ASSERT_OK_AND_ASSIGN(
      auto journal,
      TensorJournal::Create({.path = path(), .sync = JournalSync::kNone, .compact_min_bytes = 4096},
                            {}, {}));
  for (std::uint64_t number = 1; number <= 500; ++number) {
    ASSERT_OK(journal->RecordPublish(Publish("ns/churn", number)));
    journal->RecordFreed("ns/churn", number - 1);  // As the registry reclaims it.
  }
  EXPECT_LT(journal->file_bytes(), 8192u);
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal recovered, RecoverJournal(path()));
  ASSERT_EQ(recovered.versions.size(), 1u);
  EXPECT_EQ(recovered.versions[0].number, 500u);
}

TEST_F(JournalTest, AlwaysCommitsWithOneSyncForEveryRecordAppendedBeforeIt) {
  ASSERT_OK_AND_ASSIGN(
      auto journal, TensorJournal::Create({.path = path(), .sync = JournalSync::kAlways}, {}, {}));
  // Records append without a sync; a commit syncs them all at once.
  for (std::uint64_t number = 1; number <= 3; ++number) {
    ASSERT_OK(journal->RecordPublish(Publish("ns/a", number)));
  }
  EXPECT_EQ(journal->sync_count(), 0u);
  ASSERT_OK(journal->Commit());
  EXPECT_EQ(journal->sync_count(), 1u);
  ASSERT_OK(journal->Commit());  // Nothing new to sync.
  EXPECT_EQ(journal->sync_count(), 1u);
  journal->RecordRemoval("ns/a", 3);
  ASSERT_OK(journal->Commit());
  EXPECT_EQ(journal->sync_count(), 2u);
}

TEST_F(JournalTest, ConcurrentCommitsShareSyncsAndLoseNoRecord) {
  ASSERT_OK_AND_ASSIGN(
      auto journal, TensorJournal::Create({.path = path(), .sync = JournalSync::kAlways}, {}, {}));
  constexpr int kThreads = 8;
  constexpr std::uint64_t kEach = 50;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&journal, t] {
      for (std::uint64_t number = 1; number <= kEach; ++number) {
        EXPECT_OK(journal->RecordPublish(Publish("ns/t" + std::to_string(t), number)));
        EXPECT_OK(journal->Commit());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  // Never more syncs than commits; every commit returned after a sync covering its record.
  EXPECT_LE(journal->sync_count(), kThreads * kEach);
  EXPECT_GE(journal->sync_count(), 1u);
  ASSERT_OK_AND_ASSIGN(const RecoveredJournal recovered, RecoverJournal(path()));
  ASSERT_EQ(recovered.versions.size(), static_cast<std::size_t>(kThreads));
  for (const JournalRecord& version : recovered.versions) EXPECT_EQ(version.number, kEach);
}

TEST_F(JournalTest, NoneNeverSyncs) {
  ASSERT_OK_AND_ASSIGN(auto journal,
                       TensorJournal::Create({.path = path(), .sync = JournalSync::kNone}, {}, {}));
  ASSERT_OK(journal->RecordPublish(Publish("ns/a", 1)));
  ASSERT_OK(journal->Commit());
  EXPECT_EQ(journal->sync_count(), 0u);
}

TEST_F(JournalTest, RegistryCommitsAPublishBatchWithOneSync) {
  ASSERT_OK_AND_ASSIGN(
      auto journal, TensorJournal::Create({.path = path(), .sync = JournalSync::kAlways}, {}, {}));
  auto pool = CpuPool::Create(CpuPool::Options{
      .name = "cpu", .capacity_bytes = std::uint64_t{16} << 20, .shm_prefix = "hurray-test"});
  ASSERT_OK(pool);
  PoolSet pools;
  pools.Add(std::move(*pool));
  boost::asio::io_context io;
  VersionJournalOf<TensorJournal> registry_journal(*journal);
  Registry registry(pools, io, Registry::Options{.daemon_epoch = 7, .journal = &registry_journal});
  ASSERT_OK_AND_ASSIGN(SessionGrant session,
                       registry.OpenSession(PeerCredentials{.pid = 1, .uid = 0, .gid = 0}, "t"));
  const auto allocate = [&]() -> std::uint64_t {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() =
        DescriptorToProto(*TensorDescriptor::Dense(ElementType::kUint8, {64}));
    auto allocated = registry.Allocate(session.session_id, request);
    EXPECT_OK(allocated);
    return allocated ? allocated->allocation_id() : 0;
  };
  v1::PublishBatchRequest batch;
  for (int i = 0; i < 100; ++i) {
    v1::PublishRequest& item = *batch.add_items();
    item.set_allocation_id(allocate());
    item.set_name("ns/batch-" + std::to_string(i));
  }
  ASSERT_OK(registry.PublishBatch(session.session_id, batch));
  EXPECT_EQ(journal->sync_count(), 1u);
  v1::PublishRequest single;
  single.set_allocation_id(allocate());
  single.set_name("ns/single");
  ASSERT_OK(registry.Publish(session.session_id, single));
  EXPECT_EQ(journal->sync_count(), 2u);
  EXPECT_EQ(journal->live_version_count(), 101u);
  registry.CloseSession(session.session_id);
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
