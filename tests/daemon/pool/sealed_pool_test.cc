#include "pool/sealed_pool.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kCapacity = 64 * 4096;

std::unique_ptr<SealedPool> MakePool() {
  auto pool = SealedPool::Create({.capacity_bytes = kCapacity});
  EXPECT_OK(pool);
  return pool ? std::move(*pool) : nullptr;
}

// Maps `fd` read-write (MAP_SHARED); MAP_FAILED on error.
void* MapWritable(int fd, std::uint64_t size) {
  return ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

TEST(SealedPoolTest, CreateRefusesAZeroCapacityOrFirstSegmentId) {
  auto no_capacity = SealedPool::Create({.capacity_bytes = 0});
  ASSERT_FALSE(no_capacity.has_value());
  EXPECT_EQ(no_capacity.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_capacity.error().message().find("capacity_bytes 0"), std::string::npos);
  auto no_id = SealedPool::Create({.capacity_bytes = kCapacity, .first_segment_id = 0});
  ASSERT_FALSE(no_id.has_value());
  EXPECT_NE(no_id.error().message().find("first_segment_id 0"), std::string::npos);
}

TEST(SealedPoolTest, EachAllocationIsASegmentOfItsOwnRoundedToAPage) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange first, pool->Allocate(100));
  ASSERT_OK_AND_ASSIGN(const PoolRange second, pool->Allocate(4096));
  EXPECT_EQ(first.segment_id, kFirstSealedSegmentId);
  EXPECT_EQ(second.segment_id, kFirstSealedSegmentId + 1);
  EXPECT_EQ(first.offset, 0u);
  EXPECT_EQ(first.size, 100u);
  EXPECT_EQ(pool->SegmentSize(first.segment_id), 4096u);
  EXPECT_EQ(pool->SegmentSize(second.segment_id), 4096u);
  const PoolUsage usage = pool->Usage();
  EXPECT_EQ(usage.kind, "sealed");
  EXPECT_EQ(usage.used_bytes, 2 * 4096u);
  EXPECT_EQ(usage.segment_count, 2u);
  pool->Free(first);
  EXPECT_FALSE(pool->SegmentSize(first.segment_id).has_value());
  // Ids are never reused.
  ASSERT_OK_AND_ASSIGN(const PoolRange third, pool->Allocate(1));
  EXPECT_EQ(third.segment_id, kFirstSealedSegmentId + 2);
}

TEST(SealedPoolTest, CapacityBoundsTheLiveSegmentsAndFreeingGivesItBack) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange most, pool->Allocate(kCapacity - 4096));
  auto refused = pool->Allocate(4097);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.error().message().find("pool sealed: 8192 more bytes would exceed"),
            std::string::npos)
      << refused.error().message();
  ASSERT_OK(pool->Allocate(4096));
  pool->Free(most);
  EXPECT_OK(pool->Allocate(kCapacity - 4096));
  auto zero = pool->Allocate(0);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().code(), StatusCode::kInvalidArgument);
}

TEST(SealedPoolTest, MaxSegmentsBoundsTheDescriptorsItHoldsWhateverItsCapacity) {
  auto pool = SealedPool::Create({.capacity_bytes = kCapacity, .max_segments = 3});
  ASSERT_OK(pool);
  std::vector<PoolRange> live;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(const PoolRange range, (*pool)->Allocate(1));
    live.push_back(range);
  }
  auto refused = (*pool)->Allocate(1);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.error().message().find("pool sealed: max_buffers 3 live buffers reached"),
            std::string::npos)
      << refused.error().message();
  (*pool)->Free(live.front());
  EXPECT_OK((*pool)->Allocate(1));
  auto none = SealedPool::Create({.capacity_bytes = kCapacity, .max_segments = 0});
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kInvalidArgument);
}

