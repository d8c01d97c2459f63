// The one-way release of the session socket against the real daemon: no reply, the lease
// ended before any later request of the session is answered, a refusal reported on the
// session's next reply; acquire replies encoded from the stored bytes exactly as the message
// path builds them; and the C++ client, whose own later calls always see its releases.
#include <poll.h>

#include <chrono>
#include <string>
#include <vector>

#include "integration_test.h"
#include "raw_session.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class OneWayReleaseTest : public RawGrpcTest {
 protected:
  // Publishes `descriptor` as `name` through the fixture's client.
  void Publish(const std::string& name, const TensorDescriptor& descriptor) {
    auto tensor = client().Allocate(descriptor);
    ASSERT_OK(tensor);
    ASSERT_OK(tensor->Publish(name));
  }

  static v1::SessionMessage AcquireMessage(std::uint64_t request_id, const std::string& name) {
    v1::SessionMessage message;
    message.set_request_id(request_id);
    message.mutable_acquire()->set_name(name);
    return message;
  }

  static v1::SessionMessage ReleaseOneWay(std::uint64_t request_id, std::uint64_t lease_id) {
    v1::SessionMessage message;
    message.set_request_id(request_id);
    message.mutable_release_one_way()->add_lease_ids(lease_id);
    return message;
  }

  // The daemon's lease count, through a raw gRPC Stats of no session.
  std::uint64_t LeaseCount() {
    v1::StatsResponse stats;
    EXPECT_TRUE(stub_->Stats(RawContext(std::nullopt).get(), v1::StatsRequest(), &stats).ok());
    return stats.lease_count();
  }
};

TEST_F(OneWayReleaseTest, UnknownLeaseGetsNoReplyAndItsFailureComesWithTheNextReply) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  ASSERT_OK(session->Send(ReleaseOneWay(1, 999999)));
  pollfd watched{.fd = session->fd(), .events = POLLIN, .revents = 0};
  EXPECT_EQ(::poll(&watched, 1, 300), 0) << "the daemon answered a one-way release";

  v1::SessionMessage sync;
  sync.set_request_id(2);
  sync.mutable_sync();
  ASSERT_OK(session->Send(sync));
  auto synced = session->Receive();
  ASSERT_OK(synced);
  EXPECT_EQ(synced->request_id(), 2u);
  EXPECT_TRUE(synced->has_synced()) << synced->DebugString();
  ASSERT_EQ(synced->release_failures_size(), 1) << synced->DebugString();
  EXPECT_EQ(synced->release_failures(0).request_id(), 1u);
  EXPECT_EQ(synced->release_failures(0).error().code(),
            static_cast<std::uint32_t>(StatusCode::kNotFound));
  EXPECT_EQ(synced->release_failures(0).error().message(),
            "lease_id 999999 is not a lease of this session");

  // Any reply carries them: here an acquire's error.
  ASSERT_OK(session->Send(ReleaseOneWay(3, 888888)));
  ASSERT_OK(session->Send(AcquireMessage(4, "ow/missing")));
  auto refused = session->Receive();
  ASSERT_OK(refused);
  EXPECT_EQ(refused->request_id(), 4u);
  EXPECT_TRUE(refused->has_error());
  ASSERT_EQ(refused->release_failures_size(), 1);
  EXPECT_EQ(refused->release_failures(0).request_id(), 3u);
  ExpectEverythingReturned();
}

