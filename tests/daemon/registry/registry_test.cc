// The registry's rules, on a real CPU pool (and a CUDA pool's stand-in over shared memory),
// without gRPC.
#include "registry/registry.h"

#include <fmt/format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include "hurray/descriptor_codec.h"
#include "pool/cpu_pool.h"
#include "registry/allocation_table.h"
#include "registry/tensor_name.h"
#include "testing/io_thread.h"
#include "testing/shared_mapping.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kPoolBytes = 16 << 20;

v1::TensorDescriptor DenseFloat32(std::vector<std::uint64_t> shape) {
  return DescriptorToProto(*TensorDescriptor::Dense(ElementType::kFloat32, std::move(shape)));
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pool = CpuPool::Create(
        CpuPool::Options{.name = "cpu", .capacity_bytes = kPoolBytes, .shm_prefix = "hurray-test"});
    ASSERT_OK(pool);
    pool_ = pool->get();
    pools_.Add(std::move(*pool));
    AddPools();
    registry_ = std::make_unique<Registry>(
        pools_, io_, Registry::Options{.daemon_epoch = 42, .uid_quota = Quota()});
    io_thread_.emplace(io_);
    producer_ = OpenSession();
    consumer_ = OpenSession();
  }

  // Adds the pools a fixture needs beside "cpu", before the registry is built.
  virtual void AddPools() {}
  // The registry's per-uid quotas.
  [[nodiscard]] virtual UidQuota Quota() const { return {}; }

  void TearDown() override {
    io_thread_.reset();  // First: its handlers reach the registry.
    registry_.reset();
  }

  // Replaces the registry of SetUp, which armed no timer, with one of these options.
  void RebuildRegistry(Registry::Options options) {
    io_thread_.reset();
    registry_.reset();
    registry_ = std::make_unique<Registry>(pools_, io_, std::move(options));
    io_thread_.emplace(io_);
  }

  std::uint64_t OpenSession() {
    auto grant = registry_->OpenSession(PeerCredentials{.pid = 1, .uid = 0, .gid = 0}, "test");
    EXPECT_OK(grant);
    return grant->session_id;
  }

  Result<v1::AllocateResponse> Allocate(std::uint64_t session, v1::TensorDescriptor descriptor,
                                        std::string pool = "") {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() = std::move(descriptor);
    request.set_pool(std::move(pool));
    return registry_->Allocate(session, request);
  }

  Result<v1::PublishResponse> Publish(std::uint64_t session, std::uint64_t allocation,
                                      std::string name) {
    v1::PublishRequest request;
    request.set_allocation_id(allocation);
    request.set_name(std::move(name));
    return registry_->Publish(session, request);
  }

  // Publish with allocate_next.
  Result<v1::PublishResponse> PublishAndAllocate(std::uint64_t session, std::uint64_t allocation,
                                                 std::string name) {
    v1::PublishRequest request;
    request.set_allocation_id(allocation);
    request.set_name(std::move(name));
    request.set_allocate_next(true);
    return registry_->Publish(session, request);
  }

  // Allocates and publishes a float32 tensor of `elements` elements.
  v1::PublishResponse Put(const std::string& name, std::uint64_t elements = 1024) {
    auto allocation = Allocate(producer_, DenseFloat32({elements}));
    EXPECT_OK(allocation);
    auto published = Publish(producer_, allocation->allocation_id(), name);
    EXPECT_OK(published);
    return *published;
  }

  Result<v1::AcquireResponse> Acquire(std::uint64_t session, const std::string& name,
                                      std::uint64_t version = 0, std::uint32_t wait_ms = 0) {
    v1::AcquireRequest request;
    request.set_name(name);
    request.set_version(version);
    request.set_wait_timeout_ms(wait_ms);
    std::promise<Result<v1::AcquireResponse>> promise;
    registry_->Acquire(session, request, [&promise](Result<v1::AcquireResponse> result) {
      promise.set_value(std::move(result));
    });
    return promise.get_future().get();
  }

  Status Release(std::uint64_t session, std::uint64_t lease) {
    v1::ReleaseRequest request;
    request.add_lease_ids(lease);
    auto released = registry_->Release(session, request);
    if (!released) return std::unexpected(released.error());
    return {};
  }

  [[nodiscard]] std::uint64_t UsedBytes() const { return pool_->Usage().used_bytes; }

  boost::asio::io_context io_;
  std::optional<testing::IoThread> io_thread_;
  PoolSet pools_;
  Pool* pool_ = nullptr;
  std::unique_ptr<Registry> registry_;
  std::uint64_t producer_ = 0;
  std::uint64_t consumer_ = 0;
};

TEST_F(RegistryTest, AllocateReturnsPageAlignedLocationsPerBuffer) {
  TensorDescriptor::Parts parts;
  parts.element_type = ElementType::kInt8;
  parts.shape = {64, 100};
  parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 1};
  parts.buffers = {*BufferHandle::Create(6400, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced),
                   *BufferHandle::Create(256, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced)};
  auto allocation = Allocate(producer_, DescriptorToProto(*TensorDescriptor::Create(parts)));
  ASSERT_OK(allocation);
  ASSERT_EQ(allocation->buffers_size(), 2);
  EXPECT_EQ(allocation->buffers(0).byte_size(), 6400u);
  EXPECT_EQ(allocation->buffers(1).byte_size(), 256u);
  for (const auto& buffer : allocation->buffers()) {
    EXPECT_EQ(buffer.offset() % 4096, 0u);
    EXPECT_NE(buffer.segment_id(), 0u);
    EXPECT_EQ(buffer.segment_size(), kPoolBytes);
  }
  EXPECT_NE(allocation->buffers(0).offset(), allocation->buffers(1).offset());
  EXPECT_EQ(allocation->daemon_epoch(), 42u);
}

TEST_F(RegistryTest, AllocateRejectsBadRequestsWithoutLeaking) {
  v1::TensorDescriptor broken = DenseFloat32({4});
  broken.mutable_buffers(0)->set_byte_size(15);
  EXPECT_ERROR(Allocate(producer_, broken), StatusCode::kInvalidArgument,
               {"tensor_descriptor: buffers[0].byte_size 15"});
  EXPECT_ERROR(Allocate(producer_, DenseFloat32({4}), "gpu7"), StatusCode::kNotFound,
               {"pool \"gpu7\""});
  v1::TensorDescriptor cuda = DenseFloat32({4});
  cuda.mutable_buffers(0)->set_device_tag(1);
  EXPECT_ERROR(Allocate(producer_, cuda), StatusCode::kFailedPrecondition,
               {"buffers[0].device_tag cuda"});
  v1::TensorDescriptor aligned = DenseFloat32({4});
  aligned.mutable_buffers(0)->set_alignment(8192);
  EXPECT_ERROR(Allocate(producer_, aligned), StatusCode::kInvalidArgument,
               {"alignment 8192", "page size 4096"});
  // A multi-buffer request whose second buffer does not fit frees the first: COO values
  // of 6 MiB fit the 16 MiB pool, the 12 MiB of indices then do not.
  constexpr std::uint64_t kNnz = 3 << 19;
  TensorDescriptor::Parts parts;
  parts.element_type = ElementType::kFloat32;
  parts.shape = {kNnz};
  parts.layout = CooLayout{.values_buffer = 0, .indices_buffer = 1, .nnz = kNnz};
  parts.buffers = {
      *BufferHandle::Create(kNnz * 4, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced),
      *BufferHandle::Create(kNnz * 8, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced)};
  EXPECT_ERROR(Allocate(producer_, DescriptorToProto(*TensorDescriptor::Create(parts))),
               StatusCode::kResourceExhausted, {"pool cpu"});
  // A buffer larger than the whole pool can never fit.
  EXPECT_ERROR(Allocate(producer_, DenseFloat32({kPoolBytes})), StatusCode::kResourceExhausted);
  EXPECT_EQ(UsedBytes(), 0u);
  EXPECT_EQ(registry_->Stats().pending_allocation_count(), 0u);
}

TEST_F(RegistryTest, EmptyBuffersTakeNoPoolSpace) {
  auto allocation = Allocate(producer_, DenseFloat32({0, 8}));
  ASSERT_OK(allocation);
  EXPECT_EQ(allocation->buffers(0).segment_id(), 0u);
  EXPECT_EQ(UsedBytes(), 0u);
  EXPECT_OK(Publish(producer_, allocation->allocation_id(), "test/empty"));
}

TEST_F(RegistryTest, PublishNeedsOwnAllocationAndValidName) {
  auto allocation = Allocate(producer_, DenseFloat32({4}));
  ASSERT_OK(allocation);
  EXPECT_ERROR(Publish(consumer_, allocation->allocation_id(), "test/x"), StatusCode::kNotFound,
               {"allocation_id"});
  EXPECT_ERROR(Publish(producer_, allocation->allocation_id(), "no-namespace"),
               StatusCode::kInvalidArgument, {"no namespace"});
  EXPECT_ERROR(Publish(producer_, allocation->allocation_id(), "ns/../etc"),
               StatusCode::kInvalidArgument, {"\"..\""});
  auto published = Publish(producer_, allocation->allocation_id(), "test/x");
  ASSERT_OK(published);
  EXPECT_EQ(published->version(), 1u);
  EXPECT_ERROR(Publish(producer_, allocation->allocation_id(), "test/x"), StatusCode::kNotFound);
}

TEST_F(RegistryTest, PublishWithAllocateNextAllocatesTheSameDescriptorInTheSamePool) {
  auto allocation = Allocate(producer_, DenseFloat32({1024}));
  ASSERT_OK(allocation);
  const std::uint64_t one = UsedBytes();
  auto published = PublishAndAllocate(producer_, allocation->allocation_id(), "stream/x");
  ASSERT_OK(published);
  EXPECT_EQ(published->version(), 1u);
  ASSERT_TRUE(published->next().has_allocation()) << published->DebugString();
  const v1::AllocateResponse& next = published->next().allocation();
  EXPECT_NE(next.allocation_id(), allocation->allocation_id());
  EXPECT_EQ(next.daemon_epoch(), 42u);
  ASSERT_EQ(next.buffers_size(), 1);
  EXPECT_EQ(next.buffers(0).byte_size(), allocation->buffers(0).byte_size());
  EXPECT_NE(next.buffers(0).offset(), allocation->buffers(0).offset());
  EXPECT_EQ(UsedBytes(), 2 * one);
  EXPECT_EQ(registry_->Stats().pending_allocation_count(), 1u);
  // The next allocation is this session's, as an Allocate's: published as version 2.
  auto second = Publish(producer_, next.allocation_id(), "stream/x");
  ASSERT_OK(second);
  EXPECT_EQ(second->version(), 2u);
  EXPECT_FALSE(second->has_next()) << "no allocate_next, no next";
}