TEST(SealedPoolTest, ReadOnlyDescriptorsCannotBeMappedWritable) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(4096));
  ASSERT_OK_AND_ASSIGN(const SegmentAccess access, pool->OpenSegment(range.segment_id, false));
  EXPECT_EQ(access.kind, SegmentKind::kSealedMemfd);
  EXPECT_EQ(::fcntl(access.fd.get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(MapWritable(access.fd.get(), 4096), MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  struct stat status{};
  ASSERT_EQ(::fstat(access.fd.get(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  EXPECT_EQ(status.st_size, 4096);
  auto unknown = pool->OpenSegment(7, false);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code(), StatusCode::kNotFound);
}

TEST(SealedPoolTest, SealIsRefusedWhileAWritableMappingRemains) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(4096));
  ASSERT_OK_AND_ASSIGN(const SegmentAccess access, pool->OpenSegment(range.segment_id, true));
  void* mapped = MapWritable(access.fd.get(), 4096);
  ASSERT_NE(mapped, MAP_FAILED) << std::strerror(errno);
  static_cast<char*>(mapped)[0] = 'h';
  const Status refused = pool->Seal(range);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.error().message(),
            fmt::format("segment {} still has a writable mapping; unmap it before publishing",
                        range.segment_id));
  // Not sealed: a writable descriptor is still granted.
  EXPECT_OK(pool->OpenSegment(range.segment_id, true));
  ASSERT_EQ(::munmap(mapped, 4096), 0);
  EXPECT_OK(pool->Seal(range));
}

TEST(SealedPoolTest, AfterSealNoDescriptorCanWriteResizeOrMapWritable) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(4096));
  ASSERT_OK_AND_ASSIGN(const SegmentAccess producer, pool->OpenSegment(range.segment_id, true));
  ASSERT_EQ(::pwrite(producer.fd.get(), "h", 1, 0), 1);
  // Resizing is sealed from the start.
  EXPECT_EQ(::ftruncate(producer.fd.get(), 8192), -1);
  EXPECT_EQ(errno, EPERM);
  ASSERT_OK(pool->Seal(range));
  EXPECT_OK(pool->Seal(range));  // Again: nothing to do.

  EXPECT_EQ(::pwrite(producer.fd.get(), "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(MapWritable(producer.fd.get(), 4096), MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::ftruncate(producer.fd.get(), 0), -1);
  EXPECT_EQ(::fcntl(producer.fd.get(), F_ADD_SEALS, F_SEAL_WRITE), -1) << "F_SEAL_SEAL missing";
  // Opened again through /proc: the seals belong to the memory, not to a descriptor.
  const std::string path = fmt::format("/proc/self/fd/{}", producer.fd.get());
  UniqueFd reopened(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(reopened.valid()) << std::strerror(errno);
  EXPECT_EQ(::pwrite(reopened.get(), "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);

  auto writable = pool->OpenSegment(range.segment_id, true);
  ASSERT_FALSE(writable.has_value());
  EXPECT_EQ(writable.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(writable.error().message().find("is sealed"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(const SegmentAccess reader, pool->OpenSegment(range.segment_id, false));
  char byte = 0;
  ASSERT_EQ(::pread(reader.fd.get(), &byte, 1, 0), 1);
  EXPECT_EQ(byte, 'h');
}

TEST(SealedPoolTest, FreeOfAnUnknownRangeIsIgnored) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  ASSERT_OK_AND_ASSIGN(const PoolRange range, pool->Allocate(4096));
  pool->Free(PoolRange{.segment_id = range.segment_id + 5, .offset = 0, .size = 1});
  pool->Free(PoolRange{.segment_id = range.segment_id, .offset = 4096, .size = 1});
  EXPECT_EQ(pool->Usage().used_bytes, 4096u);
  pool->Free(range);
  pool->Free(range);  // Twice: logged and ignored.
  EXPECT_EQ(pool->Usage().used_bytes, 0u);
}

}  // namespace
}  // namespace hurray::daemon
