// Eviction: EvictionList's order, and the registry evicting evictable versions from a full
// CPU pool (least recently used first, never while leased, only when nothing else fits).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <string>
#include <vector>

#include "hurray/descriptor_codec.h"
#include "pool/cpu_pool.h"
#include "registry/eviction_list.h"
#include "registry/registry.h"
#include "registry/version_store.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kPoolBytes = 1 << 20;
constexpr std::uint64_t kQuarterElements = kPoolBytes / 4 / sizeof(float);  // A quarter pool.

TEST(EvictionListTest, OldestIsLeastRecentlyTouchedWithoutLease) {
  TensorVersion first, second, third;
  EvictionList list;
  list.Add(&first);
  list.Add(&second);
  list.Add(&third);
  EXPECT_EQ(list.Oldest(nullptr), &first);
  list.Touch(&first);
  EXPECT_EQ(list.Oldest(nullptr), &second);
  second.lease_count = 1;
  EXPECT_EQ(list.Oldest(nullptr), &third);
  list.Remove(&third);
  EXPECT_EQ(list.Oldest(nullptr), &first);
  second.lease_count = 0;
  EXPECT_EQ(list.Oldest(nullptr), &second);
  EXPECT_EQ(list.size(), 2u);
}

TEST(EvictionListTest, PoolsAreKeptApart) {
  TensorVersion in_a, in_b;
  int pool_a = 0, pool_b = 0;  // Only their addresses matter.
  in_a.pool = reinterpret_cast<Pool*>(&pool_a);
  in_b.pool = reinterpret_cast<Pool*>(&pool_b);
  EvictionList list;
  list.Add(&in_a);
  list.Add(&in_b);
  EXPECT_EQ(list.Oldest(in_b.pool), &in_b);
  list.Remove(&in_b);
  EXPECT_EQ(list.Oldest(in_b.pool), nullptr);
  EXPECT_EQ(list.Oldest(in_a.pool), &in_a);
}

TEST(EvictionListTest, SupersededOrDeletedVersionsLeaveTheList) {
  VersionStore store;
  auto make = [&store](bool evictable) {
    auto version = std::make_shared<TensorVersion>();
    version->number = store.NextNumber("a/x");
    version->evictable = evictable;
    return version;
  };
  auto first = make(true);
  store.Add("a/x", first);
  EXPECT_EQ(store.EvictionCandidate(nullptr), first.get());
  store.Add("a/x", make(false));  // Supersedes the evictable one.
  EXPECT_EQ(store.EvictionCandidate(nullptr), nullptr);
  auto third = make(true);
  store.Add("a/x", third);
  EXPECT_EQ(store.EvictionCandidate(nullptr), third.get());
  EXPECT_EQ(store.MarkDeleted("a/x", 0).size(), 1u);
  EXPECT_EQ(store.EvictionCandidate(nullptr), nullptr);
}

// A registry over a 1 MiB CPU pool, filled by quarters.
class EvictionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pool = CpuPool::Create(CpuPool::Options{
        .name = "cpu", .capacity_bytes = kPoolBytes, .shm_prefix = "hurray-evict-test"});
    ASSERT_OK(pool);
    pool_ = pool->get();
    pools_.Add(std::move(*pool));
    registry_ = std::make_unique<Registry>(pools_, io_, Registry::Options{});
    auto grant = registry_->OpenSession(PeerCredentials{.pid = 1, .uid = 0, .gid = 0}, "test");
    ASSERT_OK(grant);
    session_ = grant->session_id;
    watch_ = registry_->Watch(
        "",
        [this](const v1::WatchEvent& event) {
          if (event.kind() == v1::WatchEvent::KIND_EVICTED) evicted_.push_back(event.name());
        },
        /*viewer=*/nullptr);
  }

  void TearDown() override { registry_->Unwatch(watch_); }

  Result<v1::AllocateResponse> AllocateElements(std::uint64_t elements) {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() =
        DescriptorToProto(*TensorDescriptor::Dense(ElementType::kFloat32, {elements}));
    return registry_->Allocate(session_, request);
  }

  // Publishes a quarter of the pool under `name`.
  void PutQuarter(const std::string& name, bool evictable = true) {
    auto allocation = AllocateElements(kQuarterElements);
    ASSERT_OK(allocation);
    v1::PublishRequest request;
    request.set_allocation_id(allocation->allocation_id());
    request.set_name(name);
    request.set_evictable(evictable);
    ASSERT_OK(registry_->Publish(session_, request));
  }

  // Acquires the latest version of `name`; returns the lease.
  std::uint64_t Lease(const std::string& name) {
    v1::AcquireRequest request;
    request.set_name(name);
    auto acquired = registry_->AcquireNow(session_, request);
    EXPECT_OK(acquired);
    return acquired ? acquired->lease_id() : 0;
  }

  void Release(std::uint64_t lease) {
    v1::ReleaseRequest request;
    request.add_lease_ids(lease);
    ASSERT_OK(registry_->Release(session_, request));
  }

  bool Published(const std::string& name) {
    v1::DescribeRequest request;
    request.set_name(name);
    return registry_->Describe(request, /*viewer=*/nullptr).has_value();
  }

  // Fills the pool with evictable e/0 .. e/3, published in that order.
  void FillEvictable() {
    for (int i = 0; i < 4; ++i) PutQuarter("e/" + std::to_string(i));
  }

  boost::asio::io_context io_;
  PoolSet pools_;
  Pool* pool_ = nullptr;
  std::unique_ptr<Registry> registry_;
  std::uint64_t session_ = 0;
  std::uint64_t watch_ = 0;
  std::vector<std::string> evicted_;
};