TEST_F(RegistryTest, ANextAllocationWithoutRoomLeavesThePublishInPlace) {
  // Five eighths of the pool: the published tensor leaves no room for the next.
  auto allocation = Allocate(producer_, DenseFloat32({kPoolBytes / 8 * 5 / sizeof(float)}));
  ASSERT_OK(allocation);
  const std::uint64_t used = UsedBytes();
  auto published = PublishAndAllocate(producer_, allocation->allocation_id(), "stream/big");
  ASSERT_OK(published);
  ASSERT_TRUE(published->next().has_error()) << published->DebugString();
  EXPECT_EQ(published->next().error().code(),
            static_cast<std::uint32_t>(StatusCode::kResourceExhausted));
  EXPECT_NE(published->next().error().message().find("pool cpu"), std::string::npos)
      << published->next().error().message();
  EXPECT_EQ(UsedBytes(), used);
  EXPECT_EQ(registry_->Stats().pending_allocation_count(), 0u);
  auto acquired = Acquire(consumer_, "stream/big");
  ASSERT_OK(acquired);
  EXPECT_EQ(acquired->tensor().version(), 1u);
}

TEST_F(RegistryTest, ARefusedPublishMakesNoNextAllocation) {
  auto allocation = Allocate(producer_, DenseFloat32({1024}));
  ASSERT_OK(allocation);
  const std::uint64_t used = UsedBytes();
  EXPECT_ERROR(PublishAndAllocate(producer_, allocation->allocation_id(), "bad name"),
               StatusCode::kInvalidArgument);
  EXPECT_ERROR(PublishAndAllocate(consumer_, allocation->allocation_id(), "stream/x"),
               StatusCode::kNotFound, {"allocation_id"});
  EXPECT_EQ(UsedBytes(), used);
  EXPECT_EQ(registry_->Stats().pending_allocation_count(), 1u);
}

TEST_F(RegistryTest, AcquireReturnsWhatWasPublished) {
  auto allocation = Allocate(producer_, DenseFloat32({8, 8}));
  ASSERT_OK(allocation);
  ASSERT_OK(Publish(producer_, allocation->allocation_id(), "model/w"));
  auto acquired = Acquire(consumer_, "model/w");
  ASSERT_OK(acquired);
  EXPECT_NE(acquired->lease_id(), 0u);
  EXPECT_EQ(acquired->tensor().name(), "model/w");
  EXPECT_EQ(acquired->tensor().version(), 1u);
  EXPECT_EQ(acquired->tensor().buffers(0).offset(), allocation->buffers(0).offset());
  EXPECT_EQ(acquired->tensor().tensor_descriptor().shape_size(), 2);
  EXPECT_ERROR(Acquire(consumer_, "model/missing"), StatusCode::kNotFound,
               {"model/missing is not published"});
  EXPECT_ERROR(Acquire(consumer_, "model/w", 2), StatusCode::kNotFound, {"version 2"});
}

// Acquire, BatchAcquire and Describe hand out the TensorInfo Publish made of the request:
// the descriptor as sent (fields this daemon does not know included), the allocation's
// locations, the handoff, the pool, and nothing else.
TEST_F(RegistryTest, RepliesCarryExactlyThePublishedTensorInfo) {
  TensorDescriptor::Parts parts;
  parts.element_type = ElementType::kInt8;
  parts.shape = {64, 100};
  parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 1};
  parts.buffers = {*BufferHandle::Create(6400, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced),
                   *BufferHandle::Create(256, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced)};
  v1::TensorDescriptor descriptor = DescriptorToProto(*TensorDescriptor::Create(parts));
  (*descriptor.mutable_metadata())["origin"] = "test";
  descriptor.GetReflection()->MutableUnknownFields(&descriptor)->AddVarint(999, 7);
  auto allocation = Allocate(producer_, descriptor);
  ASSERT_OK(allocation);
  v1::PublishRequest publish;
  publish.set_allocation_id(allocation->allocation_id());
  publish.set_name("quant/w");
  publish.mutable_handoff()->set_sync_mode(0);
  ASSERT_OK(registry_->Publish(producer_, publish));

  auto acquired = Acquire(consumer_, "quant/w");
  ASSERT_OK(acquired);
  v1::TensorInfo expected;
  expected.set_name("quant/w");
  expected.set_version(1);
  *expected.mutable_tensor_descriptor() = descriptor;
  *expected.mutable_buffers() = allocation->buffers();
  *expected.mutable_handoff() = publish.handoff();
  expected.set_pool("cpu");
  EXPECT_GT(acquired->tensor().published_at_ns(), 0);
  expected.set_published_at_ns(acquired->tensor().published_at_ns());
  using google::protobuf::util::MessageDifferencer;
  EXPECT_TRUE(MessageDifferencer::Equals(acquired->tensor(), expected))
      << acquired->tensor().DebugString();
  EXPECT_EQ(acquired->tensor().SerializeAsString(), expected.SerializeAsString());
  const v1::TensorDescriptor& handed_out = acquired->tensor().tensor_descriptor();
  EXPECT_EQ(handed_out.GetReflection()->GetUnknownFields(handed_out).field_count(), 1);

  v1::DescribeRequest describe;
  describe.set_name("quant/w");
  auto described = registry_->Describe(describe, nullptr);
  ASSERT_OK(described);
  EXPECT_EQ(described->tensor().SerializeAsString(), expected.SerializeAsString());
  ASSERT_EQ(described->versions_size(), 1);
  EXPECT_EQ(described->versions(0).published_at_ns(), expected.published_at_ns());
  EXPECT_EQ(described->versions(0).byte_size(), 6400u + 256u);
  EXPECT_EQ(described->versions(0).lease_count(), 1u);

  v1::BatchAcquireRequest batch;
  batch.add_names("quant/w");
  std::promise<Result<v1::BatchAcquireResponse>> promise;
  registry_->BatchAcquire(consumer_, batch, [&](auto result) { promise.set_value(result); });
  auto batched = promise.get_future().get();
  ASSERT_OK(batched);
  ASSERT_EQ(batched->tensors_size(), 1);
  EXPECT_EQ(batched->tensors(0).tensor().SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(batched->tensors(0).daemon_epoch(), 42u);
  EXPECT_NE(batched->tensors(0).lease_id(), acquired->lease_id());

  v1::ListRequest list;
  list.set_prefix("quant/");
  auto listed = registry_->List(list, nullptr);
  ASSERT_OK(listed);
  ASSERT_EQ(listed->tensors_size(), 1);
  EXPECT_EQ(listed->tensors(0).name(), "quant/w");
  EXPECT_EQ(listed->tensors(0).element_type(), descriptor.element_type());
  EXPECT_EQ(std::vector<std::uint64_t>(listed->tensors(0).shape().begin(),
                                       listed->tensors(0).shape().end()),
            (std::vector<std::uint64_t>{64, 100}));
  EXPECT_EQ(listed->tensors(0).published_at_ns(), expected.published_at_ns());
  EXPECT_EQ(listed->tensors(0).lease_count(), 2u);
}

// Replies are built after the registry's mutex is released. A session that ends meanwhile
// (its leases released, superseded versions reclaimed) must not pull the version from
// under a reply being built. Run it under AddressSanitizer to see the point.
TEST_F(RegistryTest, RepliesSurviveTheirVersionBeingReclaimed) {
  Put("race/t", 16);
  std::atomic<bool> stop = false;
  std::thread publisher([&] {
    while (!stop) Put("race/t", 16);
  });
  for (int round = 0; round < 300; ++round) {
    const std::uint64_t session = OpenSession();
    auto consume = [&] {
      for (int i = 0; i < 20; ++i) {
        auto acquired = Acquire(session, "race/t");
        if (!acquired) {
          EXPECT_EQ(acquired.error().code(), StatusCode::kUnauthenticated);
          return;
        }
        EXPECT_EQ(acquired->tensor().name(), "race/t");
        EXPECT_EQ(acquired->tensor().buffers_size(), 1);
        EXPECT_EQ(acquired->tensor().tensor_descriptor().shape(0), 16u);
      }
    };
    std::thread first(consume);
    std::thread second(consume);
    registry_->CloseSession(session);
    first.join();
    second.join();
  }
  stop = true;
  publisher.join();
  EXPECT_EQ(registry_->Stats().lease_count(), 0u);
  EXPECT_EQ(registry_->Stats().version_count(), 1u);
  EXPECT_EQ(UsedBytes(), 4096u);
}

TEST_F(RegistryTest, RepublishKeepsOldVersionAliveUntilItsLeaseEnds) {
  Put("model/w");
  auto old_lease = Acquire(consumer_, "model/w");
  ASSERT_OK(old_lease);
  const std::uint64_t used_one = UsedBytes();
  auto second = Put("model/w");
  EXPECT_EQ(second.version(), 2u);
  EXPECT_EQ(UsedBytes(), 2 * used_one);  // v1 is leased: not reclaimed.
  EXPECT_EQ(Acquire(consumer_, "model/w")->tensor().version(), 2u);
  auto describe = registry_->Describe(
      [] {
        v1::DescribeRequest request;
        request.set_name("model/w");
        return request;
      }(),
      nullptr);
  ASSERT_OK(describe);
  ASSERT_EQ(describe->versions_size(), 2);
  EXPECT_TRUE(describe->versions(0).superseded());
  EXPECT_EQ(describe->versions(0).lease_count(), 1u);
  ASSERT_OK(Release(consumer_, old_lease->lease_id()));
  EXPECT_EQ(UsedBytes(), used_one);  // v1 reclaimed at its last release.
}

TEST_F(RegistryTest, UnleasedSupersededVersionIsReclaimedAtOnce) {
  Put("model/w");
  const std::uint64_t used_one = UsedBytes();
  Put("model/w");
  EXPECT_EQ(UsedBytes(), used_one);
  EXPECT_EQ(registry_->Stats().version_count(), 1u);
}

TEST_F(RegistryTest, ReleaseChecksOwnership) {
  Put("model/w");
  auto lease = Acquire(consumer_, "model/w");
  ASSERT_OK(lease);
  EXPECT_ERROR(Release(producer_, lease->lease_id()), StatusCode::kNotFound, {"lease_id"});
  EXPECT_OK(Release(consumer_, lease->lease_id()));
  EXPECT_ERROR(Release(consumer_, lease->lease_id()), StatusCode::kNotFound);
}

