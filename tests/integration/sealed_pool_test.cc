// The sealed pool of a real hurrayd: each buffer its own memfd, sealed against writes at
// publish, so that neither the producer (with the read-write descriptor it was granted)
// nor another process of the daemon's uid (opening the daemon's memfds again through
// /proc/PID/fd/N) can change a published byte; a publish with a writable mapping left is
// refused, and the client library unmaps its own before publishing.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "hurray/descriptor_codec.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "integration_test.h"
#include "raw_session.h"
#include "test_tensors.h"
#include "testing/daemon_stats.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

constexpr std::uint64_t kSeed = 14;
constexpr std::uint64_t kBytes = 3 * 4096 + 100;  // Not a whole number of pages.

// The memfds of the sealed pool that process `pid` holds: one "/proc/PID/fd/N" path for
// each memfd. A memfd is counted once however many descriptors the daemon has to it: a reply
// that grants one holds a second descriptor until the daemon has sent it and closed it.
std::vector<std::string> SealedMemfdsOf(pid_t pid) {
  std::vector<std::string> paths;
  std::set<ino_t> seen;
  const std::string directory = "/proc/" + std::to_string(pid) + "/fd";
  DIR* listing = ::opendir(directory.c_str());
  if (listing == nullptr) return paths;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string path = directory + "/" + entry->d_name;
    std::array<char, 256> target{};
    const ssize_t length = ::readlink(path.c_str(), target.data(), target.size() - 1);
    struct stat status{};
    if (length > 0 &&
        std::string_view(target.data(), static_cast<std::size_t>(length))
            .starts_with("/memfd:hurray-sealed") &&
        ::stat(path.c_str(), &status) == 0 && seen.insert(status.st_ino).second) {
      paths.push_back(path);
    }
  }
  ::closedir(listing);
  return paths;
}

// The lines of this process's /proc/self/maps that map a sealed pool's memfd.
std::vector<std::string> SealedMappingsOfThisProcess() {
  std::vector<std::string> lines;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/memfd:hurray-sealed") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// Why `fd` could be written or mapped writable, or "" when the kernel refused both with
// EPERM (the memfd is sealed).
std::string WhyWritable(int fd, std::uint64_t size) {
  const char byte = 'x';
  if (::pwrite(fd, &byte, 1, 0) != -1) return "pwrite succeeded";
  if (errno != EPERM) return std::string("pwrite failed with ") + std::strerror(errno);
  void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped != MAP_FAILED) {
    ::munmap(mapped, size);
    return "mmap(PROT_WRITE, MAP_SHARED) succeeded";
  }
  if (errno != EPERM) return std::string("mmap failed with ") + std::strerror(errno);
  if (::ftruncate(fd, 0) != -1) return "ftruncate succeeded";
  return "";
}

