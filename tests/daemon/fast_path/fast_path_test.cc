// The fast path on the daemon's side: the directory segment, lease pages, and the registry's
// reclaim held back by what lease pages name.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "fast_path/directory_segment.h"
#include "fast_path/lease_page.h"
#include "fast_path/lease_scanner.h"
#include "hurray/descriptor_codec.h"
#include "hurray/ipc/fast_path_layout.h"
#include "pool/cpu_pool.h"
#include "registry/registry.h"
#include "testing/io_thread.h"
#include "testing/shared_mapping.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

using fast_path::DirectorySegment;
using fast_path::LeasePage;
using testing::SharedMapping;

constexpr std::string_view kPrefix = "hurray-test";
constexpr std::uint64_t kPoolBytes = 16 << 20;

// The offset of entry `index`'s version_id word in a directory.
std::uint64_t VersionIdOffset(std::uint64_t index) {
  return sizeof(fast_path::DirectoryHeader) + index * sizeof(fast_path::DirectoryEntry) +
         offsetof(fast_path::DirectoryEntry, version_id);
}

TEST(DirectorySegmentTest, HeaderDescribesTheLayoutAndServes) {
  ASSERT_OK_AND_ASSIGN(auto directory, DirectorySegment::Create(kPrefix, 8, 77));
  const fast_path::DirectoryHeader& header = directory->header();
  EXPECT_EQ(header.magic, fast_path::kDirectoryMagic);
  EXPECT_EQ(header.layout_version, fast_path::kLayoutVersion);
  EXPECT_EQ(header.entry_size, sizeof(fast_path::DirectoryEntry));
  EXPECT_EQ(header.entry_count, 8u);
  EXPECT_EQ(header.daemon_epoch, 77u);
  EXPECT_EQ(header.state.load(), fast_path::kServing);
  EXPECT_EQ(directory->size_bytes(), fast_path::DirectoryBytes(8));
}

TEST(DirectorySegmentTest, RefusesZeroEntriesAndTooMany) {
  EXPECT_ERROR(DirectorySegment::Create(kPrefix, 0, 1), StatusCode::kInvalidArgument,
               {"fast_path.directory_entries 0"});
  EXPECT_ERROR(DirectorySegment::Create(kPrefix, DirectorySegment::kMaxEntries + 1, 1),
               StatusCode::kInvalidArgument, {"directory_entries"});
}

TEST(DirectorySegmentTest, EntriesRunOutAndFreedOnesComeBackCleared) {
  ASSERT_OK_AND_ASSIGN(auto directory, DirectorySegment::Create(kPrefix, 2, 1));
  const std::optional<std::uint64_t> first = directory->AllocateEntry();
  const std::optional<std::uint64_t> second = directory->AllocateEntry();
  ASSERT_TRUE(first && second);
  EXPECT_NE(*first, *second);
  EXPECT_FALSE(directory->AllocateEntry().has_value());
  EXPECT_EQ(directory->used_entries(), 2u);
  directory->Show(*first, 1234, 5);
  auto shown = ::hurray::fast_path::ReadEntry(directory->entry(*first));
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->version_id, 1234u);
  EXPECT_EQ(shown->version_number, 5u);
  directory->FreeEntry(*first);
  EXPECT_EQ(directory->used_entries(), 1u);
  EXPECT_EQ(directory->entry(*first).version_id.load(), 0u);
  EXPECT_EQ(directory->AllocateEntry(), first);
}

