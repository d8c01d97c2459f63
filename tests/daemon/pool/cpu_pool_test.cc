#include "pool/cpu_pool.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// A prefix per test process, so that leftovers are attributable and tests do not collide.
std::string TestPrefix() { return "hurray-test-" + std::to_string(::getpid()); }

CpuPool::Options SmallOptions(std::uint64_t capacity = 16 * kPage) {
  return CpuPool::Options{.capacity_bytes = capacity, .shm_prefix = TestPrefix()};
}

std::string ShmPath(const std::string& name) { return "/dev/shm" + name; }

// Names in /dev/shm that start with `prefix`.
std::vector<std::string> ShmEntriesWithPrefix(const std::string& prefix) {
  std::vector<std::string> names;
  DIR* directory = ::opendir("/dev/shm");
  if (directory == nullptr) return names;
  while (const dirent* entry = ::readdir(directory)) {
    const std::string name = entry->d_name;
    if (name.starts_with(prefix)) names.push_back(name);
  }
  ::closedir(directory);
  return names;
}

// A shared mapping of a whole segment, unmapped in the destructor.
class Mapping {
 public:
  Mapping(int fd, std::uint64_t size, int protection)
      : size_(size), address_(::mmap(nullptr, size, protection, MAP_SHARED, fd, 0)) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (ok()) ::munmap(address_, size_);
  }
  [[nodiscard]] bool ok() const { return address_ != MAP_FAILED; }
  [[nodiscard]] char* bytes() const { return static_cast<char*>(address_); }

 private:
  std::uint64_t size_;
  void* address_;
};

class CpuPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(SmallOptions());
    ASSERT_OK(pool);
    pool_ = std::move(*pool);
  }

  std::unique_ptr<CpuPool> pool_;
};

TEST_F(CpuPoolTest, DescribesItself) {
  EXPECT_EQ(pool_->name(), "cpu");
  EXPECT_EQ(pool_->device_tag(), DeviceTag::Cpu());
  EXPECT_EQ(pool_->page_size(), kPage);
  EXPECT_EQ(pool_->segment_count(), 1u);
  EXPECT_EQ(pool_->SegmentSize(1), 16 * kPage);
  EXPECT_EQ(pool_->SegmentSize(0), std::nullopt);
  EXPECT_EQ(pool_->SegmentSize(2), std::nullopt);
}