TEST_F(OneWayReleaseTest, LeasesEndInOrderBeforeALaterAcquiresReply) {
  ASSERT_NO_FATAL_FAILURE(Publish("ow/t", MakeByteTensor(4096)));
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  std::uint64_t request_id = 1;
  std::uint64_t held = 0;
  for (int round = 0; round < 50; ++round) {
    if (held != 0) ASSERT_OK(session->Send(ReleaseOneWay(request_id++, held)));
    ASSERT_OK(session->Send(AcquireMessage(request_id, "ow/t")));
    auto acquired = session->Receive();
    ASSERT_OK(acquired);
    ASSERT_EQ(acquired->request_id(), request_id) << acquired->DebugString();
    ASSERT_TRUE(acquired->has_acquire_reply()) << acquired->DebugString();
    EXPECT_EQ(acquired->release_failures_size(), 0);
    ++request_id;
    held = acquired->acquire_reply().lease_id();
    // The reply came after the earlier release took effect: only the new lease is held.
    EXPECT_EQ(LeaseCount(), 1u) << "round " << round;
  }
  ASSERT_OK(session->Send(ReleaseOneWay(request_id++, held)));
  v1::SessionMessage sync;
  sync.set_request_id(request_id);
  sync.mutable_sync();
  ASSERT_OK(session->Send(sync));
  auto synced = session->Receive();
  ASSERT_OK(synced);
  EXPECT_TRUE(synced->has_synced());
  EXPECT_EQ(synced->release_failures_size(), 0);
  EXPECT_EQ(LeaseCount(), 0u);
  ASSERT_OK(client().Delete("ow/t"));
  ExpectEverythingReturned();
}

TEST_F(OneWayReleaseTest, AcquireReplyIsByteForByteTheMessagePathsReply) {
  const std::vector<std::pair<std::string, TensorDescriptor>> tensors = {
      {"ow/small", MakeByteTensor(64)},
      {"ow/" + std::string(200, 'l'), MakeByteTensor(1 << 20)},
      {"ow/dense", MakeTestDescriptor(TensorKind::kDense)},
      {"ow/quantized", MakeTestDescriptor(TensorKind::kQuantized)},
      {"ow/csr", MakeTestDescriptor(TensorKind::kCsr)}};
  for (const auto& [name, descriptor] : tensors) {
    ASSERT_NO_FATAL_FAILURE(Publish(name, descriptor));
  }
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  std::uint64_t request_id = 1;
  for (const auto& [name, descriptor] : tensors) {
    ASSERT_OK(session->Send(AcquireMessage(request_id, name)));
    std::string payload;
    auto acquired = session->Receive(nullptr, &payload);
    ASSERT_OK(acquired);
    ASSERT_TRUE(acquired->has_acquire_reply()) << acquired->DebugString();
    // The gRPC service builds its reply as a message; the same tensor, another lease.
    v1::AcquireRequest request;
    request.set_name(name);
    v1::AcquireResponse built;
    ASSERT_TRUE(stub_->Acquire(RawContext(session->token()).get(), request, &built).ok());
    built.set_lease_id(acquired->acquire_reply().lease_id());
    v1::SessionMessage expected;
    expected.set_request_id(request_id);
    *expected.mutable_acquire_reply() = built;
    EXPECT_EQ(payload, expected.SerializeAsString()) << name;
    ++request_id;
  }
}

TEST_F(OneWayReleaseTest, ClientsOwnStatsAndDeleteSeeItsReleases) {
  auto consumer = Connect("ow-consumer");
  ASSERT_NE(consumer, nullptr);
  ASSERT_NO_FATAL_FAILURE(Publish("ow/seen", MakeByteTensor(1 << 16)));
  for (int round = 0; round < 100; ++round) {
    auto view = consumer->Acquire("ow/seen");
    ASSERT_OK(view);
    ASSERT_OK(view->Release());
    auto stats = consumer->Stats();
    ASSERT_OK(stats);
    ASSERT_EQ(stats->lease_count, 0u) << "round " << round;
  }
  // Released, then deleted through gRPC by the same client: its memory returns at once.
  auto view = consumer->Acquire("ow/seen");
  ASSERT_OK(view);
  ASSERT_OK(view->Release());
  ASSERT_OK(consumer->Delete("ow/seen"));
  auto stats = consumer->Stats();
  ASSERT_OK(stats);
  EXPECT_EQ(stats->lease_count, 0u);
  EXPECT_EQ(stats->version_count, 0u);
  EXPECT_OK(consumer->SyncReleases());
  ExpectEverythingReturned();
}

}  // namespace
}  // namespace hurray::integration
