// The session socket, spoken by hand: descriptors are granted read-only to consumers and
// only for segments the session holds something in; malformed traffic ends that
// connection (with an INVALID_ARGUMENT reply where one can be sent) and nothing else.
#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "hurray/descriptor_codec.h"
#include "hurray/ipc/frame.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "integration_test.h"
#include "raw_session.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class SessionSocketTest : public RawGrpcTest {
 protected:
  static v1::SessionMessage MapSegment(std::uint64_t request_id, std::uint64_t segment_id,
                                       bool writable) {
    v1::SessionMessage message;
    message.set_request_id(request_id);
    message.mutable_map_segment()->set_segment_id(segment_id);
    message.mutable_map_segment()->set_writable(writable);
    return message;
  }
};

TEST_F(SessionSocketTest, ConsumerGetsOnlyAReadOnlyDescriptorAndOnlyWhileItHoldsALease) {
  EXPECT_EQ(RunAgent({"produce", "it/t", "dense", "8"}), "version 1\n");
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  v1::AcquireRequest acquire;
  acquire.set_name("it/t");
  v1::AcquireResponse acquired;
  ASSERT_TRUE(stub_->Acquire(RawContext(session->token()).get(), acquire, &acquired).ok());
  const v1::BufferLocation location = acquired.tensor().buffers(0);
  const std::uint64_t segment = location.segment_id();
  const std::string named = "segment " + std::to_string(segment);

  // Asking for write access with only a lease: refused, no descriptor.
  ASSERT_OK(session->Send(MapSegment(1, segment, /*writable=*/true)));
  UniqueFd fd;
  auto reply = session->Receive(&fd);
  ASSERT_OK(reply);
  EXPECT_EQ(reply->request_id(), 1u);
  ASSERT_TRUE(reply->has_error()) << reply->DebugString();
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kPermissionDenied));
  EXPECT_NE(reply->error().message().find(named), std::string::npos) << reply->error().message();
  EXPECT_FALSE(fd.valid());

  // Read access: an O_RDONLY descriptor that cannot be mapped writable, and whose memory
  // is the producer's tensor.
  ASSERT_OK(session->Send(MapSegment(2, segment, /*writable=*/false)));
  reply = session->Receive(&fd);
  ASSERT_OK(reply);
  EXPECT_EQ(reply->request_id(), 2u);
  ASSERT_TRUE(reply->has_segment_granted()) << reply->DebugString();
  EXPECT_FALSE(reply->segment_granted().writable());
  EXPECT_EQ(reply->segment_granted().segment_size(), location.segment_size());
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(::fcntl(fd.get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  const std::size_t size = reply->segment_granted().segment_size();
  void* writable = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  EXPECT_EQ(writable, MAP_FAILED) << "a consumer mapped the segment writable";
  EXPECT_EQ(errno, EACCES);
  if (writable != MAP_FAILED) ::munmap(writable, size);
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(mapped, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(
      CheckBuffer({static_cast<const std::byte*>(mapped) + location.offset(), location.byte_size()},
                  8, 0),
      "");
  ::munmap(mapped, size);

  // A segment that does not exist.
  ASSERT_OK(session->Send(MapSegment(3, 999999, false)));
  reply = session->Receive(&fd);
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error()) << reply->DebugString();
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kNotFound));
  EXPECT_NE(reply->error().message().find("segment 999999"), std::string::npos);

  // Once the lease ends, the session has no business in the segment.
  v1::ReleaseRequest release;
  release.add_lease_ids(acquired.lease_id());
  v1::ReleaseResponse released;
  ASSERT_TRUE(stub_->Release(RawContext(session->token()).get(), release, &released).ok());
  ASSERT_OK(session->Send(MapSegment(4, segment, false)));
  reply = session->Receive(&fd);
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error()) << reply->DebugString();
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kPermissionDenied));
  EXPECT_FALSE(fd.valid());

  session.reset();
  ASSERT_OK(client().Delete("it/t"));
  ExpectStillServingWithNothingLeaked();
}