TEST(CpuPoolCreateTest, SegmentsAreDevShmFilesOfMode0600WhateverTheUmask) {
  const mode_t saved_umask = ::umask(0);  // Boost's default permissions would give 0644.
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(SmallOptions());
  ::umask(saved_umask);
  ASSERT_OK(pool);
  const std::optional<std::string> name = (*pool)->SegmentName(1);
  ASSERT_TRUE(name.has_value());
  struct stat info{};
  ASSERT_EQ(::stat(ShmPath(*name).c_str(), &info), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  EXPECT_EQ(info.st_uid, ::geteuid());
  EXPECT_EQ(static_cast<std::uint64_t>(info.st_size), 16 * kPage);
}

TEST(CpuPoolCreateTest, SpaceIsReservedUpFront) {
  const std::uint64_t capacity = 8 * kMiB;
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(SmallOptions(capacity));
  ASSERT_OK(pool);
  struct stat info{};
  ASSERT_EQ(::stat(ShmPath(*(*pool)->SegmentName(1)).c_str(), &info), 0);
  // ftruncate alone leaves a sparse file with no blocks; fallocate backs every page.
  EXPECT_GE(static_cast<std::uint64_t>(info.st_blocks) * 512, capacity);
}

TEST(CpuPoolCreateTest, KeptSegmentsGiveTheirFreeRangesBack) {
  const std::uint64_t capacity = 8 * kMiB;
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(SmallOptions(capacity));
  ASSERT_OK(pool);
  ASSERT_OK_AND_ASSIGN(const PoolRange kept, (*pool)->Allocate(kMiB));
  const std::string path = ShmPath(*(*pool)->SegmentName(1));
  EXPECT_EQ((*pool)->KeepSegments(), capacity - kMiB);
  pool->reset();
  struct stat info{};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  // The size stays (a restarted daemon adopts the file at it); the blocks are the kept MiB's.
  EXPECT_EQ(static_cast<std::uint64_t>(info.st_size), capacity);
  EXPECT_LE(static_cast<std::uint64_t>(info.st_blocks) * 512, kMiB + kPage);
  EXPECT_GE(static_cast<std::uint64_t>(info.st_blocks) * 512, kept.size);
  ASSERT_EQ(::unlink(path.c_str()), 0);
}

TEST(CpuPoolCreateTest, SegmentNamesAreUnguessable) {
  Result<std::unique_ptr<CpuPool>> first = CpuPool::Create(SmallOptions());
  Result<std::unique_ptr<CpuPool>> second = CpuPool::Create(SmallOptions());
  ASSERT_OK(first);
  ASSERT_OK(second);
  const std::string name_1 = *(*first)->SegmentName(1);
  const std::string name_2 = *(*second)->SegmentName(1);
  EXPECT_NE(name_1, name_2);
  const std::regex shape("/" + TestPrefix() + "-[0-9a-f]{32}");
  EXPECT_TRUE(std::regex_match(name_1, shape)) << name_1;
  EXPECT_TRUE(std::regex_match(name_2, shape)) << name_2;
}

TEST(CpuPoolCreateTest, DestroyingThePoolRemovesItsSegments) {
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(CpuPool::Options{
      .capacity_bytes = 4 * kPage, .segment_bytes = 2 * kPage, .shm_prefix = TestPrefix()});
  ASSERT_OK(pool);
  const std::string path_1 = ShmPath(*(*pool)->SegmentName(1));
  const std::string path_2 = ShmPath(*(*pool)->SegmentName(2));
  ASSERT_EQ(::access(path_1.c_str(), F_OK), 0);
  ASSERT_EQ(::access(path_2.c_str(), F_OK), 0);

  // A client's mapping outlives the name.
  Result<SegmentAccess> access = (*pool)->OpenSegment(1, /*writable=*/true);
  ASSERT_OK(access);
  Mapping mapping(access->fd.get(), 2 * kPage, PROT_READ | PROT_WRITE);
  ASSERT_TRUE(mapping.ok());
  std::memcpy(mapping.bytes(), "still here", 11);

  pool->reset();
  EXPECT_NE(::access(path_1.c_str(), F_OK), 0);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(::access(path_2.c_str(), F_OK), 0);
  EXPECT_STREQ(mapping.bytes(), "still here");
}

TEST_F(CpuPoolTest, ReadOnlyDescriptorRefusesWrites) {
  Result<SegmentAccess> access = pool_->OpenSegment(1, /*writable=*/false);
  ASSERT_OK(access);
  EXPECT_FALSE(access->writable);
  EXPECT_EQ(access->segment_size, 16 * kPage);
  const int fd = access->fd.get();
  EXPECT_EQ(::fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);

  errno = 0;
  void* address = ::mmap(nullptr, 16 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  EXPECT_EQ(address, MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  if (address != MAP_FAILED) ::munmap(address, 16 * kPage);
  EXPECT_EQ(::write(fd, "x", 1), -1);

  Mapping readable(fd, 16 * kPage, PROT_READ);
  EXPECT_TRUE(readable.ok());
}

TEST_F(CpuPoolTest, WritesThroughTheWritableDescriptorAreSeenThroughAReadOnlyOne) {
  Result<PoolRange> range = pool_->Allocate(100);
  ASSERT_OK(range);
  Result<SegmentAccess> writer = pool_->OpenSegment(range->segment_id, /*writable=*/true);
  Result<SegmentAccess> reader = pool_->OpenSegment(range->segment_id, /*writable=*/false);
  ASSERT_OK(writer);
  ASSERT_OK(reader);
  EXPECT_TRUE(writer->writable);
  EXPECT_EQ(::fcntl(writer->fd.get(), F_GETFL) & O_ACCMODE, O_RDWR);
  EXPECT_NE(writer->fd.get(), reader->fd.get());

  Mapping write_mapping(writer->fd.get(), writer->segment_size, PROT_READ | PROT_WRITE);
  Mapping read_mapping(reader->fd.get(), reader->segment_size, PROT_READ);
  ASSERT_TRUE(write_mapping.ok());
  ASSERT_TRUE(read_mapping.ok());
  std::memcpy(write_mapping.bytes() + range->offset, "zero-copy", 10);
  EXPECT_STREQ(read_mapping.bytes() + range->offset, "zero-copy");
}

TEST_F(CpuPoolTest, OpenSegmentOfAnUnknownIdIsNotFound) {
  EXPECT_ERROR(pool_->OpenSegment(7, false), StatusCode::kNotFound,
               {"segment 7 is not in pool cpu"});
  EXPECT_ERROR(pool_->OpenSegment(0, true), StatusCode::kNotFound, {"segment 0"});
}

TEST_F(CpuPoolTest, RangesArePageAlignedAndReserveWholePages) {
  Result<PoolRange> first = pool_->Allocate(1);
  Result<PoolRange> second = pool_->Allocate(kPage + 1);
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(*first, (PoolRange{.segment_id = 1, .offset = 0, .size = 1}));
  EXPECT_EQ(*second, (PoolRange{.segment_id = 1, .offset = kPage, .size = kPage + 1}));
  EXPECT_EQ(pool_->Usage().used_bytes, 3 * kPage);
}

TEST_F(CpuPoolTest, RejectsZeroAndOversizedRequests) {
  EXPECT_ERROR(pool_->Allocate(0), StatusCode::kInvalidArgument, {"pool cpu", "byte_size 0"});
  // Larger than any segment: it can never fit, which is a full pool's answer too.
  EXPECT_ERROR(pool_->Allocate(16 * kPage + 1), StatusCode::kResourceExhausted,
               {"pool cpu", "byte_size 65537", "segment size 65536"});
}

TEST_F(CpuPoolTest, ExhaustionNamesThePoolAndTheSizes) {
  ASSERT_OK(pool_->Allocate(12 * kPage));
  Result<PoolRange> hole_maker = pool_->Allocate(kPage);
  ASSERT_OK(hole_maker);
  ASSERT_OK(pool_->Allocate(2 * kPage));
  pool_->Free(*hole_maker);
  // Free: one page at 12 and one at 15.
  EXPECT_ERROR(pool_->Allocate(2 * kPage - 100), StatusCode::kResourceExhausted,
               {"pool cpu: no free range of 8192 bytes", "byte_size 8092",
                "largest free range 4096 of 8192 free"});
  EXPECT_OK(pool_->Allocate(kPage));
}

TEST_F(CpuPoolTest, UsageReportsBytesCountsAndFragmentation) {
  std::vector<PoolRange> ranges;
  for (int i = 0; i < 4; ++i) {
    Result<PoolRange> range = pool_->Allocate(kPage);
    ASSERT_OK(range);
    ranges.push_back(*range);
  }
  ASSERT_OK(pool_->Allocate(12 * kPage - 5));  // Fills the pool.
  pool_->Free(ranges[0]);
  pool_->Free(ranges[2]);

  PoolUsage usage = pool_->Usage();
  EXPECT_EQ(usage.name, "cpu");
  EXPECT_EQ(usage.kind, "cpu");
  EXPECT_EQ(usage.capacity_bytes, 16 * kPage);
  EXPECT_EQ(usage.used_bytes, 14 * kPage);
  EXPECT_EQ(usage.largest_free_bytes, kPage);
  EXPECT_DOUBLE_EQ(usage.fragmentation, 0.5);
  EXPECT_EQ(usage.segment_count, 1u);
  EXPECT_EQ(usage.allocation_count, 3u);

  pool_->Free(ranges[1]);
  usage = pool_->Usage();
  EXPECT_EQ(usage.largest_free_bytes, 3 * kPage);
  EXPECT_DOUBLE_EQ(usage.fragmentation, 0.0);
}

TEST_F(CpuPoolTest, FreeingEverythingLeavesOneFreeRange) {
  std::vector<PoolRange> ranges;
  for (std::uint64_t size : {100u, 5000u, 4096u, 9000u, 1u}) {
    Result<PoolRange> range = pool_->Allocate(size);
    ASSERT_OK(range);
    ranges.push_back(*range);
  }
  for (std::size_t i : {3u, 0u, 4u, 1u, 2u}) pool_->Free(ranges[i]);
  const PoolUsage usage = pool_->Usage();
  EXPECT_EQ(usage.used_bytes, 0u);
  EXPECT_EQ(usage.allocation_count, 0u);
  EXPECT_EQ(usage.largest_free_bytes, 16 * kPage);
  EXPECT_EQ(usage.fragmentation, 0.0);
}

TEST_F(CpuPoolTest, BadFreesAreIgnoredWithoutCorruptingState) {
  Result<PoolRange> kept = pool_->Allocate(kPage);
  Result<PoolRange> freed = pool_->Allocate(2 * kPage);
  ASSERT_OK(kept);
  ASSERT_OK(freed);
  pool_->Free(*freed);
  const PoolUsage before = pool_->Usage();

  pool_->Free(*freed);                                                      // Double free.
  pool_->Free(PoolRange{.segment_id = 9, .offset = 0, .size = kPage});      // Unknown segment.
  pool_->Free(PoolRange{.segment_id = 1, .offset = kPage, .size = kPage});  // Not live.
  pool_->Free(PoolRange{.segment_id = 1, .offset = 0, .size = 3 * kPage});  // Wrong size.
  pool_->Free(PoolRange{});                                                 // Empty buffer.

  const PoolUsage after = pool_->Usage();
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  EXPECT_EQ(after.allocation_count, before.allocation_count);
  EXPECT_EQ(after.largest_free_bytes, before.largest_free_bytes);
  EXPECT_EQ(after.largest_free_bytes, 15 * kPage);
  // Exactly 15 pages are free: the double free did not add two more.
  EXPECT_OK(pool_->Allocate(15 * kPage));
  EXPECT_ERROR(pool_->Allocate(1), StatusCode::kResourceExhausted);
}

TEST(CpuPoolSegmentsTest, SplitsCapacityIntoSegmentsTriedInOrder) {
  Result<std::unique_ptr<CpuPool>> created =
      CpuPool::Create(CpuPool::Options{.name = "cpu-multi",
                                       .capacity_bytes = 10 * kPage,
                                       .segment_bytes = 4 * kPage - 10,  // Rounded up to 4 pages.
                                       .shm_prefix = TestPrefix(),
                                       .first_segment_id = 7});
  ASSERT_OK(created);
  CpuPool& pool = **created;
  EXPECT_EQ(pool.segment_count(), 3u);
  EXPECT_EQ(pool.SegmentSize(6), std::nullopt);
  EXPECT_EQ(pool.SegmentSize(7), 4 * kPage);
  EXPECT_EQ(pool.SegmentSize(8), 4 * kPage);
  EXPECT_EQ(pool.SegmentSize(9), 2 * kPage);  // What remains.
  EXPECT_EQ(pool.SegmentSize(10), std::nullopt);
  EXPECT_NE(*pool.SegmentName(7), *pool.SegmentName(8));
  EXPECT_ERROR(pool.OpenSegment(10, false), StatusCode::kNotFound,
               {"segment 10 is not in pool cpu-multi"});
  EXPECT_OK(pool.OpenSegment(9, false));

  EXPECT_EQ(pool.Allocate(kPage)->segment_id, 7u);
  EXPECT_EQ(pool.Allocate(kPage)->segment_id, 7u);  // The first segment while it fits.
  EXPECT_EQ(pool.Allocate(4 * kPage)->segment_id, 8u);
  EXPECT_EQ(pool.Allocate(2 * kPage)->segment_id, 7u);
  EXPECT_ERROR(
      pool.Allocate(3 * kPage), StatusCode::kResourceExhausted,
      {"pool cpu-multi", "no free range of 12288 bytes", "largest free range 8192 of 8192 free"});
  Result<PoolRange> last = pool.Allocate(2 * kPage);
  ASSERT_OK(last);
  EXPECT_EQ(*last, (PoolRange{.segment_id = 9, .offset = 0, .size = 2 * kPage}));

  PoolUsage usage = pool.Usage();
  EXPECT_EQ(usage.name, "cpu-multi");
  EXPECT_EQ(usage.capacity_bytes, 10 * kPage);
  EXPECT_EQ(usage.used_bytes, 10 * kPage);
  EXPECT_EQ(usage.segment_count, 3u);
  EXPECT_EQ(usage.allocation_count, 5u);
  EXPECT_EQ(usage.fragmentation, 0.0);

  pool.Free(*last);
  usage = pool.Usage();
  EXPECT_EQ(usage.used_bytes, 8 * kPage);
  EXPECT_EQ(usage.largest_free_bytes, 2 * kPage);
}

TEST(CpuPoolCreateTest, ValidatesOptions) {
  auto with = [](auto change) {
    CpuPool::Options options = SmallOptions();
    change(options);
    return CpuPool::Create(std::move(options));
  };
  EXPECT_ERROR(with([](auto& o) { o.capacity_bytes = 0; }), StatusCode::kInvalidArgument,
               {"capacity 0"});
  EXPECT_ERROR(with([](auto& o) { o.capacity_bytes = UINT64_MAX; }), StatusCode::kInvalidArgument,
               {"capacity 18446744073709551615"});
  EXPECT_ERROR(with([](auto& o) { o.page_size = 2048; }), StatusCode::kInvalidArgument,
               {"page_size 2048"});
  EXPECT_ERROR(with([](auto& o) { o.page_size = 12288; }), StatusCode::kInvalidArgument,
               {"page_size 12288", "power of two"});
  EXPECT_ERROR(with([](auto& o) { o.segment_bytes = 17 * kPage; }), StatusCode::kInvalidArgument,
               {"segment_size 69632", "capacity 65536"});
  EXPECT_ERROR(with([](auto& o) { o.first_segment_id = 0; }), StatusCode::kInvalidArgument,
               {"first_segment_id 0"});
  EXPECT_ERROR(with([](auto& o) {
                 o.first_segment_id = UINT64_MAX;
                 o.segment_bytes = kPage;
               }),
               StatusCode::kInvalidArgument, {"first_segment_id 18446744073709551615"});
  EXPECT_ERROR(with([](auto& o) { o.shm_prefix = "a/b"; }), StatusCode::kInvalidArgument,
               {"shm_prefix \"a/b\"", "'/'"});
  EXPECT_ERROR(with([](auto& o) { o.shm_prefix = ""; }), StatusCode::kInvalidArgument,
               {"shm_prefix"});
  EXPECT_ERROR(with([](auto& o) { o.name = ""; }), StatusCode::kInvalidArgument, {"name"});
  EXPECT_ERROR(with([](auto& o) {
                 o.capacity_bytes = kGiB;
                 o.segment_bytes = kPage;
               }),
               StatusCode::kInvalidArgument, {"262144 segments"});
}

TEST(CpuPoolCreateTest, RoundsCapacityUpToThePageSize) {
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(CpuPool::Options{
      .capacity_bytes = 3 * kMiB + 1, .page_size = 2 * kMiB, .shm_prefix = TestPrefix()});
  ASSERT_OK(pool);
  EXPECT_EQ((*pool)->page_size(), 2 * kMiB);
  EXPECT_EQ((*pool)->Usage().capacity_bytes, 4 * kMiB);
  EXPECT_EQ((*pool)->SegmentSize(1), 4 * kMiB);
  Result<PoolRange> first = (*pool)->Allocate(1);
  Result<PoolRange> second = (*pool)->Allocate(1);
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(second->offset, 2 * kMiB);
}

TEST(CpuPoolCreateTest, MoreThanDevShmHoldsFailsCleanly) {
  struct statvfs shm{};
  ASSERT_EQ(::statvfs("/dev/shm", &shm), 0) << std::strerror(errno);
  const std::uint64_t total = static_cast<std::uint64_t>(shm.f_blocks) * shm.f_frsize;
  const std::uint64_t free = static_cast<std::uint64_t>(shm.f_bavail) * shm.f_frsize;
  if (shm.f_blocks == 0 || total > (std::uint64_t{1} << 50)) {
    GTEST_SKIP() << "/dev/shm has no size limit to exceed";
  }
  // More than free + 1 GiB, and more than the whole tmpfs, so the kernel refuses the
  // fallocate before it backs a single page.
  const std::uint64_t size = std::max(free, total) + kGiB;
  const std::string prefix = TestPrefix() + "-full";
  Result<std::unique_ptr<CpuPool>> pool =
      CpuPool::Create(CpuPool::Options{.capacity_bytes = size, .shm_prefix = prefix});
  EXPECT_ERROR(pool, StatusCode::kResourceExhausted,
               {"pool cpu: ", "cannot reserve " + std::to_string(size) + " bytes", "/dev/shm has",
                "No space left on device"});
  EXPECT_TRUE(ShmEntriesWithPrefix(prefix + "-").empty());
}

// A reserve step that lets the first `free_chunks` chunks through at once and holds the
// others until Open(), or fails them with RESOURCE_EXHAUSTED once Fail() was called.
class GatedReserveStep {
 public:
  explicit GatedReserveStep(std::uint64_t chunk_bytes, std::uint64_t free_chunks)
      : free_bytes_(chunk_bytes * free_chunks) {}

  Status operator()(std::uint64_t offset) {
    std::unique_lock lock(mutex_);
    if (offset < free_bytes_) return {};
    changed_.wait(lock, [this] { return open_ || failing_; });
    if (failing_) return ResourceExhaustedError("fallocate: No space left on device");
    return {};
  }
  void Open() {
    const std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  void Fail() {
    const std::lock_guard lock(mutex_);
    failing_ = true;
    changed_.notify_all();
  }

 private:
  const std::uint64_t free_bytes_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
  bool failing_ = false;
};

// A pool of one 16-page segment reserved in the background, 4 pages a step, through `step`;
// the result of its done callback lands in `done`.
std::unique_ptr<CpuPool> BackgroundPool(GatedReserveStep& step, std::promise<Status>& done) {
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(
      CpuPool::Options{.capacity_bytes = 16 * kPage,
                       .shm_prefix = TestPrefix(),
                       .reserve_at_create_bytes = 0,
                       .reserve_chunk_bytes = 4 * kPage,
                       .reserve_step = [&step](const ShmSegment&, std::uint64_t offset,
                                               std::uint64_t) { return step(offset); }});
  EXPECT_OK(pool);
  if (!pool) return nullptr;
  EXPECT_OK((*pool)->StartReserving(
      {.done = [&done](Status status) { done.set_value(std::move(status)); }}));
  return std::move(*pool);
}

// Waits until `pool` reports `bytes` reserved.
void WaitForReserved(const CpuPool& pool, std::uint64_t bytes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.Usage().reserved_bytes < bytes && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(pool.Usage().reserved_bytes, bytes);
}

TEST(CpuPoolReserveTest, WhileReservingAllocationsBeyondTheReservedPartAreUnavailable) {
  GatedReserveStep step(4 * kPage, 1);
  std::promise<Status> done;
  std::unique_ptr<CpuPool> pool = BackgroundPool(step, done);
  ASSERT_NE(pool, nullptr);
  WaitForReserved(*pool, 4 * kPage);
  EXPECT_TRUE(pool->reserving());
  ASSERT_OK_AND_ASSIGN(const PoolRange first, pool->Allocate(4 * kPage));
  EXPECT_EQ(first.offset, 0u);
  EXPECT_ERROR(pool->Allocate(kPage), StatusCode::kUnavailable,
               {"pool cpu is still reserving its memory", "16.0 of 64.0 KiB reserved",
                "(16384 of 65536 bytes)", "retry"});
  // Larger than the segment: it never fits, reserving or not.
  EXPECT_ERROR(pool->Allocate(17 * kPage), StatusCode::kResourceExhausted);

  step.Open();
  EXPECT_OK(done.get_future().get());
  EXPECT_FALSE(pool->reserving());
  EXPECT_EQ(pool->Usage().reserved_bytes, 16 * kPage);
  ASSERT_OK_AND_ASSIGN(const PoolRange rest, pool->Allocate(12 * kPage));
  EXPECT_EQ(rest.offset, 4 * kPage);
}

TEST(CpuPoolReserveTest, AFailedReservationLeavesAWorkingSmallerPool) {
  GatedReserveStep step(4 * kPage, 2);
  std::promise<Status> done;
  std::unique_ptr<CpuPool> pool = BackgroundPool(step, done);
  ASSERT_NE(pool, nullptr);
  WaitForReserved(*pool, 8 * kPage);
  step.Fail();
  EXPECT_ERROR(done.get_future().get(), StatusCode::kResourceExhausted,
               {"pool cpu: segment 1", "No space left on device"});
  EXPECT_FALSE(pool->reserving());
  const PoolUsage usage = pool->Usage();
  EXPECT_EQ(usage.reserved_bytes, 8 * kPage);
  EXPECT_EQ(usage.capacity_bytes, 16 * kPage);
  EXPECT_EQ(usage.largest_free_bytes, 8 * kPage);
  ASSERT_OK(pool->Allocate(8 * kPage));
  // Reservation is over: what does not fit is exhausted, not worth a retry.
  EXPECT_ERROR(pool->Allocate(kPage), StatusCode::kResourceExhausted, {"no free range"});
}

TEST(CpuPoolReserveTest, StoppingEndsTheReservationWithoutCallingDone) {
  GatedReserveStep step(4 * kPage, 1);
  std::promise<Status> done;
  std::unique_ptr<CpuPool> pool = BackgroundPool(step, done);
  ASSERT_NE(pool, nullptr);
  WaitForReserved(*pool, 4 * kPage);
  std::thread opener([&step] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    step.Open();  // Lets the step in progress end; StopReserving waits for it.
  });
  pool->StopReserving();
  opener.join();
  EXPECT_LE(pool->Usage().reserved_bytes, 8 * kPage);
  EXPECT_EQ(done.get_future().wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
}

TEST(CpuPoolReserveTest, BackgroundReservationBacksEverySegmentWithPages) {
  const std::uint64_t capacity = 8 * kMiB;
  Result<std::unique_ptr<CpuPool>> created =
      CpuPool::Create(CpuPool::Options{.capacity_bytes = capacity,
                                       .segment_bytes = 2 * kMiB,
                                       .shm_prefix = TestPrefix(),
                                       .reserve_at_create_bytes = 0,
                                       .reserve_chunk_bytes = kMiB,
                                       .reserve_threads = 2});
  ASSERT_OK(created);
  CpuPool& pool = **created;
  struct stat info{};
  ASSERT_EQ(::stat(ShmPath(*pool.SegmentName(1)).c_str(), &info), 0);
  EXPECT_EQ(info.st_blocks, 0) << "Create reserved pages it should have left to the threads";
  EXPECT_EQ(pool.Usage().reserved_bytes, 0u);
  EXPECT_ERROR(pool.Allocate(kPage), StatusCode::kUnavailable);

  std::promise<Status> done;
  std::atomic<std::uint64_t> last_progress = 0;
  ASSERT_OK(pool.StartReserving(
      {.progress = [&last_progress](std::uint64_t reserved,
                                    std::uint64_t) { last_progress = reserved; },
       .done = [&done](Status status) { done.set_value(std::move(status)); }}));
  ASSERT_OK(done.get_future().get());
  EXPECT_EQ(last_progress.load(), capacity);
  EXPECT_EQ(pool.Usage().reserved_bytes, capacity);
  for (std::uint64_t segment = 1; segment <= 4; ++segment) {
    ASSERT_EQ(::stat(ShmPath(*pool.SegmentName(segment)).c_str(), &info), 0);
    EXPECT_GE(static_cast<std::uint64_t>(info.st_blocks) * 512, 2 * kMiB) << segment;
  }
  EXPECT_OK(pool.Allocate(2 * kMiB));
}

TEST(CpuPoolReserveTest, CreateReservesTheFirstBytesAskedForAndServesThemAtOnce) {
  Result<std::unique_ptr<CpuPool>> created =
      CpuPool::Create(CpuPool::Options{.capacity_bytes = 8 * kMiB,
                                       .segment_bytes = 2 * kMiB,
                                       .shm_prefix = TestPrefix(),
                                       .reserve_at_create_bytes = 3 * kMiB,
                                       .reserve_chunk_bytes = kMiB});
  ASSERT_OK(created);
  CpuPool& pool = **created;
  EXPECT_TRUE(pool.reserving());
  EXPECT_EQ(pool.Usage().reserved_bytes, 3 * kMiB);
  ASSERT_OK_AND_ASSIGN(const PoolRange whole, pool.Allocate(2 * kMiB));
  ASSERT_OK_AND_ASSIGN(const PoolRange part, pool.Allocate(kMiB));
  EXPECT_EQ(whole.segment_id, 1u);
  EXPECT_EQ(part.segment_id, 2u);
  EXPECT_ERROR(pool.Allocate(kPage), StatusCode::kUnavailable, {"3.0 of 8.0 MiB reserved"});
}

TEST(CpuPoolReserveTest, FormatPartOfPicksTheUnitOfTheWhole) {
  EXPECT_EQ(FormatPartOf(3 * kGiB, 8 * kGiB), "3.0 of 8.0 GiB");
  EXPECT_EQ(FormatPartOf(512 * kMiB, 2 * kGiB), "0.5 of 2.0 GiB");
  EXPECT_EQ(FormatPartOf(0, 64 * kMiB), "0.0 of 64.0 MiB");
  EXPECT_EQ(FormatPartOf(kPage, 16 * kPage), "4.0 of 64.0 KiB");
}

TEST(CpuPoolThreadTest, ConcurrentAllocateAndFreeLeaveNothingBehind) {
  Result<std::unique_ptr<CpuPool>> created = CpuPool::Create(CpuPool::Options{
      .capacity_bytes = 8 * kMiB, .segment_bytes = 2 * kMiB, .shm_prefix = TestPrefix()});
  ASSERT_OK(created);
  CpuPool& pool = **created;
  // Each thread stamps its ranges through real mappings; an overlap between two threads'
  // ranges would show up as a foreign stamp.
  std::vector<std::unique_ptr<Mapping>> mappings;
  for (std::uint64_t id = 1; id <= pool.segment_count(); ++id) {
    Result<SegmentAccess> access = pool.OpenSegment(id, /*writable=*/true);
    ASSERT_OK(access);
    mappings.push_back(
        std::make_unique<Mapping>(access->fd.get(), access->segment_size, PROT_READ | PROT_WRITE));
    ASSERT_TRUE(mappings.back()->ok());
  }

  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;
  std::atomic<int> overlaps = 0;
  std::atomic<int> exhausted = 0;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(1000 + t));
      std::uniform_int_distribution<std::uint64_t> size_of(1, 64 * 1024);
      std::vector<std::pair<PoolRange, std::uint64_t>> held;  // Range and its stamp.
      // Both ends of the reserved pages, so that any overlap touches a stamp.
      auto first_word = [&](const PoolRange& range) {
        return reinterpret_cast<std::uint64_t*>(mappings[range.segment_id - 1]->bytes() +
                                                range.offset);
      };
      auto last_word = [&](const PoolRange& range) {
        const std::uint64_t reserved = (range.size + kPage - 1) / kPage * kPage;
        return reinterpret_cast<std::uint64_t*>(mappings[range.segment_id - 1]->bytes() +
                                                range.offset + reserved - 8);
      };
      auto stamped = [&](const PoolRange& range, std::uint64_t stamp) {
        return *first_word(range) == stamp && *last_word(range) == stamp;
      };
      for (int i = 0; i < kIterations; ++i) {
        if (held.size() < 4 && random() % 2 == 0) {
          Result<PoolRange> range = pool.Allocate(size_of(random));
          if (!range) {
            ++exhausted;
            continue;
          }
          const std::uint64_t stamp = (static_cast<std::uint64_t>(t) << 32) | i;
          *first_word(*range) = stamp;
          *last_word(*range) = stamp;
          held.emplace_back(*range, stamp);
        } else if (!held.empty()) {
          const std::size_t index = random() % held.size();
          if (!stamped(held[index].first, held[index].second)) ++overlaps;
          pool.Free(held[index].first);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(index));
        }
      }
      for (const auto& [range, stamp] : held) {
        if (!stamped(range, stamp)) ++overlaps;
        pool.Free(range);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(overlaps.load(), 0);
  // 8 threads x 4 ranges x 64 KiB cannot exhaust 4 segments of 2 MiB, however fragmented.
  EXPECT_EQ(exhausted.load(), 0);
  const PoolUsage usage = pool.Usage();
  EXPECT_EQ(usage.used_bytes, 0u);
  EXPECT_EQ(usage.allocation_count, 0u);
  EXPECT_EQ(usage.largest_free_bytes, 2 * kMiB);
}

TEST(DefaultCpuPoolCapacityTest, IsAnEighthOfRamCappedByHalfOfFreeShm) {
  EXPECT_EQ(DefaultCpuPoolCapacityFor(64 * kGiB, 100 * kGiB), 8 * kGiB);
  EXPECT_EQ(DefaultCpuPoolCapacityFor(64 * kGiB, 10 * kGiB), 5 * kGiB);
  EXPECT_EQ(DefaultCpuPoolCapacityFor(64 * kGiB, std::nullopt), 8 * kGiB);
  EXPECT_EQ(DefaultCpuPoolCapacityFor(256 * kMiB, 100 * kGiB), 64 * kMiB);  // Minimum.
  EXPECT_EQ(DefaultCpuPoolCapacityFor(64 * kGiB, 0), 64 * kMiB);
  EXPECT_EQ(DefaultCpuPoolCapacityFor(8 * 101 * kMiB, std::nullopt), 100 * kMiB);
  EXPECT_EQ(DefaultCpuPoolCapacityFor(64 * kGiB, 2 * 101 * kMiB + 2), 100 * kMiB);

  const std::uint64_t here = DefaultCpuPoolCapacity();
  EXPECT_GE(here, 64 * kMiB);
  EXPECT_EQ(here % (2 * kMiB), 0u);
}

}  // namespace
}  // namespace hurray::daemon