TEST(DirectorySegmentTest, ClientDescriptorIsReadOnly) {
  ASSERT_OK_AND_ASSIGN(auto directory, DirectorySegment::Create(kPrefix, 4, 1));
  ASSERT_OK_AND_ASSIGN(UniqueFd fd, directory->OpenReadOnly());
  void* writable =
      ::mmap(nullptr, directory->size_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  EXPECT_EQ(writable, MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  EXPECT_NE(::ftruncate(fd.get(), 0), 0);
  const SharedMapping mapping = SharedMapping::Of(fd.get(), directory->size_bytes(), false);
  directory->Show(3, 99, 1);
  EXPECT_EQ(mapping.ReadWord(VersionIdOffset(3)), 99u);
}

TEST(DirectorySegmentTest, DestroyedDirectoryShowsEndedToItsMappings) {
  ASSERT_OK_AND_ASSIGN(auto directory, DirectorySegment::Create(kPrefix, 4, 1));
  ASSERT_OK_AND_ASSIGN(UniqueFd fd, directory->OpenReadOnly());
  const SharedMapping mapping = SharedMapping::Of(fd.get(), directory->size_bytes(), false);
  const std::string path = directory->path();
  directory.reset();
  EXPECT_EQ(mapping.ReadWord(offsetof(fast_path::DirectoryHeader, state)), fast_path::kEnded);
  EXPECT_FALSE(std::filesystem::exists(path));
}

class AbandonedDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/hurray-fast-path-record-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    ASSERT_OK_AND_ASSIGN(state_, OwnedDirectory::Open(directory_, "state directory"));
    record_ = state_->PathOf(kRecordName);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  [[nodiscard]] std::string Path(std::string_view name) const {
    return directory_ + "/" + std::string(name);
  }

  static constexpr std::string_view kRecordName = "fast_path_directory";
  const SegmentPlace place_{.shm_prefix = std::string(kPrefix)};
  std::string directory_;
  std::optional<OwnedDirectory> state_;
  std::string record_;
};

TEST_F(AbandonedDirectoryTest, NextDaemonMarksTheRecordedDirectoryEndedAndRemovesIt) {
  ASSERT_OK_AND_ASSIGN(auto directory, DirectorySegment::Create(kPrefix, 4, 1));
  ASSERT_OK(directory->Record(*state_, kRecordName));
  ASSERT_OK_AND_ASSIGN(UniqueFd fd, directory->OpenReadOnly());
  const SharedMapping mapping = SharedMapping::Of(fd.get(), directory->size_bytes(), false);
  const std::string path = directory->path();
  // As after a crash: the segment and the record stay, the state still says serving.
  ASSERT_OK_AND_ASSIGN(const bool marked,
                       DirectorySegment::EndAbandoned(*state_, kRecordName, place_));
  EXPECT_TRUE(marked);
  EXPECT_EQ(mapping.ReadWord(offsetof(fast_path::DirectoryHeader, state)), fast_path::kEnded);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(record_));
}

TEST_F(AbandonedDirectoryTest, NoRecordIsNothingToEnd) {
  ASSERT_OK_AND_ASSIGN(const bool marked,
                       DirectorySegment::EndAbandoned(*state_, kRecordName, place_));
  EXPECT_FALSE(marked);
}

TEST_F(AbandonedDirectoryTest, RecordNamingAnotherFileIsOnlyRemoved) {
  const std::string victim = Path("victim");
  std::ofstream(victim) << "not a directory";
  std::ofstream(record_) << victim;
  ASSERT_OK_AND_ASSIGN(const bool marked,
                       DirectorySegment::EndAbandoned(*state_, kRecordName, place_));
  EXPECT_FALSE(marked);
  EXPECT_TRUE(std::filesystem::exists(victim));
  EXPECT_FALSE(std::filesystem::exists(record_));
}

TEST_F(AbandonedDirectoryTest, RecordNamingAnotherPrefixIsOnlyRemoved) {
  // A directory segment of another daemon (another prefix), serving: it stays as it is.
  ASSERT_OK_AND_ASSIGN(auto other, DirectorySegment::Create("hurray-other-daemon", 4, 1));
  std::ofstream(record_) << other->path();
  ASSERT_OK_AND_ASSIGN(const bool marked,
                       DirectorySegment::EndAbandoned(*state_, kRecordName, place_));
  EXPECT_FALSE(marked);
  EXPECT_EQ(other->header().state.load(), fast_path::kServing);
  EXPECT_TRUE(std::filesystem::exists(other->path()));
  EXPECT_FALSE(std::filesystem::exists(record_));
}