// A publish_batch whose reply might not fit one frame is refused before anything is
// published (the set would be published and its reply lost); the connection goes on.
TEST_F(SessionSocketTest, APublishBatchWhoseReplyCouldPassAFrameIsRefusedBeforePublishing) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  v1::AllocateRequest allocate;
  *allocate.mutable_tensor_descriptor() = DescriptorToProto(MakeTestDescriptor(TensorKind::kDense));
  v1::AllocateResponse allocated;
  ASSERT_TRUE(stub_->Allocate(RawContext(session->token()).get(), allocate, &allocated).ok());

  v1::SessionMessage batch;
  batch.set_request_id(7);
  v1::PublishRequest& first = *batch.mutable_publish_batch()->add_items();
  first.set_allocation_id(allocated.allocation_id());
  first.set_name("raw/batch");
  // Items of a few bytes each, whose replies could take 23 bytes each.
  for (int i = 0; i < 50'000; ++i) batch.mutable_publish_batch()->add_items()->set_allocation_id(1);
  ASSERT_LT(batch.ByteSizeLong(), kMaxSessionFrameBytes);
  ASSERT_OK(session->Send(batch));
  auto refused = session->Receive();
  ASSERT_OK(refused);
  EXPECT_EQ(refused->request_id(), 7u);
  ASSERT_TRUE(refused->has_error()) << refused->DebugString();
  EXPECT_EQ(refused->error().code(), static_cast<std::uint32_t>(StatusCode::kResourceExhausted));
  EXPECT_NE(refused->error().message().find("50001 items"), std::string::npos)
      << refused->error().message();
  EXPECT_EQ(Stats().tensor_count, 0u);
  EXPECT_EQ(Stats().pending_allocation_count, 1u);

  batch.mutable_publish_batch()->mutable_items()->DeleteSubrange(1, 50'000);
  batch.set_request_id(8);
  ASSERT_OK(session->Send(batch));
  auto published = session->Receive();
  ASSERT_OK(published);
  ASSERT_TRUE(published->has_publish_batch_reply()) << published->DebugString();
  ASSERT_EQ(published->publish_batch_reply().items_size(), 1);
  EXPECT_EQ(published->publish_batch_reply().items(0).name(), "raw/batch");
  EXPECT_EQ(published->publish_batch_reply().items(0).version(), 1u);
  EXPECT_EQ(Stats().tensor_count, 1u);
}

TEST_F(SessionSocketTest, MalformedTrafficEndsOnlyThatConnection) {
  const std::string path = daemon().session_socket_path();
  // Expects an INVALID_ARGUMENT reply naming `fragment`, then the daemon hanging up.
  auto expect_rejected = [](RawSession& session, std::string_view fragment) {
    auto reply = session.Receive();
    ASSERT_OK(reply);
    ASSERT_TRUE(reply->has_error()) << reply->DebugString();
    EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kInvalidArgument));
    EXPECT_NE(reply->error().message().find(fragment), std::string::npos)
        << reply->error().message();
    EXPECT_TRUE(session.ClosedByDaemon());
  };
  {
    SCOPED_TRACE("a request before the hello");
    auto session = RawSession::Connect(path);
    ASSERT_TRUE(session.has_value());
    ASSERT_OK(session->Send(MapSegment(1, 1, false)));
    expect_rejected(*session, "must be a hello");
  }
  {
    SCOPED_TRACE("an unknown protocol version");
    auto session = RawSession::Connect(path);
    ASSERT_TRUE(session.has_value());
    v1::SessionMessage hello;
    hello.mutable_hello()->set_protocol_version(99);
    ASSERT_OK(session->Send(hello));
    expect_rejected(*session, "protocol_version 99");
  }
  {
    SCOPED_TRACE("a client name over the limit");
    auto session = RawSession::Connect(path);
    ASSERT_TRUE(session.has_value());
    v1::SessionMessage hello;
    hello.mutable_hello()->set_protocol_version(kSessionProtocolVersion);
    hello.mutable_hello()->set_client_name(std::string(300, 'n'));
    ASSERT_OK(session->Send(hello));
    expect_rejected(*session, "client_name is 300 bytes");
  }
  {
    SCOPED_TRACE("a payload that is no SessionMessage");
    auto session = RawSession::Connect(path);
    ASSERT_TRUE(session.has_value());
    const std::uint8_t garbage[] = {0x07, 0xff, 0xff, 0xff};  // Wire type 7 does not exist.
    ASSERT_OK(SendFrame(session->fd(), garbage));
    expect_rejected(*session, "does not parse");
  }
  {
    SCOPED_TRACE("a length prefix above the 1 MiB limit");
    auto session = RawSession::Connect(path);
    ASSERT_TRUE(session.has_value());
    ASSERT_OK(session->SendBytes(std::string("\xff\xff\xff\x7f", 4)));
    EXPECT_TRUE(session->ClosedByDaemon());
  }
  {
    SCOPED_TRACE("a second hello ends an open session");
    auto session = RawSession::Open(path);
    ASSERT_TRUE(session.has_value());
    v1::AllocateRequest allocate;
    *allocate.mutable_tensor_descriptor() =
        DescriptorToProto(MakeTestDescriptor(TensorKind::kDense));
    v1::AllocateResponse allocated;
    ASSERT_TRUE(stub_->Allocate(RawContext(session->token()).get(), allocate, &allocated).ok());
    v1::SessionMessage hello;
    hello.mutable_hello()->set_protocol_version(kSessionProtocolVersion);
    ASSERT_OK(session->Send(hello));
    expect_rejected(*session, "hello");
    EXPECT_TRUE(Eventually([&] {
      v1::AllocateResponse ignored;
      return stub_->Allocate(RawContext(session->token()).get(), allocate, &ignored).error_code() ==
             grpc::StatusCode::UNAUTHENTICATED;
    })) << "the session outlived its connection";
  }
  EXPECT_TRUE(Eventually([&] { return Stats().session_count == 1; })) << Summary(Stats());
  // The ended session's allocation is quarantined, not freed: this process, which could still
  // write it, lives on. Nothing else stays.
  EXPECT_EQ(RunAgent({"produce", "it/after", "quantized", "99"}), "version 1\n");
  EXPECT_EQ(RunAgent({"consume", "it/after", "99"}), "OK quantized v1\n");
  ASSERT_OK(client().Delete("it/after"));
  v1::StatsResponse stats;
  EXPECT_TRUE(Eventually([&] {
    stats = v1::StatsResponse();
    if (!stub_->Stats(RawContext(std::nullopt).get(), v1::StatsRequest(), &stats).ok())
      return false;
    const v1::PoolStats& cpu = stats.pools(0);
    return cpu.quarantined_bytes() > 0 && cpu.used_bytes() >= cpu.quarantined_bytes() &&
           cpu.allocation_count() == cpu.quarantined_ranges() &&
           stats.pending_allocation_count() == 0 && stats.lease_count() == 0 &&
           stats.version_count() == 0;
  })) << stats.DebugString();
}

}  // namespace
}  // namespace hurray::integration