TEST_F(EvictionTest, FullPoolEvictsLeastRecentlyUsed) {
  FillEvictable();
  Release(Lease("e/0"));  // e/0 is now the most recently used; e/1 the least.
  ASSERT_OK(AllocateElements(kQuarterElements));
  EXPECT_EQ(evicted_, std::vector<std::string>{"e/1"});
  EXPECT_FALSE(Published("e/1"));
  EXPECT_TRUE(Published("e/0"));
  EXPECT_TRUE(Published("e/2"));
  const v1::StatsResponse stats = registry_->Stats();
  EXPECT_EQ(stats.evicted_tensor_count(), 1u);
  EXPECT_EQ(stats.evicted_bytes_total(), kPoolBytes / 4);
  EXPECT_EQ(stats.tensor_count(), 3u);
}

TEST_F(EvictionTest, EvictsAsManyAsTheAllocationNeeds) {
  FillEvictable();
  ASSERT_OK(AllocateElements(2 * kQuarterElements));
  EXPECT_EQ(evicted_, (std::vector<std::string>{"e/0", "e/1"}));
  EXPECT_EQ(registry_->Stats().evicted_bytes_total(), kPoolBytes / 2);
}

TEST_F(EvictionTest, LeasedVersionsAreNeverEvicted) {
  FillEvictable();
  std::vector<std::uint64_t> leases;
  leases.reserve(4);
  for (int i = 0; i < 4; ++i) leases.push_back(Lease("e/" + std::to_string(i)));
  auto refused = AllocateElements(kQuarterElements);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(evicted_.empty());
  Release(leases[2]);
  ASSERT_OK(AllocateElements(kQuarterElements));
  EXPECT_EQ(evicted_, std::vector<std::string>{"e/2"});
}

TEST_F(EvictionTest, VersionsNotEvictableStay) {
  for (int i = 0; i < 4; ++i) PutQuarter("k/" + std::to_string(i), /*evictable=*/false);
  auto refused = AllocateElements(kQuarterElements);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(evicted_.empty());
  EXPECT_EQ(registry_->Stats().tensor_count(), 4u);
}

TEST_F(EvictionTest, NothingIsEvictedWhileTheAllocationFits) {
  PutQuarter("e/0");
  PutQuarter("e/1");
  ASSERT_OK(AllocateElements(2 * kQuarterElements));
  EXPECT_TRUE(evicted_.empty());
  EXPECT_EQ(registry_->Stats().evicted_tensor_count(), 0u);
}

TEST_F(EvictionTest, AllocationLargerThanThePoolEvictsNothing) {
  FillEvictable();
  auto refused = AllocateElements(5 * kQuarterElements);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(evicted_.empty());
}

TEST_F(EvictionTest, EvictedNameCanBePublishedAgain) {
  FillEvictable();
  auto allocation = AllocateElements(kQuarterElements);  // Evicts e/0.
  ASSERT_OK(allocation);
  v1::AcquireRequest acquire;
  acquire.set_name("e/0");
  auto gone = registry_->AcquireNow(session_, acquire);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code(), StatusCode::kNotFound);
  v1::PublishRequest publish;
  publish.set_allocation_id(allocation->allocation_id());
  publish.set_name("e/0");
  auto again = registry_->Publish(session_, publish);
  ASSERT_OK(again);
  EXPECT_EQ(again->version(), 1u);
}

}  // namespace
}  // namespace hurray::daemon