TEST_F(AbandonedDirectoryTest, RecordRefusesALinkPlantedAsItsTemporaryFile) {
  const std::string victim = Path("victim");
  std::ofstream(victim) << "keep me";
  ASSERT_EQ(::symlink(victim.c_str(), (record_ + ".new").c_str()), 0);
  ASSERT_OK_AND_ASSIGN(auto directory, DirectorySegment::Create(kPrefix, 4, 1));
  EXPECT_ERROR(directory->Record(*state_, kRecordName), StatusCode::kFailedPrecondition,
               {record_ + ".new", "symbolic link", "left alone"});
  std::ifstream read_back(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(read_back), {}), "keep me");
  EXPECT_FALSE(std::filesystem::exists(record_));
}

TEST(LeasePageTest, RefusesSlotCountsOutsideThePage) {
  EXPECT_ERROR(LeasePage::Create(0), StatusCode::kInvalidArgument, {"lease_slots 0"});
  EXPECT_ERROR(LeasePage::Create(LeasePage::kMaxSlots + 1), StatusCode::kInvalidArgument,
               {"lease_slots 513"});
}

TEST(LeasePageTest, SealsRefuseResizingAndOnlyCountedSlotsAreScanned) {
  ASSERT_OK_AND_ASSIGN(LeasePage page, LeasePage::Create(4));
  const UniqueFd fd = page.TakeClientDescriptor();
  ASSERT_TRUE(fd.valid());
  EXPECT_NE(::ftruncate(fd.get(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(fd.get(), 2 * fast_path::kLeasePageBytes), 0);
  const SharedMapping slots = SharedMapping::Of(fd.get(), fast_path::kLeasePageBytes, true);
  slots.WriteWord(3 * 8, 41);
  slots.WriteWord(4 * 8, 42);  // Past the page's 4 slots: never read.
  EXPECT_TRUE(page.Names(41));
  EXPECT_FALSE(page.Names(42));
  slots.WriteWord(3 * 8, 0);
  EXPECT_FALSE(page.Names(41));
}

TEST(LeaseScannerTest, GarbagePagePinsOnlyWhatItNames) {
  fast_path::LeaseScanner scanner;
  ASSERT_OK_AND_ASSIGN(LeasePage page, LeasePage::Create(LeasePage::kMaxSlots));
  const UniqueFd fd = page.TakeClientDescriptor();
  const SharedMapping slots = SharedMapping::Of(fd.get(), fast_path::kLeasePageBytes, true);
  for (std::uint64_t i = 0; i < LeasePage::kMaxSlots; ++i) {
    slots.WriteWord(i * 8, 0xdead'beef'0000'0000 + i);
  }
  scanner.Add(7, 1001, std::move(page));
  const std::vector<std::uint32_t> granted{1001};
  EXPECT_EQ(scanner.slot_count(), LeasePage::kMaxSlots);
  EXPECT_EQ(scanner.Names(5, granted), std::nullopt);
  EXPECT_EQ(scanner.Names(0xdead'beef'0000'0003, granted), 1001u);
  EXPECT_EQ(scanner.scans(), 2u);
  EXPECT_EQ(scanner.Remove(7), LeasePage::kMaxSlots);
  EXPECT_EQ(scanner.Names(0xdead'beef'0000'0003, granted), std::nullopt);
  EXPECT_EQ(scanner.Remove(7), 0u);
}

TEST(LeaseScannerTest, ASlotPinsOnlyForTheUidsGrantedTheVersion) {
  fast_path::LeaseScanner scanner;
  ASSERT_OK_AND_ASSIGN(LeasePage page, LeasePage::Create(8));
  const UniqueFd fd = page.TakeClientDescriptor();
  const SharedMapping slots = SharedMapping::Of(fd.get(), fast_path::kLeasePageBytes, true);
  slots.WriteWord(0, 77);
  scanner.Add(3, 1001, std::move(page));
  // Version 77 granted to uid 1002 only (an identity copied from the directory): no pin.
  EXPECT_EQ(scanner.Names(77, std::vector<std::uint32_t>{1002}), std::nullopt);
  EXPECT_EQ(scanner.Names(77, std::vector<std::uint32_t>{}), std::nullopt);
  EXPECT_EQ(scanner.Names(77, std::vector<std::uint32_t>{1002, 1001}), 1001u);
}

TEST(LeaseScannerTest, ARescanReadsEachPageOnce) {
  fast_path::LeaseScanner scanner;
  ASSERT_OK_AND_ASSIGN(LeasePage page, LeasePage::Create(8));
  const UniqueFd fd = page.TakeClientDescriptor();
  const SharedMapping slots = SharedMapping::Of(fd.get(), fast_path::kLeasePageBytes, true);
  slots.WriteWord(5 * 8, 40);
  slots.WriteWord(1 * 8, 30);
  scanner.Add(3, 0, std::move(page));
  const std::vector<std::uint32_t> granted{0};
  scanner.BeginRescan();
  EXPECT_EQ(scanner.Names(40, granted), 0u);
  // Read once: what the slots hold now is not seen until the next rescan.
  slots.WriteWord(5 * 8, 0);
  EXPECT_EQ(scanner.Names(40, granted), 0u);
  EXPECT_EQ(scanner.Names(30, granted), 0u);
  EXPECT_EQ(scanner.Names(31, granted), std::nullopt);
  scanner.EndRescan();
  EXPECT_EQ(scanner.Names(40, granted), std::nullopt);
  EXPECT_EQ(scanner.Names(30, granted), 0u);
  // A page removed within a rescan is forgotten with it.
  scanner.BeginRescan();
  EXPECT_EQ(scanner.Names(30, granted), 0u);
  EXPECT_EQ(scanner.Remove(3), 8u);
  EXPECT_EQ(scanner.Names(30, granted), std::nullopt);
  scanner.EndRescan();
}

// A registry with a fast path, on a real CPU pool, its io_context run by a thread (the
// rescan timer).
class FastPathRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pool = CpuPool::Create(
        CpuPool::Options{.name = "cpu", .capacity_bytes = kPoolBytes, .shm_prefix = "hurray-test"});
    ASSERT_OK(pool);
    pool_ = pool->get();
    pools_.Add(std::move(*pool));
    auto directory = DirectorySegment::Create(kPrefix, Entries(), 42);
    ASSERT_OK(directory);
    directory_ = std::move(*directory);
    registry_ = std::make_unique<Registry>(pools_, io_, Options());
    io_thread_.emplace(io_);
    producer_ = OpenSession();
    consumer_ = OpenSession();
  }

  void TearDown() override {
    io_thread_.reset();  // First: its handlers reach the registry.
    registry_.reset();
  }

  [[nodiscard]] virtual std::uint64_t Entries() const { return 16; }
  [[nodiscard]] virtual Registry::Options Options() const {
    return {.daemon_epoch = 42,
            .uid_quota = {.leases = 100},
            .fast_path = {.directory = directory_, .lease_slots = 8}};
  }

  std::uint64_t OpenSession() {
    auto grant = registry_->OpenSession(PeerCredentials{.pid = 1, .uid = 0, .gid = 0}, "test");
    EXPECT_OK(grant);
    return grant->session_id;
  }

  static v1::AllocateRequest AllocateFloats(std::uint64_t elements) {
    v1::AllocateRequest allocate;
    *allocate.mutable_tensor_descriptor() =
        DescriptorToProto(*TensorDescriptor::Dense(ElementType::kFloat32, {elements}));
    return allocate;
  }

  v1::PublishResponse Put(const std::string& name, std::uint64_t elements = 1024,
                          bool evictable = false) {
    auto allocation = registry_->Allocate(producer_, AllocateFloats(elements));
    EXPECT_OK(allocation);
    v1::PublishRequest publish;
    publish.set_allocation_id(allocation->allocation_id());
    publish.set_name(name);
    publish.set_evictable(evictable);
    auto published = registry_->Publish(producer_, publish);
    EXPECT_OK(published);
    return *published;
  }

  v1::AcquireResponse AcquireAndRelease(const std::string& name) {
    v1::AcquireRequest request;
    request.set_name(name);
    auto acquired = registry_->AcquireNow(consumer_, request);
    EXPECT_OK(acquired);
    v1::ReleaseRequest release;
    release.add_lease_ids(acquired->lease_id());
    EXPECT_OK(registry_->Release(consumer_, release));
    return *acquired;
  }

  // The consumer's lease page, mapped read-write as a client maps it.
  SharedMapping MapLeasePage(std::uint64_t session) {
    auto access = registry_->GrantLeasePage(session);
    EXPECT_OK(access);
    if (!access) return SharedMapping::Of(-1, fast_path::kLeasePageBytes, true);
    EXPECT_EQ(access->slot_count, 8u);
    return SharedMapping::Of(access->fd.get(), access->size, true);
  }

  // Waits (up to 2 s) for the pool's used bytes to drop to `bytes`.
  [[nodiscard]] bool UsedBytesReach(std::uint64_t bytes) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (pool_->Usage().used_bytes != bytes) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  boost::asio::io_context io_;
  std::optional<testing::IoThread> io_thread_;
  PoolSet pools_;
  Pool* pool_ = nullptr;
  std::shared_ptr<DirectorySegment> directory_;
  std::unique_ptr<Registry> registry_;
  std::uint64_t producer_ = 0;
  std::uint64_t consumer_ = 0;
};

TEST_F(FastPathRegistryTest, PublishShowsTheLatestVersionInItsNamesEntry) {
  Put("ns/a");
  const v1::AcquireResponse first = AcquireAndRelease("ns/a");
  ASSERT_NE(first.version_id(), 0u);
  auto shown = ::hurray::fast_path::ReadEntry(directory_->entry(first.directory_entry()));
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->version_id, first.version_id());
  EXPECT_EQ(shown->version_number, 1u);
  Put("ns/a");
  const v1::AcquireResponse second = AcquireAndRelease("ns/a");
  EXPECT_EQ(second.directory_entry(), first.directory_entry());
  EXPECT_GT(second.version_id(), first.version_id());
  EXPECT_EQ(directory_->entry(first.directory_entry()).version_id.load(), second.version_id());
}

TEST_F(FastPathRegistryTest, DeleteShowsNothingAndTheNameFreesItsEntry) {
  Put("ns/a");
  const v1::AcquireResponse acquired = AcquireAndRelease("ns/a");
  EXPECT_EQ(directory_->used_entries(), 1u);
  v1::DeleteRequest request;
  request.set_name("ns/a");
  ASSERT_OK(registry_->Delete(producer_, request));
  EXPECT_EQ(directory_->entry(acquired.directory_entry()).version_id.load(), 0u);
  EXPECT_EQ(directory_->used_entries(), 0u);
}

TEST_F(FastPathRegistryTest, SlotNamingSupersededVersionKeepsItsMemoryUntilCleared) {
  Put("ns/a");
  const std::uint64_t one_version = pool_->Usage().used_bytes;
  const v1::AcquireResponse first = AcquireAndRelease("ns/a");
  SharedMapping slots = MapLeasePage(consumer_);
  ASSERT_TRUE(slots.valid());
  slots.WriteWord(2 * 8, first.version_id());  // As Pin's first step.
  Put("ns/a");
  EXPECT_EQ(pool_->Usage().used_bytes, 2 * one_version);
  v1::StatsResponse stats = registry_->Stats();
  EXPECT_EQ(stats.fast_path_pinned_versions(), 1u);
  EXPECT_EQ(stats.fast_path_pinned_bytes(), 4096u);
  EXPECT_EQ(stats.fast_path_lease_pages(), 1u);
  EXPECT_EQ(stats.fast_path_lease_slots(), 8u);
  EXPECT_GE(stats.fast_path_scans(), 1u);
  slots.WriteWord(2 * 8, 0);  // Unpin: the rescan timer frees it.
  EXPECT_TRUE(UsedBytesReach(one_version));
  EXPECT_EQ(registry_->Stats().fast_path_pinned_versions(), 0u);
}

TEST_F(FastPathRegistryTest, EvictionPassesOverAVersionALeasePageNames) {
  // Two evictable tensors of half the pool each; the older one is read on the fast path.
  constexpr std::uint64_t kHalfPool = kPoolBytes / 2 / sizeof(float);
  Put("ns/old", kHalfPool, /*evictable=*/true);
  Put("ns/new", kHalfPool, /*evictable=*/true);
  const v1::AcquireResponse old = AcquireAndRelease("ns/old");
  SharedMapping slots = MapLeasePage(consumer_);
  slots.WriteWord(0, old.version_id());
  AcquireAndRelease("ns/new");  // The least recently used is ns/old, which is pinned.
  ASSERT_OK(registry_->Allocate(producer_, AllocateFloats(kHalfPool)));
  EXPECT_EQ(registry_->Stats().evicted_tensor_count(), 1u);
  EXPECT_EQ(directory_->entry(old.directory_entry()).version_id.load(), old.version_id());
  v1::AcquireRequest request;
  request.set_name("ns/new");
  EXPECT_ERROR(registry_->AcquireNow(consumer_, request), StatusCode::kNotFound, {"ns/new"});
  // With every evictable version pinned, nothing is evicted and the allocation is refused.
  EXPECT_ERROR(registry_->Allocate(producer_, AllocateFloats(kHalfPool)),
               StatusCode::kResourceExhausted, {});
  EXPECT_EQ(registry_->Stats().evicted_tensor_count(), 1u);
  slots.WriteWord(0, 0);
}

TEST_F(FastPathRegistryTest, DeadSessionsPinsGoWithIt) {
  Put("ns/a");
  const std::uint64_t one_version = pool_->Usage().used_bytes;
  const v1::AcquireResponse first = AcquireAndRelease("ns/a");
  SharedMapping slots = MapLeasePage(consumer_);
  slots.WriteWord(0, first.version_id());
  v1::DeleteRequest request;
  request.set_name("ns/a");
  ASSERT_OK(registry_->Delete(producer_, request));
  EXPECT_EQ(pool_->Usage().used_bytes, one_version);
  registry_->CloseSession(consumer_);
  EXPECT_EQ(pool_->Usage().used_bytes, 0u);
  EXPECT_EQ(registry_->Stats().fast_path_lease_pages(), 0u);
}

TEST_F(FastPathRegistryTest, GarbagePageHarmsNoOtherTensor) {
  Put("ns/a");
  Put("ns/b");
  SharedMapping slots = MapLeasePage(consumer_);
  for (std::uint64_t i = 0; i < fast_path::kLeasePageBytes / 8; ++i) {
    slots.WriteWord(i * 8, ~std::uint64_t{0} - i);
  }
  Put("ns/a");  // Version 1 of ns/a is named by no slot: freed at once.
  EXPECT_EQ(pool_->Usage().used_bytes, 2 * 4096u);
  EXPECT_EQ(registry_->Stats().fast_path_pinned_versions(), 0u);
  const v1::AcquireResponse b = AcquireAndRelease("ns/b");
  EXPECT_EQ(b.tensor().version(), 1u);
}

TEST_F(FastPathRegistryTest, IdentityCopiedFromTheDirectoryPinsNothing) {
  Put("ns/a");
  const std::uint64_t one_version = pool_->Usage().used_bytes;
  const v1::AcquireResponse granted = AcquireAndRelease("ns/a");  // To uid 0's consumer.
  // Uid 1001 never acquired ns/a: it reads the identity from the directory, and guesses.
  auto other = registry_->OpenSession(PeerCredentials{.pid = 2, .uid = 1001, .gid = 1001}, "o");
  ASSERT_OK(other);
  SharedMapping slots = MapLeasePage(other->session_id);
  const std::uint64_t shown = directory_->entry(granted.directory_entry()).version_id.load();
  ASSERT_EQ(shown, granted.version_id());
  slots.WriteWord(0, shown);
  for (std::uint64_t i = 1; i < 8; ++i) slots.WriteWord(i * 8, shown + i);
  Put("ns/a");  // Version 1 is freed at once.
  EXPECT_EQ(pool_->Usage().used_bytes, one_version);
  EXPECT_EQ(registry_->Stats().fast_path_pinned_versions(), 0u);
}

TEST_F(FastPathRegistryTest, PinnedVersionCountsAgainstThePinnerNotThePublisher) {
  const auto published_bytes = [this](std::uint32_t uid) -> std::uint64_t {
    const v1::StatsResponse stats = registry_->Stats();
    for (const v1::UidUsage& usage : stats.uids()) {
      if (usage.uid() == uid) return usage.published_bytes();
    }
    return 0;
  };
  Put("ns/a");
  const std::uint64_t charge = published_bytes(0);
  ASSERT_GT(charge, 0u);
  auto reader = registry_->OpenSession(PeerCredentials{.pid = 2, .uid = 1001, .gid = 1001}, "r");
  ASSERT_OK(reader);
  v1::AcquireRequest request;
  request.set_name("ns/a");
  ASSERT_OK_AND_ASSIGN(v1::AcquireResponse acquired,
                       registry_->AcquireNow(reader->session_id, request));
  SharedMapping slots = MapLeasePage(reader->session_id);
  slots.WriteWord(0, acquired.version_id());  // Pinned by uid 1001, which was granted it.
  v1::ReleaseRequest release;
  release.add_lease_ids(acquired.lease_id());
  ASSERT_OK(registry_->Release(reader->session_id, release));
  Put("ns/a");
  EXPECT_EQ(registry_->Stats().fast_path_pinned_versions(), 1u);
  EXPECT_EQ(published_bytes(0), charge);  // Only version 2.
  EXPECT_EQ(published_bytes(1001), charge);
  slots.WriteWord(0, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (published_bytes(1001) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(published_bytes(1001), 0u);
  EXPECT_EQ(published_bytes(0), charge);
}

// A directory of 16 entries, at most 4 of them for the names of one uid.
class SharedDirectoryTest : public FastPathRegistryTest {
 protected:
  [[nodiscard]] Registry::Options Options() const override {
    return {.daemon_epoch = 42,
            .fast_path = {.directory = directory_, .lease_slots = 8, .max_entries_per_uid = 4}};
  }
};

TEST_F(SharedDirectoryTest, OneUidTakesAtMostItsShareOfTheDirectory) {
  for (int i = 0; i < 6; ++i) Put("mine/" + std::to_string(i));
  EXPECT_EQ(directory_->used_entries(), 4u);
  EXPECT_EQ(registry_->Stats().fast_path_refused_names(), 2u);
  EXPECT_EQ(AcquireAndRelease("mine/5").version_id(), 0u);  // On the socket only.
  // Another uid's new name still gets an entry.
  auto other = registry_->OpenSession(PeerCredentials{.pid = 2, .uid = 1001, .gid = 1001}, "o");
  ASSERT_OK(other);
  auto allocation = registry_->Allocate(other->session_id, AllocateFloats(16));
  ASSERT_OK(allocation);
  v1::PublishRequest publish;
  publish.set_allocation_id(allocation->allocation_id());
  publish.set_name("theirs/a");
  ASSERT_OK(registry_->Publish(other->session_id, publish));
  EXPECT_EQ(directory_->used_entries(), 5u);
  EXPECT_NE(AcquireAndRelease("theirs/a").version_id(), 0u);
  // A name that goes gives its uid's entry back.
  v1::DeleteRequest remove;
  remove.set_name("mine/0");
  ASSERT_OK(registry_->Delete(producer_, remove));
  Put("mine/6");
  EXPECT_NE(AcquireAndRelease("mine/6").version_id(), 0u);
}

TEST_F(FastPathRegistryTest, SecondLeasePageIsRefused) {
  SharedMapping slots = MapLeasePage(consumer_);
  EXPECT_ERROR(registry_->GrantLeasePage(consumer_), StatusCode::kFailedPrecondition,
               {"lease page already"});
}

TEST_F(FastPathRegistryTest, LeasePageSlotsCountAgainstTheLeaseQuota) {
  // A quota of 100 leases: 12 pages of 8 slots fit, a 13th does not.
  std::vector<SharedMapping> pages;
  pages.reserve(12);
  for (int i = 0; i < 12; ++i) pages.push_back(MapLeasePage(OpenSession()));
  const std::uint64_t session = OpenSession();
  EXPECT_ERROR(registry_->GrantLeasePage(session), StatusCode::kResourceExhausted,
               {"leases quota 100", "96 leases held, 8 more asked", "map_lease_page"});
  EXPECT_EQ(registry_->Stats().fast_path_lease_slots(), 96u);
}

TEST_F(FastPathRegistryTest, DirectoryMapsReadOnlyWithItsShape) {
  ASSERT_OK_AND_ASSIGN(DirectoryAccess access, registry_->GrantDirectory(consumer_));
  EXPECT_EQ(access.entry_count, 16u);
  EXPECT_EQ(access.size, fast_path::DirectoryBytes(16));
  EXPECT_EQ(::mmap(nullptr, access.size, PROT_READ | PROT_WRITE, MAP_SHARED, access.fd.get(), 0),
            MAP_FAILED);
}

class FullDirectoryTest : public FastPathRegistryTest {
 protected:
  [[nodiscard]] std::uint64_t Entries() const override { return 1; }
};

TEST_F(FullDirectoryTest, NameWithoutAnEntryHasNoFastPathAndIsCounted) {
  Put("ns/a");
  Put("ns/b");
  Put("ns/b");
  EXPECT_NE(AcquireAndRelease("ns/a").version_id(), 0u);
  const v1::AcquireResponse b = AcquireAndRelease("ns/b");
  EXPECT_EQ(b.version_id(), 0u);
  EXPECT_EQ(b.tensor().version(), 2u);
  const v1::StatsResponse stats = registry_->Stats();
  EXPECT_EQ(stats.fast_path_refused_names(), 1u);
  EXPECT_EQ(stats.fast_path_directory_entries_used(), 1u);
  EXPECT_EQ(stats.fast_path_directory_entries(), 1u);
}

TEST(FastPathOffTest, RegistryWithoutDirectoryRefusesBothAndGivesNoIdentity) {
  boost::asio::io_context io;
  PoolSet pools;
  auto pool = CpuPool::Create(
      CpuPool::Options{.name = "cpu", .capacity_bytes = kPoolBytes, .shm_prefix = "hurray-test"});
  ASSERT_OK(pool);
  pools.Add(std::move(*pool));
  Registry registry(pools, io, Registry::Options{});
  ASSERT_OK_AND_ASSIGN(const SessionGrant session,
                       registry.OpenSession(PeerCredentials{.pid = 1, .uid = 0, .gid = 0}, "t"));
  EXPECT_ERROR(registry.GrantDirectory(session.session_id), StatusCode::kFailedPrecondition,
               {"fast path is off"});
  EXPECT_ERROR(registry.GrantLeasePage(session.session_id), StatusCode::kFailedPrecondition,
               {"fast path is off"});
  v1::AllocateRequest allocate;
  *allocate.mutable_tensor_descriptor() =
      DescriptorToProto(*TensorDescriptor::Dense(ElementType::kFloat32, {16}));
  ASSERT_OK_AND_ASSIGN(const v1::AllocateResponse allocation,
                       registry.Allocate(session.session_id, allocate));
  v1::PublishRequest publish;
  publish.set_allocation_id(allocation.allocation_id());
  publish.set_name("ns/a");
  ASSERT_OK(registry.Publish(session.session_id, publish));
  v1::AcquireRequest acquire;
  acquire.set_name("ns/a");
  ASSERT_OK_AND_ASSIGN(const v1::AcquireResponse acquired,
                       registry.AcquireNow(session.session_id, acquire));
  EXPECT_EQ(acquired.version_id(), 0u);
  EXPECT_EQ(registry.Stats().fast_path_directory_entries(), 0u);
}

}  // namespace
}  // namespace hurray::daemon