class SealedPoolTest : public RawGrpcTest {
 protected:
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = RawGrpcTest::daemon_options();
    options.settings.emplace_back("sealed_pool.capacity = 1048576");
    return options;
  }

  // Allocates kBytes in the sealed pool for `session` through gRPC.
  v1::AllocateResponse AllocateRaw(const RawSession& session) {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() = DescriptorToProto(MakeByteTensor(kBytes));
    request.set_pool("sealed");
    v1::AllocateResponse response;
    const grpc::Status status =
        stub_->Allocate(RawContext(session.token()).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  grpc::Status PublishRaw(const RawSession& session, std::uint64_t allocation_id,
                          const std::string& name) {
    v1::PublishRequest request;
    request.set_allocation_id(allocation_id);
    request.set_name(name);
    v1::PublishResponse response;
    return stub_->Publish(RawContext(session.token()).get(), request, &response);
  }

  // A read-write descriptor of `segment`, granted on `session`'s socket.
  static UniqueFd GrantWritable(RawSession& session, std::uint64_t segment) {
    v1::SessionMessage message;
    message.set_request_id(1);
    message.mutable_map_segment()->set_segment_id(segment);
    message.mutable_map_segment()->set_writable(true);
    EXPECT_OK(session.Send(message));
    UniqueFd fd;
    auto reply = session.Receive(&fd);
    EXPECT_OK(reply);
    if (reply) {
      EXPECT_TRUE(reply->has_segment_granted()) << reply->DebugString();
      EXPECT_EQ(reply->segment_granted().kind(), v1::SEGMENT_KIND_SEALED_MEMFD);
    }
    return fd;
  }

  // Acquires `name` through the fixture's client and checks its bytes are FillBuffer's.
  void ExpectPublishedBytes(const std::string& name) {
    ASSERT_OK_AND_ASSIGN(TensorView view, client().Acquire(name));
    ASSERT_EQ(view.buffer_count(), 1u);
    EXPECT_EQ(CheckBuffer(view.buffer(0), kSeed, 0), "");
  }

  std::uint64_t SealedUsedBytes() {
    auto stats = ::hurray::testing::FetchDaemonStats(socket());
    if (!stats) return UINT64_MAX;
    auto pool = ::hurray::testing::FindPool(*stats, "sealed");
    return pool ? pool->used_bytes() : UINT64_MAX;
  }
};

TEST_F(SealedPoolTest, ProducerCannotWriteThroughItsOwnDescriptorAfterPublish) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  const v1::AllocateResponse allocated = AllocateRaw(*session);
  ASSERT_EQ(allocated.buffers_size(), 1);
  const v1::BufferLocation& location = allocated.buffers(0);
  EXPECT_EQ(location.offset(), 0u);
  EXPECT_EQ(location.segment_size(), 4 * 4096u);
  UniqueFd fd = GrantWritable(*session, location.segment_id());
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(::fcntl(fd.get(), F_GETFL) & O_ACCMODE, O_RDWR);
  {
    void* mapped =
        ::mmap(nullptr, location.segment_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    ASSERT_NE(mapped, MAP_FAILED) << std::strerror(errno);
    FillBuffer({static_cast<std::byte*>(mapped), kBytes}, kSeed, 0);
    ::munmap(mapped, location.segment_size());
  }
  EXPECT_EQ(WhyWritable(fd.get(), location.segment_size()), "pwrite succeeded")
      << "before publish the producer's descriptor writes";
  // That probe wrote 'x' at offset 0: put the pattern's byte back.
  std::array<std::byte, 1> first{};
  FillBuffer(first, kSeed, 0);
  ASSERT_EQ(::pwrite(fd.get(), first.data(), 1, 0), 1);

  const grpc::Status published = PublishRaw(*session, allocated.allocation_id(), "sealed/own");
  ASSERT_TRUE(published.ok()) << published.error_message();

  // The same descriptor, still open in the producer: every write is refused.
  EXPECT_EQ(WhyWritable(fd.get(), location.segment_size()), "");
  // And the daemon grants no new read-write one.
  UniqueFd again;
  v1::SessionMessage message;
  message.set_request_id(2);
  message.mutable_map_segment()->set_segment_id(location.segment_id());
  message.mutable_map_segment()->set_writable(true);
  ASSERT_OK(session->Send(message));
  auto reply = session->Receive(&again);
  ASSERT_OK(reply);
  EXPECT_TRUE(reply->has_error()) << reply->DebugString();
  EXPECT_FALSE(again.valid());
  ExpectPublishedBytes("sealed/own");

  fd.Reset();
  session.reset();
  ASSERT_OK(client().Delete("sealed/own"));
  EXPECT_TRUE(Eventually([&] { return SealedUsedBytes() == 0; }));
  ExpectStillServingWithNothingLeaked();
}

TEST_F(SealedPoolTest, SameUidProcessReopeningTheDaemonsMemfdCannotWrite) {
  ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client().Allocate(MakeByteTensor(kBytes), "sealed"));
  FillBuffer(tensor.buffer(0), kSeed, 0);
  // Before publish, the daemon's memfd opened again read-write by this process (the
  // daemon's uid) is writable: the check below is not vacuous.
  const std::vector<std::string> before = SealedMemfdsOf(daemon().pid());
  ASSERT_EQ(before.size(), 1u) << "the daemon should hold one sealed memfd";
  {
    UniqueFd reopened(::open(before[0].c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(reopened.valid()) << before[0] << ": " << std::strerror(errno);
    struct stat status{};
    ASSERT_EQ(::fstat(reopened.get(), &status), 0);
    EXPECT_EQ(status.st_mode & 0777, 0600u);
  }
  ASSERT_OK(tensor.Publish("sealed/proc"));

  const std::vector<std::string> after = SealedMemfdsOf(daemon().pid());
  ASSERT_EQ(after.size(), 1u);
  UniqueFd reopened(::open(after[0].c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(reopened.valid()) << after[0] << ": " << std::strerror(errno);
  EXPECT_EQ(WhyWritable(reopened.get(), 4 * 4096), "") << after[0];
  EXPECT_EQ(::fcntl(reopened.get(), F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_SEAL),
            F_SEAL_WRITE | F_SEAL_SEAL);
  ExpectPublishedBytes("sealed/proc");

  reopened.Reset();
  ASSERT_OK(client().Delete("sealed/proc"));
  EXPECT_TRUE(Eventually([&] { return SealedMemfdsOf(daemon().pid()).empty(); }));
  ExpectStillServingWithNothingLeaked();
}

TEST_F(SealedPoolTest, ClientUnmapsItsWritableMappingAtPublishAndKeepsNoMapping) {
  ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client().Allocate(MakeByteTensor(kBytes), "sealed"));
  FillBuffer(tensor.buffer(0), kSeed, 0);
  const std::vector<std::string> writing = SealedMappingsOfThisProcess();
  ASSERT_EQ(writing.size(), 1u);
  EXPECT_NE(writing[0].find(" rw-s "), std::string::npos) << writing[0];
  ASSERT_OK(tensor.Publish("sealed/client"));
  EXPECT_EQ(SealedMappingsOfThisProcess(), std::vector<std::string>());
  {
    ASSERT_OK_AND_ASSIGN(TensorView view, client().Acquire("sealed/client"));
    EXPECT_EQ(CheckBuffer(view.buffer(0), kSeed, 0), "");
    const std::vector<std::string> reading = SealedMappingsOfThisProcess();
    ASSERT_EQ(reading.size(), 1u);
    EXPECT_NE(reading[0].find(" r--s "), std::string::npos) << reading[0];
  }
  // The view's mapping ended with it: no cache keeps a deleted tensor's memory alive.
  EXPECT_EQ(SealedMappingsOfThisProcess(), std::vector<std::string>());
  ASSERT_OK(client().Delete("sealed/client"));
  EXPECT_TRUE(Eventually([&] { return SealedUsedBytes() == 0; }));
  ExpectStillServingWithNothingLeaked();
}

TEST_F(SealedPoolTest, PublishWithAWritableMappingLeftIsRefusedUntilItIsUnmapped) {
  ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client().Allocate(MakeByteTensor(kBytes), "sealed"));
  FillBuffer(tensor.buffer(0), kSeed, 0);
  // A second writable mapping of the same memory that the client knows nothing of (as a
  // forked child would hold): mremap of old size 0 duplicates a shared mapping.
  const std::size_t size = 4 * 4096;
  void* duplicate = ::mremap(tensor.buffer(0).data(), 0, size, MREMAP_MAYMOVE);
  ASSERT_NE(duplicate, MAP_FAILED) << std::strerror(errno);

  auto refused = tensor.Publish("sealed/left");
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.error().message().find("buffer 0: segment"), std::string::npos)
      << refused.error().message();
  EXPECT_NE(refused.error().message().find("still has a writable mapping"), std::string::npos)
      << refused.error().message();
  EXPECT_FALSE(client().Acquire("sealed/left").has_value());

  // The leftover mapping still writes the (unsealed) memory; once it is gone, publish works.
  static_cast<std::byte*>(duplicate)[0] = std::byte{0x5a};
  std::array<std::byte, 1> first{};
  FillBuffer(first, kSeed, 0);
  static_cast<std::byte*>(duplicate)[0] = first[0];
  ASSERT_EQ(::munmap(duplicate, size), 0);
  ASSERT_OK(tensor.Publish("sealed/left"));
  ExpectPublishedBytes("sealed/left");
  ASSERT_OK(client().Delete("sealed/left"));
  ExpectStillServingWithNothingLeaked();
}

TEST_F(SealedPoolTest, StatsShowTheSealedPoolAndItsCapacityBoundsAllocations) {
  auto stats = ::hurray::testing::FetchDaemonStats(socket());
  ASSERT_OK(stats);
  ASSERT_OK_AND_ASSIGN(const v1::PoolStats pool, ::hurray::testing::FindPool(*stats, "sealed"));
  EXPECT_EQ(pool.kind(), "sealed");
  EXPECT_EQ(pool.capacity_bytes(), 1048576u);
  auto too_big = client().Allocate(MakeByteTensor(1048576 + 1), "sealed");
  ASSERT_FALSE(too_big.has_value());
  EXPECT_EQ(too_big.error().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.error().message().find("pool sealed"), std::string::npos)
      << too_big.error().message();
}

}  // namespace
}  // namespace hurray::integration
