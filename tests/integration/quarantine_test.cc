// Quarantine (docs/architecture.md, "Failure behaviour"): the ranges a session could still
// write when it ended abnormally stay out of use until its process has exited. The producer
// here (hurray_close_alive_agent) closes its session socket with an allocation unpublished
// and lives on with the segment mapped read-write: a new allocation must not get its range
// until it is killed.
#include <sys/wait.h>

#include <csignal>
#include <sstream>

#include "hurray/descriptor_codec.h"
#include "raw_session.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

// Where the agent's allocation lies.
struct Placed {
  std::uint64_t segment_id = 0;
  std::uint64_t offset = 0;
};

class QuarantineTest : public RawGrpcTest {
 protected:
  [[nodiscard]] v1::StatsResponse RawStats() {
    v1::StatsResponse stats;
    EXPECT_TRUE(stub_->Stats(RawContext(std::nullopt).get(), v1::StatsRequest(), &stats).ok());
    return stats;
  }
  [[nodiscard]] std::uint64_t QuarantinedBytes() {
    const v1::StatsResponse stats = RawStats();
    for (const v1::PoolStats& pool : stats.pools()) {
      if (pool.name() == "cpu") return pool.quarantined_bytes();
    }
    return 0;
  }

  // Starts the agent, which allocates `bytes` and closes its session; waits until the daemon
  // has ended that session.
  void StartProducer(std::uint64_t bytes) {
    auto started = ChildProcess::Start(
        {HURRAY_CLOSE_ALIVE_AGENT_PATH, daemon().session_socket_path(), std::to_string(bytes)});
    ASSERT_OK(started);
    producer_.emplace(std::move(*started));
    const auto line = producer_->ReadLine(60s);
    ASSERT_TRUE(line.has_value() && line->starts_with("allocated ")) << line.value_or("(none)");
    std::istringstream(line->substr(10)) >> placed_.segment_id >> placed_.offset;
    ASSERT_NO_FATAL_FAILURE(ExpectLine(*producer_, "closed"));
    EXPECT_TRUE(Eventually([&] {
      const v1::StatsResponse stats = RawStats();
      return stats.pending_allocation_count() == 0 && stats.quarantined_sessions() == 1;
    })) << RawStats().DebugString();
  }

  void KillProducer() {
    producer_->Signal(SIGKILL);
    const auto status = producer_->Wait(30s);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFSIGNALED(*status)) << DescribeWaitStatus(*status);
  }

  // Allocates `bytes` on a raw session of this (live) process.
  static Result<v1::AllocateResponse> Allocate(RawSession& session, std::uint64_t bytes) {
    v1::SessionMessage request;
    request.set_request_id(1);
    *request.mutable_allocate()->mutable_tensor_descriptor() =
        DescriptorToProto(MakeByteTensor(bytes));
    HURRAY_RETURN_IF_ERROR(session.Send(request));
    HURRAY_ASSIGN_OR_RETURN(v1::SessionMessage reply, session.Receive());
    if (reply.has_error()) {
      return std::unexpected(
          Error(static_cast<StatusCode>(reply.error().code()), reply.error().message()));
    }
    return reply.allocate_reply();
  }
  // Cancels it, so that this process's session quarantines nothing when it closes.
  static void Cancel(RawSession& session, std::uint64_t allocation_id) {
    v1::SessionMessage request;
    request.set_request_id(2);
    request.mutable_cancel_allocation()->set_allocation_id(allocation_id);
    ASSERT_OK(session.Send(request));
    auto reply = session.Receive();
    ASSERT_OK(reply);
    EXPECT_FALSE(reply->has_error()) << reply->DebugString();
  }

  std::optional<ChildProcess> producer_;
  Placed placed_;
};

TEST_F(QuarantineTest, RangeOfAProducerThatClosedItsSessionButLivesIsNotReused) {
  constexpr std::uint64_t kBytes = 8 << 20;
  ASSERT_NO_FATAL_FAILURE(StartProducer(kBytes));
  EXPECT_EQ(QuarantinedBytes(), kBytes);
  EXPECT_GE(CpuPool().used_bytes, kBytes);

  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  ASSERT_OK_AND_ASSIGN(const v1::AllocateResponse second, Allocate(*session, kBytes));
  const v1::BufferLocation& buffer = second.buffers(0);
  const bool apart = buffer.segment_id() != placed_.segment_id ||
                     buffer.offset() + kBytes <= placed_.offset ||
                     placed_.offset + kBytes <= buffer.offset();
  EXPECT_TRUE(apart) << "the new allocation (segment " << buffer.segment_id() << " offset "
                     << buffer.offset() << ") overlaps the live producer's range (segment "
                     << placed_.segment_id << " offset " << placed_.offset << ")";
  ASSERT_NO_FATAL_FAILURE(Cancel(*session, second.allocation_id()));

  ASSERT_NO_FATAL_FAILURE(KillProducer());
  EXPECT_TRUE(Eventually([&] { return QuarantinedBytes() == 0; })) << RawStats().DebugString();
  EXPECT_EQ(RawStats().quarantined_sessions(), 0u);
  session.reset();
  ExpectEverythingReturned();
}

// A pool just big enough for one such range: the next producer is refused while the first
// lives, and gets the very same range once it has been killed.
class TightPoolQuarantineTest : public QuarantineTest {
 protected:
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = QuarantineTest::daemon_options();
    options.pool_capacity_bytes = std::uint64_t{8} << 20;
    return options;
  }
};

TEST_F(TightPoolQuarantineTest, NextProducerWaitsUntilTheProcessHasExited) {
  constexpr std::uint64_t kBytes = 6 << 20;
  ASSERT_NO_FATAL_FAILURE(StartProducer(kBytes));

  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  auto refused = Allocate(*session, kBytes);
  ASSERT_FALSE(refused.has_value()) << "got the live producer's range";
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted) << refused.error().ToString();

  ASSERT_NO_FATAL_FAILURE(KillProducer());
  Result<v1::AllocateResponse> granted = refused;
  EXPECT_TRUE(Eventually([&] {
    granted = Allocate(*session, kBytes);
    return granted.has_value();
  })) << granted.error().ToString();
  ASSERT_OK(granted);
  EXPECT_EQ(granted->buffers(0).segment_id(), placed_.segment_id);
  EXPECT_EQ(granted->buffers(0).offset(), placed_.offset);
  ASSERT_NO_FATAL_FAILURE(Cancel(*session, granted->allocation_id()));
  session.reset();
  ExpectEverythingReturned();
}

}  // namespace
}  // namespace hurray::integration
