#include "hurray/file_reads.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "testing/safetensors_writer.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

using testing::PatternBytes;

// A memfd holding `bytes`, standing in for a file; closed with the fixture.
class FileReadsTest : public ::testing::Test {
 protected:
  void Write(const std::vector<std::byte>& bytes) {
    contents_ = bytes;
    fd_ = ::memfd_create("file_reads_test", MFD_CLOEXEC);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(::write(fd_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }

  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] std::vector<std::byte> Expected(std::uint64_t offset, std::size_t size) const {
    return {contents_.begin() + static_cast<std::ptrdiff_t>(offset),
            contents_.begin() + static_cast<std::ptrdiff_t>(offset + size)};
  }

  int fd_ = -1;
  std::vector<std::byte> contents_;
};

TEST_F(FileReadsTest, ManyRangesLandInTheirOwnDestinations) {
  Write(PatternBytes(1 << 20, 7));
  std::mt19937_64 random(42);
  std::vector<std::vector<std::byte>> destinations(200);
  std::vector<FileRange> ranges;
  for (auto& destination : destinations) {
    const std::uint64_t offset = random() % (1 << 20);
    destination.resize(std::min<std::uint64_t>(random() % 20000, (1 << 20) - offset));
    ranges.push_back({offset, destination});
  }
  ASSERT_OK(ReadFileRanges(fd_, "model.bin", ranges, {.parallelism = 4, .chunk_bytes = 4096}));
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(destinations[i], Expected(ranges[i].file_offset, destinations[i].size())) << i;
  }
}

TEST_F(FileReadsTest, RangeLargerThanAChunkIsSplitAndReadWhole) {
  Write(PatternBytes(100'000, 8));
  std::vector<std::byte> destination(10 * 1000 + 1);
  const FileRange range{.file_offset = 333, .destination = destination};
  ASSERT_OK(ReadFileRanges(fd_, "model.bin", std::span(&range, 1),
                           {.parallelism = 3, .chunk_bytes = 1000}));
  EXPECT_EQ(destination, Expected(333, destination.size()));
}

TEST_F(FileReadsTest, DestinationInSharedMemoryAtAnUnalignedAddressIsFilled) {
  Write(PatternBytes(3 << 20, 9));
  const std::size_t mapping_size = 4 << 20;
  const int shm = ::memfd_create("destination", MFD_CLOEXEC);
  ASSERT_EQ(::ftruncate(shm, mapping_size), 0);
  void* mapping = ::mmap(nullptr, mapping_size, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
  ::close(shm);
  ASSERT_NE(mapping, MAP_FAILED);
  const std::span destination(static_cast<std::byte*>(mapping) + 100, 3 << 20);
  const FileRange range{.file_offset = 0, .destination = destination};
  EXPECT_OK(ReadFileRanges(fd_, "model.bin", std::span(&range, 1), {.chunk_bytes = 1 << 20}));
  EXPECT_TRUE(std::equal(destination.begin(), destination.end(), contents_.begin()));
  ::munmap(mapping, mapping_size);
}

TEST_F(FileReadsTest, ReadPastTheEndIsDataLossNamingTheOffset) {
  Write(PatternBytes(10'000, 10));
  std::vector<std::byte> destination(4096);
  const FileRange range{.file_offset = 8000, .destination = destination};
  EXPECT_ERROR(ReadFileRanges(fd_, "short.safetensors", std::span(&range, 1)),
               StatusCode::kDataLoss,
               {"short.safetensors", "unexpected end of file at byte 10000"});
}

TEST_F(FileReadsTest, ShortFileFailsWhicheverWorkerMeetsTheEnd) {
  Write(PatternBytes(50'000, 11));
  std::vector<std::byte> destination(100'000);
  const FileRange range{.file_offset = 0, .destination = destination};
  EXPECT_ERROR(ReadFileRanges(fd_, "short.safetensors", std::span(&range, 1),
                              {.parallelism = 4, .chunk_bytes = 4096}),
               StatusCode::kDataLoss, {"unexpected end of file at byte"});
}

TEST_F(FileReadsTest, OsErrorNamesTheCall) {
  std::vector<std::byte> destination(16);
  const FileRange range{.file_offset = 0, .destination = destination};
  EXPECT_ERROR(ReadFileRanges(-1, "gone.safetensors", std::span(&range, 1)),
               StatusCode::kInvalidArgument, {"pread gone.safetensors", "Bad file descriptor"});
}

TEST_F(FileReadsTest, ZeroChunkBytesIsRefused) {
  Write(PatternBytes(16, 12));
  std::vector<std::byte> destination(16);
  const FileRange range{.file_offset = 0, .destination = destination};
  EXPECT_ERROR(ReadFileRanges(fd_, "model.bin", std::span(&range, 1), {.chunk_bytes = 0}),
               StatusCode::kInvalidArgument, {"chunk_bytes"});
}

TEST_F(FileReadsTest, ProgressRunsOnTheCallingThreadAndEndsAtTheTotal) {
  Write(PatternBytes(1 << 20, 13));
  std::vector<std::byte> first(600'000);
  std::vector<std::byte> second(400'000);
  const std::vector<FileRange> ranges = {{0, first}, {600'000, second}};
  std::vector<std::uint64_t> reports;
  bool on_calling_thread = true;
  const std::thread::id caller = std::this_thread::get_id();
  ASSERT_OK(
      ReadFileRanges(fd_, "model.bin", ranges,
                     {.parallelism = 2, .chunk_bytes = 65536, .progress = [&](std::uint64_t done) {
                        on_calling_thread &= std::this_thread::get_id() == caller;
                        reports.push_back(done);
                      }}));
  EXPECT_TRUE(on_calling_thread);
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back(), 1'000'000U);
  EXPECT_TRUE(std::ranges::is_sorted(reports));
}

TEST_F(FileReadsTest, NoRangesStillReportProgressOnce) {
  Write(PatternBytes(16, 14));
  std::vector<std::uint64_t> reports;
  ASSERT_OK(ReadFileRanges(fd_, "model.bin", {},
                           {.progress = [&](std::uint64_t done) { reports.push_back(done); }}));
  EXPECT_EQ(reports, std::vector<std::uint64_t>{0});
}

}  // namespace
}  // namespace hurray
