// RegistrySessionHost, over a real registry and CPU pool: an acquire's reply encoded from
// the version's stored bytes is byte for byte the reply the registry builds as a message
// (fast path on and off), a refusal leaves the reply as it was and takes no lease, and an
// acquire that waits is answered by the publish it waits for.
#include "session/registry_session_host.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fast_path/directory_segment.h"
#include "hurray/descriptor_codec.h"
#include "hurray/error.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/tensor_descriptor.h"
#include "hurray/v1/exchange.pb.h"
#include "pool/cpu_pool.h"
#include "pool/pool_set.h"
#include "registry/registry.h"
#include "testing/io_thread.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

class RegistrySessionHostTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(
        auto pool,
        CpuPool::Create(CpuPool::Options{
            .name = "cpu", .capacity_bytes = std::uint64_t{4} << 20, .shm_prefix = "hurray-test"}));
    pools_.Add(std::move(pool));
    Registry::Options options{.daemon_epoch = 42};
    if (FastPath()) {
      ASSERT_OK_AND_ASSIGN(options.fast_path.directory,
                           fast_path::DirectorySegment::Create("hurray-test", 8, 42));
    }
    registry_ = std::make_unique<Registry>(pools_, io_, std::move(options));
    io_thread_.emplace(io_);
    host_.emplace(*registry_);
    const PeerCredentials peer{.pid = 1, .uid = 0, .gid = 0};
    ASSERT_OK_AND_ASSIGN(const SessionGrant producer, host_->OpenSession(peer, "producer"));
    ASSERT_OK_AND_ASSIGN(const SessionGrant consumer, host_->OpenSession(peer, "consumer"));
    producer_ = producer.session_id;
    consumer_ = consumer.session_id;
  }

  void TearDown() override {
    io_thread_.reset();  // First: its handlers reach the registry.
    host_.reset();
    registry_.reset();
  }

  [[nodiscard]] static bool FastPath() { return GetParam(); }

  void Put(const std::string& name) {
    v1::AllocateRequest allocate;
    *allocate.mutable_tensor_descriptor() =
        DescriptorToProto(*TensorDescriptor::Dense(ElementType::kFloat32, {4, 256}));
    ASSERT_OK_AND_ASSIGN(const v1::AllocateResponse allocation,
                         host_->Allocate(producer_, allocate));
    v1::PublishRequest publish;
    publish.set_allocation_id(allocation.allocation_id());
    publish.set_name(name);
    ASSERT_OK(host_->Publish(producer_, publish));
  }

  [[nodiscard]] std::uint64_t LeaseCount() const { return registry_->Stats().lease_count(); }

  static v1::AcquireRequest AcquireOf(const std::string& name, std::uint32_t wait_ms = 0) {
    v1::AcquireRequest request;
    request.set_name(name);
    request.set_wait_timeout_ms(wait_ms);
    return request;
  }

  boost::asio::io_context io_;
  std::optional<testing::IoThread> io_thread_;
  PoolSet pools_;
  std::unique_ptr<Registry> registry_;
  std::optional<RegistrySessionHost> host_;
  std::uint64_t producer_ = 0;
  std::uint64_t consumer_ = 0;
};

TEST_P(RegistrySessionHostTest, EncodedAcquireIsTheRegistrysReplyByteForByte) {
  Put("model/w");
  std::string encoded = "kept";  // Appended to, not replaced.
  ASSERT_OK(host_->AcquireNowEncoded(consumer_, AcquireOf("model/w"), encoded));
  ASSERT_EQ(encoded.substr(0, 4), "kept");
  v1::AcquireResponse decoded;
  ASSERT_TRUE(decoded.ParseFromString(encoded.substr(4)));

  ASSERT_OK_AND_ASSIGN(v1::AcquireResponse built,
                       registry_->AcquireNow(consumer_, AcquireOf("model/w")));
  EXPECT_NE(built.lease_id(), decoded.lease_id());  // Two leases, one reply each.
  built.set_lease_id(decoded.lease_id());
  EXPECT_EQ(built.SerializeAsString(), encoded.substr(4));
  EXPECT_EQ(decoded.tensor().name(), "model/w");
  EXPECT_EQ(decoded.daemon_epoch(), 42u);
  EXPECT_EQ(decoded.version_id() != 0, FastPath());
  EXPECT_EQ(LeaseCount(), 2u);
}

TEST_P(RegistrySessionHostTest, RefusedAcquireLeavesTheReplyAndTakesNoLease) {
  Put("model/w");
  std::string reply = "kept";
  EXPECT_ERROR(host_->AcquireNowEncoded(consumer_, AcquireOf("model/absent"), reply),
               StatusCode::kNotFound, {"model/absent", "not published"});
  EXPECT_ERROR(host_->AcquireNowEncoded(consumer_, AcquireOf("model/w", 10), reply),
               StatusCode::kInvalidArgument, {"wait_timeout_ms 10"});
  EXPECT_ERROR(host_->AcquireNowEncoded(consumer_, AcquireOf("/bad"), reply),
               StatusCode::kInvalidArgument);
  EXPECT_ERROR(host_->AcquireNowEncoded(999, AcquireOf("model/w"), reply),
               StatusCode::kUnauthenticated, {"session 999 ended"});
  EXPECT_EQ(reply, "kept");
  EXPECT_EQ(LeaseCount(), 0u);
}

TEST_P(RegistrySessionHostTest, AcquireWaitingIsAnsweredByThePublish) {
  ASSERT_TRUE(host_->ServesAcquireWaits());
  std::promise<Result<v1::AcquireResponse>> answered;
  host_->AcquireWaiting(
      consumer_, AcquireOf("model/late", 10'000),
      [&answered](Result<v1::AcquireResponse> result) { answered.set_value(std::move(result)); });
  std::future<Result<v1::AcquireResponse>> answer = answered.get_future();
  EXPECT_EQ(answer.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  Put("model/late");
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_OK_AND_ASSIGN(const v1::AcquireResponse acquired, answer.get());
  EXPECT_EQ(acquired.tensor().name(), "model/late");
  EXPECT_EQ(LeaseCount(), 1u);

  v1::ReleaseRequest release;
  release.add_lease_ids(acquired.lease_id());
  ASSERT_OK(host_->Release(consumer_, release));
  EXPECT_EQ(LeaseCount(), 0u);
}

INSTANTIATE_TEST_SUITE_P(FastPath, RegistrySessionHostTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? std::string("On") : std::string("Off");
                         });

}  // namespace
}  // namespace hurray::daemon