TEST_F(RegistryTest, ReleaseEndsEveryLeaseItKnowsAndNamesTheOthers) {
  Put("model/a");
  Put("model/b");
  auto a = Acquire(consumer_, "model/a");
  auto b = Acquire(consumer_, "model/b");
  auto theirs = Acquire(producer_, "model/a");
  ASSERT_OK(a);
  ASSERT_OK(b);
  ASSERT_OK(theirs);
  v1::ReleaseRequest request;
  for (const std::uint64_t id :
       {a->lease_id(), std::uint64_t{424242}, b->lease_id(), theirs->lease_id()}) {
    request.add_lease_ids(id);
  }
  EXPECT_ERROR(registry_->Release(consumer_, request), StatusCode::kNotFound,
               {fmt::format("lease_ids 424242, {} are not leases of this session; the other 2 "
                            "were released",
                            theirs->lease_id())});
  EXPECT_EQ(registry_->Stats().lease_count(), 1u);  // The producer's, which stays.
  EXPECT_ERROR(Release(consumer_, a->lease_id()), StatusCode::kNotFound,
               {fmt::format("lease_id {} is not a lease of this session", a->lease_id())});
  EXPECT_OK(Release(producer_, theirs->lease_id()));
}

TEST_F(RegistryTest, AcquireWaitsUntilPublished) {
  v1::AcquireRequest request;
  request.set_name("late/tensor");
  request.set_wait_timeout_ms(10'000);
  std::promise<Result<v1::AcquireResponse>> promise;
  const std::uint64_t wait_id = registry_->Acquire(
      consumer_, request,
      [&promise](Result<v1::AcquireResponse> result) { promise.set_value(std::move(result)); });
  EXPECT_NE(wait_id, 0u);
  auto future = promise.get_future();
  EXPECT_EQ(future.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  Put("late/tensor");
  auto acquired = future.get();
  ASSERT_OK(acquired);
  EXPECT_EQ(acquired->tensor().name(), "late/tensor");
}

TEST_F(RegistryTest, AcquireWaitTimesOut) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_ERROR(Acquire(consumer_, "never/published", 0, 100), StatusCode::kDeadlineExceeded,
               {"never/published"});
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_EQ(registry_->Stats().lease_count(), 0u);
}

// The wait timer stays armed for an answered wait's deadline (it is not re-armed for every
// new wait): a later wait with an earlier deadline must still re-arm it, and one with a later
// deadline must be armed for when the earlier timer fires and finds nothing expired.
TEST_F(RegistryTest, WaitsTimeOutOnTimeAfterAnAnsweredWaitArmedTheTimer) {
  const auto answered_then_time_out = [this](std::uint32_t answered_ms, std::uint32_t waited_ms,
                                             const std::string& name) {
    v1::AcquireRequest request;
    request.set_name(name + "/answered");
    request.set_wait_timeout_ms(answered_ms);
    std::promise<Result<v1::AcquireResponse>> answered;
    registry_->Acquire(consumer_, request, [&answered](Result<v1::AcquireResponse> result) {
      answered.set_value(std::move(result));
    });
    Put(name + "/answered");
    auto lease = answered.get_future().get();
    ASSERT_OK(lease);
    ASSERT_OK(Release(consumer_, lease->lease_id()));

    request.set_name(name + "/never");
    request.set_wait_timeout_ms(waited_ms);
    std::promise<Result<v1::AcquireResponse>> waited;
    const auto start = std::chrono::steady_clock::now();
    registry_->Acquire(consumer_, request, [&waited](Result<v1::AcquireResponse> result) {
      waited.set_value(std::move(result));
    });
    auto future = waited.get_future();
    ASSERT_EQ(future.wait_for(std::chrono::seconds(5)), std::future_status::ready)
        << name << ": a " << waited_ms << " ms wait did not time out within 5 s";
    EXPECT_ERROR(future.get(), StatusCode::kDeadlineExceeded, {name + "/never"});
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(waited_ms));
  };
  // The timer is armed for 60 s: the 100 ms wait must re-arm it.
  answered_then_time_out(60'000, 100, "earlier");
  // The timer is armed for 200 ms (nothing else waits now): the 400 ms wait leaves it, and is
  // armed for when it fires.
  answered_then_time_out(200, 400, "later");
  EXPECT_EQ(registry_->Stats().lease_count(), 0u);
}

TEST_F(RegistryTest, CancelledWaitNeverCompletes) {
  v1::AcquireRequest request;
  request.set_name("late/tensor");
  request.set_wait_timeout_ms(10'000);
  bool called = false;
  const std::uint64_t wait_id = registry_->Acquire(
      consumer_, request, [&called](Result<v1::AcquireResponse>) { called = true; });
  EXPECT_TRUE(registry_->CancelWait(wait_id));
  EXPECT_FALSE(registry_->CancelWait(wait_id));
  Put("late/tensor");
  EXPECT_FALSE(called);
  EXPECT_EQ(registry_->Stats().lease_count(), 0u);
}

TEST_F(RegistryTest, ClosingASessionReturnsEverything) {
  Put("model/w", 4096);
  auto lease = Acquire(consumer_, "model/w");
  ASSERT_OK(lease);
  auto pending = Allocate(producer_, DenseFloat32({100'000}));
  ASSERT_OK(pending);
  registry_->CloseSession(producer_);
  // The published tensor belongs to the daemon; the pending allocation is gone.
  EXPECT_EQ(registry_->Stats().pending_allocation_count(), 0u);
  ASSERT_OK(Acquire(OpenSession(), "model/w"));
  v1::DeleteRequest remove;
  remove.set_name("model/w");
  ASSERT_OK(registry_->Delete(consumer_, remove));
  EXPECT_GT(UsedBytes(), 0u);  // Still leased by the consumers.
  registry_->CloseSession(consumer_);
  EXPECT_GT(UsedBytes(), 0u);  // The third session's lease remains.
  EXPECT_EQ(registry_->Stats().lease_count(), 1u);
}

TEST_F(RegistryTest, StatsCountBytesPublishedReclaimedAndWhatClosedSessionsHeld) {
  Put("model/w", 1024);  // 4096 bytes.
  auto lease = Acquire(consumer_, "model/w");
  ASSERT_OK(lease);
  auto pending = Allocate(producer_, DenseFloat32({1000}));  // 4000 bytes.
  ASSERT_OK(pending);
  Put("model/w", 1024);  // Supersedes the leased first version.
  v1::StatsResponse stats = registry_->Stats();
  EXPECT_EQ(stats.published_bytes_total(), 8192u);
  EXPECT_EQ(stats.reclaimed_bytes_total(), 0u);
  EXPECT_EQ(stats.closed_session_count(), 0u);

  registry_->CloseSession(producer_);
  registry_->CloseSession(consumer_);  // Its lease ends: the first version is reclaimed.
  stats = registry_->Stats();
  EXPECT_EQ(stats.reclaimed_bytes_total(), 4096u);
  EXPECT_EQ(stats.closed_session_count(), 2u);
  EXPECT_EQ(stats.closed_session_lease_count(), 1u);
  EXPECT_EQ(stats.closed_session_allocation_count(), 1u);
  EXPECT_EQ(stats.closed_session_allocation_bytes(), 4000u);
}

TEST_F(RegistryTest, ClosingASessionEndsItsWaits) {
  v1::AcquireRequest request;
  request.set_name("late/tensor");
  request.set_wait_timeout_ms(10'000);
  std::promise<Result<v1::AcquireResponse>> promise;
  registry_->Acquire(consumer_, request, [&promise](Result<v1::AcquireResponse> result) {
    promise.set_value(std::move(result));
  });
  registry_->CloseSession(consumer_);
  EXPECT_ERROR(promise.get_future().get(), StatusCode::kCancelled, {"session ended"});
}

TEST_F(RegistryTest, DeleteHidesAndReclaimsAfterLastLease) {
  Put("model/w");
  auto lease = Acquire(consumer_, "model/w");
  ASSERT_OK(lease);
  v1::DeleteRequest remove;
  remove.set_name("model/w");
  auto deleted = registry_->Delete(consumer_, remove);
  ASSERT_OK(deleted);
  EXPECT_EQ(deleted->versions_deleted(), 1u);
  EXPECT_ERROR(Acquire(consumer_, "model/w"), StatusCode::kNotFound);
  EXPECT_ERROR(Acquire(consumer_, "model/w", 1), StatusCode::kNotFound);
  EXPECT_GT(UsedBytes(), 0u);
  ASSERT_OK(Release(consumer_, lease->lease_id()));
  EXPECT_EQ(UsedBytes(), 0u);
  EXPECT_ERROR(registry_->Delete(consumer_, remove), StatusCode::kNotFound, {"has no versions"});
}

TEST_F(RegistryTest, ListPagesThroughNamesInOrder) {
  for (int i = 0; i < 25; ++i) Put("list/t" + std::to_string(100 + i), 16);
  Put("other/x", 16);
  v1::ListRequest request;
  request.set_prefix("list/");
  request.set_page_size(10);
  std::vector<std::string> names;
  for (int page = 0; page < 10; ++page) {
    auto listed = registry_->List(request, nullptr);
    ASSERT_OK(listed);
    for (const auto& summary : listed->tensors()) names.push_back(summary.name());
    if (listed->next_page_token().empty()) break;
    request.set_page_token(listed->next_page_token());
  }
  ASSERT_EQ(names.size(), 25u);
  EXPECT_EQ(names.front(), "list/t100");
  EXPECT_EQ(names.back(), "list/t124");
  EXPECT_TRUE(std::ranges::is_sorted(names));
}

TEST_F(RegistryTest, BatchAcquireIsAllOrNothing) {
  Put("model/a");
  Put("model/b");
  v1::BatchAcquireRequest request;
  request.add_names("model/a");
  request.add_names("model/missing");
  std::promise<Result<v1::BatchAcquireResponse>> failed;
  registry_->BatchAcquire(consumer_, request, [&](auto result) { failed.set_value(result); });
  EXPECT_ERROR(failed.get_future().get(), StatusCode::kNotFound, {"model/missing"});
  EXPECT_EQ(registry_->Stats().lease_count(), 0u);

  request.Clear();
  request.set_prefix("model/");
  std::promise<Result<v1::BatchAcquireResponse>> succeeded;
  registry_->BatchAcquire(consumer_, request, [&](auto result) { succeeded.set_value(result); });
  auto batch = succeeded.get_future().get();
  ASSERT_OK(batch);
  ASSERT_EQ(batch->tensors_size(), 2);
  EXPECT_EQ(batch->tensors(0).tensor().name(), "model/a");
  EXPECT_EQ(registry_->Stats().lease_count(), 2u);
}

// ---- PublishBatch ----

// A batch of (allocation_id, name) items.
v1::PublishBatchRequest BatchOf(const std::vector<std::pair<std::uint64_t, std::string>>& items) {
  v1::PublishBatchRequest request;
  for (const auto& [allocation_id, name] : items) {
    v1::PublishRequest& item = *request.add_items();
    item.set_allocation_id(allocation_id);
    item.set_name(name);
  }
  return request;
}

TEST_F(RegistryTest, PublishBatchPublishesEveryItemAsOneVersionOfItsName) {
  Put("set/b");  // Its next version is 2.
  std::vector<std::pair<std::uint64_t, std::string>> items;
  for (const char* name : {"set/a", "set/b", "set/c"}) {
    auto allocation = Allocate(producer_, DenseFloat32({256}));
    ASSERT_OK(allocation);
    items.emplace_back(allocation->allocation_id(), name);
  }
  auto published = registry_->PublishBatch(producer_, BatchOf(items));
  ASSERT_OK(published);
  ASSERT_EQ(published->items_size(), 3);
  EXPECT_EQ(published->items(0).name(), "set/a");
  EXPECT_EQ(published->items(0).version(), 1u);
  EXPECT_EQ(published->items(1).name(), "set/b");
  EXPECT_EQ(published->items(1).version(), 2u);
  EXPECT_EQ(published->items(2).version(), 1u);
  EXPECT_EQ(published->daemon_epoch(), 42u);
  const v1::StatsResponse stats = registry_->Stats();
  EXPECT_EQ(stats.pending_allocation_count(), 0u);
  EXPECT_EQ(stats.tensor_count(), 3u);
  auto acquired = Acquire(consumer_, "set/c");
  ASSERT_OK(acquired);
  EXPECT_EQ(acquired->tensor().buffers(0).byte_size(), 1024u);
}

// Every refusal names its item and leaves the pending allocations, the published tensors
// and the watchers as they were.
TEST_F(RegistryTest, PublishBatchRefusesTheWholeBatchAndChangesNothing) {
  Put("model/old");
  auto published_allocation = Allocate(producer_, DenseFloat32({4}));
  ASSERT_OK(published_allocation);
  ASSERT_OK(Publish(producer_, published_allocation->allocation_id(), "model/taken"));
  auto cancelled = Allocate(producer_, DenseFloat32({4}));
  ASSERT_OK(cancelled);
  v1::CancelAllocationRequest cancel;
  cancel.set_allocation_id(cancelled->allocation_id());
  ASSERT_OK(registry_->CancelAllocation(producer_, cancel));
  auto foreign = Allocate(consumer_, DenseFloat32({4}));
  ASSERT_OK(foreign);
  std::vector<std::uint64_t> mine;
  for (int i = 0; i < 3; ++i) {
    auto allocation = Allocate(producer_, DenseFloat32({4}));
    ASSERT_OK(allocation);
    mine.push_back(allocation->allocation_id());
  }
  std::atomic<int> events{0};
  const std::uint64_t watch =
      registry_->Watch("", [&](const v1::WatchEvent&) { ++events; }, nullptr);
  const v1::StatsResponse before = registry_->Stats();
  const std::uint64_t used = UsedBytes();

  struct Case {
    std::string what;
    v1::PublishBatchRequest request;
    StatusCode code;
    std::vector<std::string> fragments;
  };
  v1::PublishBatchRequest too_many;
  for (int i = 0; i <= 100'000; ++i) too_many.add_items()->set_name("model/x");
  v1::PublishBatchRequest allocating = BatchOf({{mine[0], "model/a"}, {mine[1], "model/b"}});
  allocating.mutable_items(1)->set_allocate_next(true);
  const std::string foreign_id = std::to_string(foreign->allocation_id());
  const std::vector<Case> cases = {
      {"bad name",
       BatchOf({{mine[0], "model/a"}, {mine[1], "model/bad name"}}),
       StatusCode::kInvalidArgument,
       {"items[1] (model/bad name): name"}},
      {"name twice",
       BatchOf({{mine[0], "model/a"}, {mine[1], "model/b"}, {mine[2], "model/a"}}),
       StatusCode::kInvalidArgument,
       {"items[2] (model/a): name already listed as items[0]"}},
      {"allocation twice",
       BatchOf({{mine[0], "model/a"}, {mine[0], "model/b"}}),
       StatusCode::kInvalidArgument,
       {"items[1] (model/b): allocation_id " + std::to_string(mine[0]) +
        " already listed in items[0]"}},
      {"foreign allocation",
       BatchOf({{mine[0], "model/a"}, {foreign->allocation_id(), "model/b"}}),
       StatusCode::kNotFound,
       {"items[1] (model/b): allocation_id " + foreign_id +
        " is not a pending allocation of this session"}},
      {"already published",
       BatchOf({{published_allocation->allocation_id(), "model/a"}, {mine[0], "model/b"}}),
       StatusCode::kNotFound,
       {"items[0] (model/a): allocation_id"}},
      {"cancelled",
       BatchOf({{mine[0], "model/a"}, {cancelled->allocation_id(), "model/b"}}),
       StatusCode::kNotFound,
       {"items[1] (model/b)", "not a pending allocation"}},
      // The first offender is named, whichever rule it breaks.
      {"foreign before a bad name",
       BatchOf({{mine[0], "model/a"}, {foreign->allocation_id(), "model/b"}, {mine[1], "bad"}}),
       StatusCode::kNotFound,
       {"items[1] (model/b)"}},
      {"empty", v1::PublishBatchRequest(), StatusCode::kInvalidArgument, {"items is empty"}},
      {"an item that allocates",
       allocating,
       StatusCode::kInvalidArgument,
       {"items[1] (model/b): allocate_next"}},
      {"too many",
       too_many,
       StatusCode::kInvalidArgument,
       {"items has 100001 entries, above the limit 100000"}},
  };
  for (const Case& refused : cases) {
    SCOPED_TRACE(refused.what);
    const auto result = registry_->PublishBatch(producer_, refused.request);
    EXPECT_ERROR(result, refused.code);
    for (const std::string& fragment : refused.fragments) {
      const std::string message = result ? std::string() : result.error().message();
      EXPECT_NE(message.find(fragment), std::string::npos) << message << " lacks " << fragment;
    }
    const v1::StatsResponse after = registry_->Stats();
    EXPECT_EQ(after.pending_allocation_count(), before.pending_allocation_count());
    EXPECT_EQ(after.tensor_count(), before.tensor_count());
    EXPECT_EQ(after.version_count(), before.version_count());
    EXPECT_EQ(UsedBytes(), used);
    EXPECT_EQ(events.load(), 0);
  }
  registry_->Unwatch(watch);
  // The allocations the refusals listed are still pending, and publish as usual.
  ASSERT_OK(
      registry_->PublishBatch(producer_, BatchOf({{mine[0], "model/a"}, {mine[1], "model/b"}})));
}

TEST_F(RegistryTest, PublishBatchTellsWatchersOncePerItemInOrderAfterTheWholeSet) {
  std::vector<std::pair<std::uint64_t, std::string>> items;
  for (const char* name : {"w/z", "w/a", "w/m"}) {
    auto allocation = Allocate(producer_, DenseFloat32({4}));
    ASSERT_OK(allocation);
    items.emplace_back(allocation->allocation_id(), name);
  }
  std::mutex mutex;
  std::vector<std::string> seen;
  const std::uint64_t watch = registry_->Watch(
      "w/",
      [&](const v1::WatchEvent& event) {
        std::lock_guard lock(mutex);
        seen.push_back(event.name() + "@" + std::to_string(event.version()));
      },
      nullptr);
  ASSERT_OK(registry_->PublishBatch(producer_, BatchOf(items)));
  registry_->Unwatch(watch);
  std::lock_guard lock(mutex);
  EXPECT_EQ(seen, (std::vector<std::string>{"w/z@1", "w/a@1", "w/m@1"}));
}

TEST_F(RegistryTest, PublishBatchCompletesABatchAcquireWaitingForTheWholeSet) {
  v1::BatchAcquireRequest wanted;
  for (const char* name : {"wait/a", "wait/b", "wait/c"}) wanted.add_names(name);
  wanted.set_wait_timeout_ms(10'000);
  std::promise<Result<v1::BatchAcquireResponse>> promise;
  registry_->BatchAcquire(consumer_, wanted, [&](auto result) { promise.set_value(result); });
  std::vector<std::pair<std::uint64_t, std::string>> items;
  for (const std::string& name : wanted.names()) {
    auto allocation = Allocate(producer_, DenseFloat32({4}));
    ASSERT_OK(allocation);
    items.emplace_back(allocation->allocation_id(), name);
  }
  ASSERT_OK(registry_->PublishBatch(producer_, BatchOf(items)));
  auto batch = promise.get_future().get();
  ASSERT_OK(batch);
  ASSERT_EQ(batch->tensors_size(), 3);
  EXPECT_EQ(batch->tensors(2).tensor().name(), "wait/c");
  EXPECT_EQ(registry_->Stats().lease_count(), 3u);
}

TEST_F(RegistryTest, BatchWaitCountsEachListedNameOnceAndSeesADeleteInBetween) {
  // Listed 30,000 times, a name is still one name to wait for (and one lease).
  v1::BatchAcquireRequest wanted;
  for (int i = 0; i < 30'000; ++i) wanted.add_names("dup/x");
  wanted.add_names("dup/y");
  wanted.set_wait_timeout_ms(60'000);
  std::promise<Result<v1::BatchAcquireResponse>> promise;
  auto future = promise.get_future();
  registry_->BatchAcquire(consumer_, wanted, [&](auto result) { promise.set_value(result); });
  for (int i = 0; i < 20; ++i) Put("dup/x");
  v1::DeleteRequest remove;
  remove.set_name("dup/x");
  ASSERT_OK(registry_->Delete(producer_, remove));
  Put("dup/y");  // dup/x is missing again: the batch waits on.
  EXPECT_EQ(future.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  Put("dup/x");
  auto batch = future.get();
  ASSERT_OK(batch);
  ASSERT_EQ(batch->tensors_size(), 2);
  EXPECT_EQ(batch->tensors(0).tensor().name(), "dup/x");
  EXPECT_EQ(batch->tensors(1).tensor().name(), "dup/y");
  EXPECT_EQ(registry_->Stats().lease_count(), 2u);
}

TEST_F(RegistryTest, BatchPrefixWalkIsBoundedByMaxBatchNames) {
  RebuildRegistry(Registry::Options{.max_batch_names = 3});
  producer_ = OpenSession();
  consumer_ = OpenSession();
  for (const char* name : {"many/a", "many/b", "many/c"}) Put(name, 0);
  v1::BatchAcquireRequest batch;
  batch.set_prefix("many/");
  std::optional<Result<v1::BatchAcquireResponse>> got;
  registry_->BatchAcquire(consumer_, batch,
                          [&](Result<v1::BatchAcquireResponse> r) { got = std::move(r); });
  ASSERT_TRUE(got.has_value());
  ASSERT_OK(*got);
  EXPECT_EQ((*got)->tensors_size(), 3);
  Put("many/d", 0);
  got.reset();
  registry_->BatchAcquire(consumer_, batch,
                          [&](Result<v1::BatchAcquireResponse> r) { got = std::move(r); });
  ASSERT_TRUE(got.has_value());
  EXPECT_ERROR(*got, StatusCode::kInvalidArgument,
               {"prefix many/ covers more than max_batch_names 3 names"});
}

TEST_F(RegistryTest, WaitsOfOneUidAreCapped) {
  RebuildRegistry(Registry::Options{.max_waits_per_uid = 3});
  const std::uint64_t root = OpenSession();
  const auto start_wait = [&](std::uint64_t session, const std::string& name,
                              std::optional<Result<v1::AcquireResponse>>& outcome) {
    v1::AcquireRequest request;
    request.set_name(name);
    request.set_wait_timeout_ms(60'000);
    return registry_->Acquire(
        session, request, [&outcome](Result<v1::AcquireResponse> r) { outcome = std::move(r); });
  };
  std::vector<std::optional<Result<v1::AcquireResponse>>> outcomes(5);
  std::vector<std::uint64_t> ids;
  ids.reserve(3);
  for (int i = 0; i < 3; ++i) ids.push_back(start_wait(root, "cap/w", outcomes[i]));
  for (std::uint64_t id : ids) EXPECT_NE(id, 0u);
  EXPECT_EQ(start_wait(root, "cap/w", outcomes[3]), 0u);
  ASSERT_TRUE(outcomes[3].has_value());
  EXPECT_ERROR(*outcomes[3], StatusCode::kResourceExhausted,
               {"uid 0: max_waits_per_uid 3 reached"});
  // Another uid waits within its own count.
  auto other = registry_->OpenSession(PeerCredentials{.pid = 1, .uid = 1001, .gid = 1001}, "o");
  ASSERT_OK(other);
  std::optional<Result<v1::AcquireResponse>> others;
  const std::uint64_t other_wait = start_wait(other->session_id, "cap/w", others);
  EXPECT_NE(other_wait, 0u);
  EXPECT_FALSE(others.has_value());
  // A wait that ends makes room.
  EXPECT_TRUE(registry_->CancelWait(ids[0]));
  const std::uint64_t last = start_wait(root, "cap/w", outcomes[4]);
  EXPECT_NE(last, 0u);
  EXPECT_FALSE(outcomes[4].has_value());
  // None outlives the outcomes it would write.
  for (std::uint64_t id : {ids[1], ids[2], last, other_wait})
    EXPECT_TRUE(registry_->CancelWait(id));
}

TEST_F(RegistryTest, WatchSeesPublishesAndDeletesInOrder) {
  std::vector<std::string> seen;
  std::mutex mutex;
  const std::uint64_t watch = registry_->Watch(
      "w/",
      [&](const v1::WatchEvent& event) {
        std::lock_guard lock(mutex);
        seen.push_back(std::to_string(event.kind()) + ":" + event.name() + "@" +
                       std::to_string(event.version()));
      },
      nullptr);
  Put("w/a");
  Put("x/ignored");
  Put("w/a");
  v1::DeleteRequest remove;
  remove.set_name("w/a");
  ASSERT_OK(registry_->Delete(consumer_, remove));
  registry_->Unwatch(watch);
  Put("w/b");
  std::lock_guard lock(mutex);
  EXPECT_EQ(seen, (std::vector<std::string>{"2:w/a@1", "2:w/a@2", "3:w/a@2"}));
}

TEST_F(RegistryTest, SegmentAccessFollowsAllocationsAndLeases) {
  auto allocation = Allocate(producer_, DenseFloat32({1024}));
  ASSERT_OK(allocation);
  const std::uint64_t segment = allocation->buffers(0).segment_id();
  EXPECT_OK(registry_->GrantSegment(producer_, segment, /*writable=*/true));
  EXPECT_ERROR(registry_->GrantSegment(consumer_, segment, false), StatusCode::kPermissionDenied);
  ASSERT_OK(Publish(producer_, allocation->allocation_id(), "seg/t"));
  EXPECT_ERROR(registry_->GrantSegment(producer_, segment, true), StatusCode::kPermissionDenied,
               {"write access"});
  ASSERT_OK(Acquire(consumer_, "seg/t"));
  auto read_only = registry_->GrantSegment(consumer_, segment, false);
  ASSERT_OK(read_only);
  EXPECT_FALSE(read_only->writable);
  EXPECT_ERROR(registry_->GrantSegment(consumer_, segment, true), StatusCode::kPermissionDenied);
  EXPECT_ERROR(registry_->GrantSegment(consumer_, 999, false), StatusCode::kNotFound);
}

TEST_F(RegistryTest, TokensAuthenticateSessions) {
  auto grant = registry_->OpenSession(PeerCredentials{.pid = 7, .uid = 0, .gid = 0}, "c");
  ASSERT_OK(grant);
  EXPECT_EQ(grant->token.size(), 32u);
  EXPECT_EQ(registry_->Authenticate(grant->token).value(), grant->session_id);
  EXPECT_ERROR(registry_->Authenticate("nope"), StatusCode::kUnauthenticated);
  EXPECT_ERROR(registry_->Authenticate(""), StatusCode::kUnauthenticated, {"no session token"});
  registry_->CloseSession(grant->session_id);
  EXPECT_ERROR(registry_->Authenticate(grant->token), StatusCode::kUnauthenticated);
}

TEST_F(RegistryTest, HandoffMustMatchTheBuffers) {
  auto allocation = Allocate(producer_, DenseFloat32({4}));
  ASSERT_OK(allocation);
  v1::PublishRequest request;
  request.set_allocation_id(allocation->allocation_id());
  request.set_name("h/t");
  request.mutable_handoff()->set_sync_mode(1);
  EXPECT_ERROR(registry_->Publish(producer_, request), StatusCode::kInvalidArgument,
               {"handoff.sync_mode 1 differs", "buffers[0].sync_mode 0"});
  request.mutable_handoff()->set_sync_mode(7);
  EXPECT_ERROR(registry_->Publish(producer_, request), StatusCode::kInvalidArgument,
               {"handoff.sync_mode 7 is neither"});
}

// A pool of device tag CUDA, for the registry's fence and slab rules without a device:
// a CpuPool's shared memory stands in for the slabs (the real CudaPool needs a GPU).
class CudaStandInPool final : public Pool {
 public:
  explicit CudaStandInPool(std::unique_ptr<CpuPool> memory) : memory_(std::move(memory)) {}

  [[nodiscard]] std::string_view name() const override { return memory_->name(); }
  [[nodiscard]] DeviceTag device_tag() const override { return DeviceTag::Cuda(); }
  [[nodiscard]] std::uint64_t page_size() const override { return memory_->page_size(); }
  [[nodiscard]] Result<PoolRange> Allocate(std::uint64_t byte_size) override {
    return memory_->Allocate(byte_size);
  }
  void Free(const PoolRange& range) override { memory_->Free(range); }
  [[nodiscard]] Result<SegmentAccess> OpenSegment(std::uint64_t segment_id,
                                                  bool writable) const override {
    return memory_->OpenSegment(segment_id, writable);
  }
  [[nodiscard]] std::optional<std::uint64_t> SegmentSize(std::uint64_t segment_id) const override {
    return memory_->SegmentSize(segment_id);
  }
  [[nodiscard]] PoolUsage Usage() const override {
    PoolUsage usage = memory_->Usage();
    usage.kind = "cuda";
    usage.huge_pages.clear();
    return usage;
  }

 private:
  std::unique_ptr<CpuPool> memory_;
};

constexpr std::uint32_t kEventMode = 1;

// A float32 tensor in CUDA memory whose buffer declares sync mode `sync_mode`.
v1::TensorDescriptor CudaFloat32(std::uint64_t elements, std::uint32_t sync_mode = kEventMode) {
  v1::TensorDescriptor descriptor = DenseFloat32({elements});
  descriptor.mutable_buffers(0)->set_device_tag(1);
  descriptor.mutable_buffers(0)->set_sync_mode(sync_mode);
  return descriptor;
}

// The registry with a CUDA pool "cuda:0" (segment ids from 1 << 32, as device 0's slabs).
class RegistryFenceTest : public RegistryTest {
 protected:
  void AddPools() override {
    auto memory = CpuPool::Create(CpuPool::Options{.name = "cuda:0",
                                                   .capacity_bytes = kPoolBytes,
                                                   .shm_prefix = "hurray-test",
                                                   .first_segment_id = std::uint64_t{1} << 32});
    ASSERT_OK(memory);
    auto pool = std::make_unique<CudaStandInPool>(std::move(*memory));
    cuda_ = pool.get();
    pools_.Add(std::move(pool));
  }

  Result<v1::PublishResponse> PublishEvent(std::uint64_t session, std::uint64_t allocation,
                                           std::string name) {
    v1::PublishRequest request;
    request.set_allocation_id(allocation);
    request.set_name(std::move(name));
    request.mutable_handoff()->set_sync_mode(kEventMode);
    return registry_->Publish(session, request);
  }

  // Allocates an Event-mode tensor in cuda:0 and publishes it unsignalled; returns the
  // allocation, with its fence.
  v1::AllocateResponse PutEvent(const std::string& name) {
    auto allocation = Allocate(producer_, CudaFloat32(1024), "cuda:0");
    EXPECT_OK(allocation);
    EXPECT_OK(PublishEvent(producer_, allocation->allocation_id(), name));
    return *allocation;
  }

  // A mapping of the fence's segment through a descriptor the registry grants `session`.
  testing::SharedMapping MapFence(std::uint64_t session, const v1::Fence& fence, bool writable) {
    auto access = registry_->GrantSegment(session, fence.segment_id(), writable);
    EXPECT_OK(access);
    if (!access) return testing::SharedMapping::Of(-1, 0, false);
    return testing::SharedMapping::Of(access->fd.get(), access->segment_size, writable);
  }

  [[nodiscard]] v1::PoolStats CudaStats() const {
    const v1::StatsResponse response = registry_->Stats();
    for (const v1::PoolStats& stats : response.pools()) {
      if (stats.name() == "cuda:0") return stats;
    }
    ADD_FAILURE() << "no stats of pool cuda:0";
    return {};
  }

  Pool* cuda_ = nullptr;
};

TEST_F(RegistryFenceTest, EventAllocationTakesAFence) {
  auto allocation = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(allocation);
  ASSERT_TRUE(allocation->has_fence());
  const v1::Fence& fence = allocation->fence();
  EXPECT_EQ(fence.segment_id(), kFirstFenceSegmentId);
  EXPECT_GE(fence.segment_size(), 4096u);
  EXPECT_EQ(fence.offset() % 8, 0u);
  EXPECT_EQ(fence.value(), 1u);
  EXPECT_EQ(CudaStats().fences_in_use(), 1u);
  // ProducerSynced buffers take none, and neither does the CPU pool.
  auto synced = Allocate(producer_, CudaFloat32(1024, 0), "cuda:0");
  ASSERT_OK(synced);
  EXPECT_FALSE(synced->has_fence());
  v1::TensorDescriptor cpu_event = DenseFloat32({4});
  cpu_event.mutable_buffers(0)->set_sync_mode(kEventMode);
  EXPECT_ERROR(Allocate(producer_, cpu_event), StatusCode::kFailedPrecondition,
               {"buffers[0].sync_mode 1 (event) needs a fence", "pool cpu is not one"});
  EXPECT_EQ(CudaStats().fences_in_use(), 1u);
}

TEST_F(RegistryFenceTest, AcquireSaysReadyOnceTheProducerWroteTheFence) {
  auto allocation = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(allocation);
  const v1::Fence fence = allocation->fence();
  // The producer maps the fence segment before publishing, as it must to signal it.
  testing::SharedMapping producer = MapFence(producer_, fence, /*writable=*/true);
  ASSERT_OK(PublishEvent(producer_, allocation->allocation_id(), "gpu/w"));

  auto first = Acquire(consumer_, "gpu/w");
  ASSERT_OK(first);
  const v1::SyncHandoff& handoff = first->tensor().handoff();
  EXPECT_EQ(handoff.sync_mode(), kEventMode);
  using google::protobuf::util::MessageDifferencer;
  EXPECT_TRUE(MessageDifferencer::Equals(handoff.fence(), fence)) << handoff.DebugString();
  EXPECT_FALSE(handoff.ready());
  v1::DescribeRequest describe;
  describe.set_name("gpu/w");
  auto pending = registry_->Describe(describe, nullptr);
  ASSERT_OK(pending);
  EXPECT_FALSE(pending->tensor().handoff().ready());
  testing::SharedMapping consumer = MapFence(consumer_, fence, /*writable=*/false);
  EXPECT_EQ(consumer.ReadWord(fence.offset()), 0u);

  producer.WriteWord(fence.offset(), fence.value());  // What the producer's GPU does.
  auto second = Acquire(consumer_, "gpu/w");
  ASSERT_OK(second);
  EXPECT_TRUE(second->tensor().handoff().ready());
  EXPECT_EQ(consumer.ReadWord(fence.offset()), fence.value());
  // Describe shows the fence, and says it is reached now.
  auto described = registry_->Describe(describe, nullptr);
  ASSERT_OK(described);
  EXPECT_TRUE(MessageDifferencer::Equals(described->tensor().handoff().fence(), fence));
  EXPECT_TRUE(described->tensor().handoff().ready());
}

TEST_F(RegistryFenceTest, FenceSegmentsAreGrantedLikeTheirTensors) {
  auto allocation = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(allocation);
  const std::uint64_t segment = allocation->fence().segment_id();
  const std::uint64_t bystander = OpenSession();
  auto writable = registry_->GrantSegment(producer_, segment, /*writable=*/true);
  ASSERT_OK(writable);
  EXPECT_TRUE(writable->writable);
  EXPECT_EQ(writable->segment_size, allocation->fence().segment_size());
  EXPECT_OK(registry_->GrantSegment(producer_, segment, /*writable=*/false));
  EXPECT_ERROR(registry_->GrantSegment(consumer_, segment, false), StatusCode::kPermissionDenied,
               {"holds no lease or allocation"});
  ASSERT_OK(PublishEvent(producer_, allocation->allocation_id(), "gpu/g"));
  EXPECT_ERROR(registry_->GrantSegment(producer_, segment, true), StatusCode::kPermissionDenied,
               {"write access"});
  ASSERT_OK(Acquire(consumer_, "gpu/g"));
  auto read_only = registry_->GrantSegment(consumer_, segment, false);
  ASSERT_OK(read_only);
  EXPECT_FALSE(read_only->writable);
  EXPECT_ERROR(registry_->GrantSegment(consumer_, segment, true), StatusCode::kPermissionDenied);
  EXPECT_ERROR(registry_->GrantSegment(bystander, segment, false), StatusCode::kPermissionDenied);
  EXPECT_ERROR(registry_->GrantSegment(bystander, segment + 1, false), StatusCode::kNotFound,
               {"does not exist"});
}

TEST_F(RegistryFenceTest, PublishingEventNeedsTheAllocationsFence) {
  auto synced = Allocate(producer_, CudaFloat32(1024, 0), "cuda:0");
  ASSERT_OK(synced);
  EXPECT_ERROR(PublishEvent(producer_, synced->allocation_id(), "gpu/x"),
               StatusCode::kInvalidArgument, {"handoff.sync_mode 1 differs"});
  auto event = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(event);
  EXPECT_ERROR(Publish(producer_, event->allocation_id(), "gpu/x"), StatusCode::kInvalidArgument,
               {"handoff.sync_mode 0 differs"});
}

TEST_F(RegistryFenceTest, ProducerEndingBeforeItsFenceDeletesTheVersion) {
  std::vector<std::string> seen;
  const std::uint64_t watch = registry_->Watch(
      "gpu/",
      [&](const v1::WatchEvent& event) {
        seen.push_back(std::to_string(event.kind()) + ":" + event.name() + "@" +
                       std::to_string(event.version()));
      },
      nullptr);
  const v1::AllocateResponse allocation = PutEvent("gpu/lost");
  const v1::Fence& fence = allocation.fence();
  auto lease = Acquire(consumer_, "gpu/lost");
  ASSERT_OK(lease);
  testing::SharedMapping consumer = MapFence(consumer_, fence, /*writable=*/false);
  EXPECT_EQ(CudaStats().fences_in_use(), 1u);

  registry_->CloseSession(producer_);
  // A consumer stream waiting for the fence sees the poison, which is above any value.
  EXPECT_EQ(consumer.ReadWord(fence.offset()), kFencePoison);
  EXPECT_ERROR(Acquire(consumer_, "gpu/lost"), StatusCode::kNotFound, {"gpu/lost"});
  EXPECT_EQ(seen, (std::vector<std::string>{"2:gpu/lost@1", "3:gpu/lost@1"}));
  // The lease keeps the memory, and the fence, until it ends; then the word is retired.
  EXPECT_GT(cuda_->Usage().used_bytes, 0u);
  EXPECT_EQ(CudaStats().fences_in_use(), 1u);
  ASSERT_OK(Release(consumer_, lease->lease_id()));
  EXPECT_EQ(cuda_->Usage().used_bytes, 0u);
  EXPECT_EQ(CudaStats().fences_in_use(), 0u);
  EXPECT_EQ(CudaStats().fences_retired(), 1u);
  EXPECT_EQ(registry_->Stats().version_count(), 0u);
  registry_->Unwatch(watch);
}

TEST_F(RegistryFenceTest, SupersededUnsignalledVersionsRetireTheirFences) {
  PutEvent("gpu/a");
  PutEvent("gpu/a");  // Version 1, unleased, is reclaimed: its fence was never reached.
  EXPECT_EQ(CudaStats().fences_retired(), 1u);
  EXPECT_EQ(CudaStats().fences_in_use(), 1u);
  registry_->CloseSession(producer_);
  EXPECT_EQ(CudaStats().fences_retired(), 2u);
  EXPECT_EQ(CudaStats().fences_in_use(), 0u);
  EXPECT_EQ(registry_->Stats().version_count(), 0u);
  EXPECT_EQ(cuda_->Usage().used_bytes, 0u);
}

TEST_F(RegistryFenceTest, ProducerEndingAfterItsFenceKeepsTheVersion) {
  auto allocation = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(allocation);
  const v1::Fence fence = allocation->fence();
  testing::SharedMapping producer = MapFence(producer_, fence, /*writable=*/true);
  ASSERT_OK(PublishEvent(producer_, allocation->allocation_id(), "gpu/kept"));
  producer.WriteWord(fence.offset(), fence.value());  // Signalled after publishing.
  registry_->CloseSession(producer_);
  auto acquired = Acquire(consumer_, "gpu/kept");
  ASSERT_OK(acquired);
  EXPECT_TRUE(acquired->tensor().handoff().ready());
  EXPECT_EQ(producer.ReadWord(fence.offset()), fence.value());
  EXPECT_EQ(CudaStats().fences_in_use(), 1u);
  EXPECT_EQ(CudaStats().fences_retired(), 0u);
}

TEST_F(RegistryFenceTest, ReachedFenceIsReusedWithALargerValueOnceItsVersionIsReclaimed) {
  auto allocation = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(allocation);
  const v1::Fence first = allocation->fence();
  testing::SharedMapping producer = MapFence(producer_, first, /*writable=*/true);
  ASSERT_OK(PublishEvent(producer_, allocation->allocation_id(), "gpu/r"));
  producer.WriteWord(first.offset(), first.value());
  // Version 2 supersedes version 1, which no lease holds: it is reclaimed, its fence freed.
  const v1::Fence second = PutEvent("gpu/r").fence();
  EXPECT_NE(second.offset(), first.offset());
  EXPECT_EQ(CudaStats().fences_in_use(), 1u);
  auto third = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(third);
  EXPECT_EQ(third->fence().segment_id(), first.segment_id());
  EXPECT_EQ(third->fence().offset(), first.offset());
  EXPECT_GT(third->fence().value(), first.value());
  EXPECT_EQ(CudaStats().fences_retired(), 0u);
}

TEST_F(RegistryFenceTest, UnsignalledFencesOfEndedAllocationsAreRetired) {
  auto cancelled = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(cancelled);
  v1::CancelAllocationRequest cancel;
  cancel.set_allocation_id(cancelled->allocation_id());
  ASSERT_OK(registry_->CancelAllocation(producer_, cancel));
  EXPECT_EQ(CudaStats().fences_retired(), 1u);
  ASSERT_OK(Allocate(producer_, CudaFloat32(1024), "cuda:0"));
  registry_->CloseSession(producer_);
  EXPECT_EQ(CudaStats().fences_in_use(), 0u);
  EXPECT_EQ(CudaStats().fences_retired(), 2u);
  EXPECT_EQ(cuda_->Usage().used_bytes, 0u);
}

TEST_F(RegistryFenceTest, PoisonUnreachedFencesLosesOnlyUnsignalledTensors) {
  const v1::AllocateResponse pending = PutEvent("gpu/pending");
  auto reached = Allocate(producer_, CudaFloat32(1024), "cuda:0");
  ASSERT_OK(reached);
  testing::SharedMapping producer = MapFence(producer_, reached->fence(), /*writable=*/true);
  producer.WriteWord(reached->fence().offset(), reached->fence().value());
  ASSERT_OK(PublishEvent(producer_, reached->allocation_id(), "gpu/reached"));
  auto lease = Acquire(consumer_, "gpu/pending");
  ASSERT_OK(lease);
  testing::SharedMapping consumer = MapFence(consumer_, pending.fence(), /*writable=*/false);

  EXPECT_EQ(registry_->PoisonUnreachedFences(), 1u);
  EXPECT_EQ(consumer.ReadWord(pending.fence().offset()), kFencePoison);
  EXPECT_ERROR(Acquire(consumer_, "gpu/pending"), StatusCode::kNotFound, {"is lost"});
  auto ready = Acquire(consumer_, "gpu/reached");
  ASSERT_OK(ready);
  EXPECT_TRUE(ready->tensor().handoff().ready());
  EXPECT_EQ(registry_->PoisonUnreachedFences(), 0u);
}

TEST_F(RegistryFenceTest, SlabMappingsAreCountedPerSessionUntilItEnds) {
  auto allocation = Allocate(producer_, CudaFloat32(1024, 0), "cuda:0");
  ASSERT_OK(allocation);
  const std::uint64_t slab = allocation->buffers(0).segment_id();
  std::uint64_t segment = slab;
  Registry::SlabUse use = Registry::SlabUse::kReadWrite;
  EXPECT_ERROR(registry_->SlabMapped(producer_, segment, use), StatusCode::kPermissionDenied,
               {"never granted"});
  ASSERT_OK(registry_->GrantSegment(producer_, slab, /*writable=*/true));
  EXPECT_OK(registry_->SlabMapped(producer_, segment, use));
  EXPECT_OK(registry_->SlabMapped(producer_, segment, use));  // A second report counts once.
  ASSERT_OK(Publish(producer_, allocation->allocation_id(), "gpu/s"));
  ASSERT_OK(Acquire(consumer_, "gpu/s"));
  ASSERT_OK(registry_->GrantSegment(consumer_, slab, /*writable=*/false));
  use = Registry::SlabUse::kReadOnly;
  EXPECT_OK(registry_->SlabMapped(consumer_, segment, use));
  EXPECT_EQ(CudaStats().slab_mappings(), 2u);
  EXPECT_EQ(CudaStats().read_only_slab_mappings(), 1u);

  // Only slabs: not a CPU segment, not a fence segment, not an unknown id.
  auto cpu = Allocate(producer_, DenseFloat32({16}));
  ASSERT_OK(cpu);
  ASSERT_OK(registry_->GrantSegment(producer_, cpu->buffers(0).segment_id(), true));
  segment = cpu->buffers(0).segment_id();
  EXPECT_ERROR(registry_->SlabMapped(producer_, segment, use), StatusCode::kInvalidArgument,
               {"pool cpu, which is not a CUDA pool"});
  const v1::AllocateResponse event = PutEvent("gpu/e");
  segment = event.fence().segment_id();
  EXPECT_ERROR(registry_->SlabMapped(producer_, segment, use), StatusCode::kInvalidArgument,
               {"fence segment"});
  segment = 999;
  EXPECT_ERROR(registry_->SlabMapped(producer_, segment, use), StatusCode::kNotFound,
               {"segment_id 999 does not exist"});

  registry_->CloseSession(consumer_);
  EXPECT_EQ(CudaStats().slab_mappings(), 1u);
  EXPECT_EQ(CudaStats().read_only_slab_mappings(), 0u);
  // The CPU pool reports none.
  const v1::StatsResponse stats_response = registry_->Stats();
  for (const v1::PoolStats& stats : stats_response.pools()) {
    if (stats.name() == "cpu") {
      EXPECT_EQ(stats.slab_mappings(), 0u);
    }
  }
}

TEST_F(RegistryFenceTest, ASlabReportedUnmappedIsNoLongerKept) {
  auto allocation = Allocate(producer_, CudaFloat32(1024, 0), "cuda:0");
  ASSERT_OK(allocation);
  const std::uint64_t slab = allocation->buffers(0).segment_id();
  ASSERT_OK(registry_->GrantSegment(producer_, slab, /*writable=*/true));
  ASSERT_OK(Publish(producer_, allocation->allocation_id(), "gpu/m"));
  ASSERT_OK(Acquire(consumer_, "gpu/m"));
  ASSERT_OK(registry_->GrantSegment(consumer_, slab, /*writable=*/false));
  std::uint64_t segment = slab;
  Registry::SlabUse use = Registry::SlabUse::kReadOnly;
  ASSERT_OK(registry_->SlabMapped(consumer_, segment, use));
  ASSERT_OK(registry_->SlabMapped(producer_, segment, use));
  EXPECT_EQ(registry_->MappedSlabs(), (std::set<std::uint64_t>{slab}));
  use = Registry::SlabUse::kUnmapped;
  ASSERT_OK(registry_->SlabMapped(consumer_, segment, use));
  // The producer still maps it.
  EXPECT_EQ(registry_->MappedSlabs(), (std::set<std::uint64_t>{slab}));
  EXPECT_EQ(CudaStats().slab_mappings(), 1u);
  ASSERT_OK(registry_->SlabMapped(producer_, segment, use));
  EXPECT_TRUE(registry_->MappedSlabs().empty());
  EXPECT_EQ(CudaStats().slab_mappings(), 0u);
}

TEST(TensorNameTest, Rules) {
  EXPECT_OK(ValidateTensorName("llama-3/layers.0.mlp/up_proj"));
  EXPECT_ERROR(ValidateTensorName("flat"), StatusCode::kInvalidArgument, {"namespace"});
  EXPECT_ERROR(ValidateTensorName("/x"), StatusCode::kInvalidArgument, {"empty part"});
  EXPECT_ERROR(ValidateTensorName("ns/"), StatusCode::kInvalidArgument, {"empty part"});
  EXPECT_ERROR(ValidateTensorName("ns/a b"), StatusCode::kInvalidArgument, {"character"});
  EXPECT_ERROR(ValidateTensorName("ns/" + std::string(129, 'a')), StatusCode::kInvalidArgument,
               {"longer than 128"});
  EXPECT_ERROR(ValidateTensorName(std::string(200, 'a') + "/" + std::string(128, 'b') + "/" +
                                  std::string(128, 'c') + "/" + std::string(60, 'd')),
               StatusCode::kInvalidArgument, {"above the limit 512"});
}

// Registry with sessions of two ordinary uids, under the default policy or the rules a
// test gives.
class RegistryAccessTest : public RegistryTest {
 protected:
  std::uint64_t OpenSessionAs(std::uint32_t uid) {
    auto grant = registry_->OpenSession(PeerCredentials{.pid = 1, .uid = uid, .gid = uid}, "t");
    EXPECT_OK(grant);
    return grant->session_id;
  }
  Result<v1::PublishResponse> PutAs(std::uint64_t session, const std::string& name) {
    auto allocation = Allocate(session, DenseFloat32({16}));
    if (!allocation) return std::unexpected(allocation.error());
    return Publish(session, allocation->allocation_id(), name);
  }
  void UsePolicy(AccessPolicy policy) {
    RebuildRegistry(
        Registry::Options{.access = std::make_shared<const AccessPolicy>(std::move(policy))});
  }
};

TEST_F(RegistryAccessTest, DefaultPolicyKeepsANamespaceItsFirstPublishersWhileAVersionLives) {
  const std::uint64_t alice = OpenSessionAs(1001);
  const std::uint64_t bob = OpenSessionAs(1002);
  ASSERT_OK(PutAs(alice, "team/w"));
  EXPECT_ERROR(PutAs(bob, "team/w"), StatusCode::kPermissionDenied, {"owned by uid 1001"});
  v1::DeleteRequest remove;
  remove.set_name("team/w");
  EXPECT_ERROR(registry_->Delete(bob, remove), StatusCode::kPermissionDenied,
               {"namespace \"team\": delete denied to uid 1002 by the default policy"});
  ASSERT_OK(Acquire(bob, "team/w"));
  v1::DescribeRequest describe;
  describe.set_name("team/w");
  ASSERT_OK_AND_ASSIGN(const v1::DescribeResponse described,
                       registry_->Describe(describe, nullptr));
  EXPECT_EQ(described.owner().uid(), 1001u);
  v1::ListResponse listed = *registry_->List(v1::ListRequest(), nullptr);
  ASSERT_EQ(listed.tensors_size(), 1);
  EXPECT_EQ(listed.tensors(0).owner_uid(), 1001u);
  // Superseded versions keep the namespace's owner, even when the daemon's uid publishes.
  ASSERT_OK(PutAs(producer_, "team/w2"));
  ASSERT_OK_AND_ASSIGN(const v1::DescribeResponse again, [&] {
    v1::DescribeRequest request;
    request.set_name("team/w2");
    return registry_->Describe(request, nullptr);
  }());
  EXPECT_EQ(again.owner().uid(), 1001u);
  ASSERT_OK(registry_->Delete(alice, remove));
  remove.set_name("team/w2");
  ASSERT_OK(registry_->Delete(alice, remove));
  // The leased version still lives: the namespace is still alice's.
  EXPECT_ERROR(PutAs(bob, "team/x"), StatusCode::kPermissionDenied, {"owned by uid 1001"});
  registry_->CloseSession(bob);  // Its lease ends; nothing lives in team/ any more.
  EXPECT_OK(PutAs(OpenSessionAs(1002), "team/x"));
}

TEST_F(RegistryAccessTest, AnonymousInspectionSeesOnlyNamesAnyMayRead) {
  ASSERT_OK_AND_ASSIGN(
      AccessPolicy policy,
      AccessPolicy::Make(
          {{.pattern = "open/**", .publish = {"uid:1001"}, .read = {"any"}, .remove = {}},
           {.pattern = "closed/**", .publish = {"uid:1001"}, .read = {"uid:1001"}, .remove = {}}},
          {}, ::geteuid()));
  UsePolicy(std::move(policy));
  const std::uint64_t alice = OpenSessionAs(1001);
  const std::uint64_t bob = OpenSessionAs(1002);
  ASSERT_OK(PutAs(alice, "open/a"));
  ASSERT_OK(PutAs(alice, "closed/b"));
  std::vector<std::string> events;
  const std::uint64_t watch = registry_->Watch(
      "", [&](const v1::WatchEvent& event) { events.push_back(event.name()); }, nullptr);
  ASSERT_OK(PutAs(alice, "closed/c"));
  ASSERT_OK(PutAs(alice, "open/d"));
  registry_->Unwatch(watch);
  EXPECT_EQ(events, std::vector<std::string>{"open/d"});
  const v1::ListResponse anonymous = *registry_->List(v1::ListRequest(), nullptr);
  ASSERT_EQ(anonymous.tensors_size(), 2);
  EXPECT_EQ(anonymous.tensors(0).name(), "open/a");
  EXPECT_EQ(anonymous.tensors(1).name(), "open/d");
  const PeerCredentials alice_peer{.pid = 1, .uid = 1001, .gid = 1001};
  EXPECT_EQ(registry_->List(v1::ListRequest(), &alice_peer)->tensors_size(), 4);
  v1::DescribeRequest describe;
  describe.set_name("closed/b");
  EXPECT_ERROR(registry_->Describe(describe, nullptr), StatusCode::kPermissionDenied,
               {"read denied to anonymous callers by rule 2"});
  EXPECT_OK(registry_->Describe(describe, &alice_peer));
  EXPECT_ERROR(Acquire(bob, "closed/b"), StatusCode::kPermissionDenied,
               {"read denied to uid 1002 by rule 2"});
  // A prefix takes only what the session may read.
  v1::BatchAcquireRequest batch;
  batch.set_prefix("c");
  std::optional<Result<v1::BatchAcquireResponse>> got;
  registry_->BatchAcquire(bob, batch,
                          [&](Result<v1::BatchAcquireResponse> r) { got = std::move(r); });
  ASSERT_TRUE(got.has_value());
  ASSERT_OK(*got);
  EXPECT_EQ((*got)->tensors_size(), 0);
}

TEST_F(RegistryAccessTest, BatchAcquireRefusalSaysNothingOfWhetherANameIsPublished) {
  ASSERT_OK_AND_ASSIGN(
      AccessPolicy policy,
      AccessPolicy::Make(
          {{.pattern = "secret/**", .publish = {"uid:1001"}, .read = {"uid:1001"}, .remove = {}}},
          {}, ::geteuid()));
  UsePolicy(std::move(policy));
  const std::uint64_t alice = OpenSessionAs(1001);
  const std::uint64_t bob = OpenSessionAs(1002);
  ASSERT_OK(PutAs(alice, "secret/published"));
  for (const char* name : {"secret/published", "secret/never-published"}) {
    v1::BatchAcquireRequest batch;
    batch.add_names(name);
    batch.set_wait_timeout_ms(60'000);  // A refusal never waits.
    std::optional<Result<v1::BatchAcquireResponse>> got;
    registry_->BatchAcquire(bob, batch,
                            [&](Result<v1::BatchAcquireResponse> r) { got = std::move(r); });
    ASSERT_TRUE(got.has_value()) << name;
    EXPECT_ERROR(*got, StatusCode::kPermissionDenied, {"read denied to uid 1002"});
  }
}

TEST_F(RegistryAccessTest, PoolNamespacesLimitPublishAndShowInStats) {
  ASSERT_OK_AND_ASSIGN(AccessPolicy policy,
                       AccessPolicy::Make({}, {{.pool = "cpu", .patterns = {"ok/**"}}}, 0));
  UsePolicy(std::move(policy));
  const std::uint64_t alice = OpenSessionAs(1001);
  EXPECT_OK(PutAs(alice, "ok/w"));
  EXPECT_ERROR(PutAs(alice, "no/w"), StatusCode::kPermissionDenied,
               {"pool cpu holds only namespaces [ok/**]"});
  const v1::StatsResponse stats = registry_->Stats();
  ASSERT_EQ(stats.pools_size(), 1);
  ASSERT_EQ(stats.pools(0).namespaces_size(), 1);
  EXPECT_EQ(stats.pools(0).namespaces(0), "ok/**");
}

// ---- Per-uid quotas ----

// Both fixture sessions are uid 0: the quotas bind them together.
// What the quotas charge for DenseFloat32({1024}): its 4096 buffer bytes and its descriptor.
std::uint64_t ChargedFor1024Floats() {
  return ChargedBytes(4096, DenseFloat32({1024}).ByteSizeLong());
}

class RegistryUidQuotaTest : public RegistryTest {
 protected:
  // Room for two tensors of 1024 floats.
  [[nodiscard]] UidQuota Quota() const override {
    return UidQuota{.pending_bytes = 2 * ChargedFor1024Floats(),
                    .published_bytes = 2 * ChargedFor1024Floats(),
                    .leases = 1};
  }
};

TEST_F(RegistryUidQuotaTest, PendingBytesQuotaSpansTheUidsSessions) {
  ASSERT_OK_AND_ASSIGN(const v1::AllocateResponse first, Allocate(producer_, DenseFloat32({1024})));
  ASSERT_OK(Allocate(consumer_, DenseFloat32({1024})));
  EXPECT_ERROR(Allocate(producer_, DenseFloat32({1024})), StatusCode::kResourceExhausted,
               {"uid 0: pending_bytes quota",
                fmt::format("exceeded ({} bytes pending, {} more", 2 * ChargedFor1024Floats(),
                            ChargedFor1024Floats())});
  v1::CancelAllocationRequest cancel;
  cancel.set_allocation_id(first.allocation_id());
  ASSERT_OK(registry_->CancelAllocation(producer_, cancel));
  EXPECT_OK(Allocate(producer_, DenseFloat32({1024})));
}

TEST_F(RegistryUidQuotaTest, PublishedBytesQuotaRefusesPublishAndKeepsTheAllocation) {
  Put("model/a");
  Put("model/b");
  ASSERT_OK_AND_ASSIGN(const v1::AllocateResponse third, Allocate(producer_, DenseFloat32({1024})));
  EXPECT_ERROR(Publish(producer_, third.allocation_id(), "model/c"), StatusCode::kResourceExhausted,
               {"uid 0: published_bytes quota",
                fmt::format("exceeded ({} bytes published, {} more", 2 * ChargedFor1024Floats(),
                            ChargedFor1024Floats())});
  EXPECT_EQ(registry_->Stats().pending_allocation_count(), 1u);
  v1::DeleteRequest remove;
  remove.set_name("model/a");
  ASSERT_OK(registry_->Delete(producer_, remove));
  EXPECT_OK(Publish(producer_, third.allocation_id(), "model/c"));
}

TEST_F(RegistryUidQuotaTest, LeasesQuotaRefusesAcquireUntilOneIsReleased) {
  Put("model/w");
  ASSERT_OK_AND_ASSIGN(const v1::AcquireResponse held, Acquire(consumer_, "model/w"));
  EXPECT_ERROR(Acquire(producer_, "model/w"), StatusCode::kResourceExhausted,
               {"uid 0: leases quota 1 exceeded (1 leases held)"});
  ASSERT_OK(Release(consumer_, held.lease_id()));
  EXPECT_OK(Acquire(producer_, "model/w"));
}

TEST_F(RegistryUidQuotaTest, StatsShowWhatEachUidHolds) {
  Put("model/w");
  ASSERT_OK(Allocate(producer_, DenseFloat32({16})));
  ASSERT_OK(Acquire(consumer_, "model/w"));
  const v1::StatsResponse stats = registry_->Stats();
  ASSERT_EQ(stats.uids_size(), 1);
  EXPECT_EQ(stats.uids(0).uid(), 0u);
  EXPECT_EQ(stats.uids(0).sessions(), 2u);
  EXPECT_EQ(stats.uids(0).published_bytes(), ChargedFor1024Floats());
  EXPECT_EQ(stats.uids(0).pending_bytes(), kMinChargedBytes);  // 64 bytes cost a page.
  EXPECT_EQ(stats.uids(0).leases(), 1u);
  registry_->CloseSession(consumer_);
  registry_->CloseSession(producer_);
  const v1::StatsResponse after = registry_->Stats();
  ASSERT_EQ(after.uids_size(), 1);  // The published version stays the uid's.
  EXPECT_EQ(after.uids(0).sessions(), 0u);
  EXPECT_EQ(after.uids(0).pending_bytes(), 0u);
  EXPECT_EQ(after.uids(0).leases(), 0u);
  EXPECT_EQ(after.uids(0).published_bytes(), ChargedFor1024Floats());
}

TEST_F(RegistryUidQuotaTest, ZeroByteTensorsAndMetadataCountAgainstTheByteQuotas) {
  // A zero-byte tensor costs a page: a quota of two tensors' worth holds few of them.
  int allocated = 0;
  for (; allocated < 10; ++allocated) {
    if (!Allocate(producer_, DenseFloat32({0}))) break;
  }
  EXPECT_EQ(allocated, static_cast<int>(2 * ChargedFor1024Floats() / kMinChargedBytes));
  // Metadata counts byte for byte.
  v1::TensorDescriptor heavy = DenseFloat32({0});
  (*heavy.mutable_metadata())["note"] = std::string(3 * ChargedFor1024Floats(), 'm');
  registry_->CloseSession(producer_);
  producer_ = OpenSession();
  EXPECT_ERROR(Allocate(producer_, heavy), StatusCode::kResourceExhausted, {"pending_bytes quota"});
}

}  // namespace
}  // namespace hurray::daemon
