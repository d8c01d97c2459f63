// VersionStore: superseding, deleting and reclaiming versions (empty buffers: no pool).
#include "registry/version_store.h"

#include <gtest/gtest.h>

namespace hurray::daemon {
namespace {

class VersionStoreTest : public ::testing::Test {
 protected:
  // Adds the next version of `name`, with no buffers (but `byte_size` counted as its size).
  TensorVersion* Add(const std::string& name, std::uint64_t byte_size = 0) {
    auto version = std::make_shared<TensorVersion>();
    version->number = store_.NextNumber(name);
    version->byte_size = byte_size;
    TensorVersion* added = version.get();
    store_.Add(name, std::move(version));
    return added;
  }

  VersionStore store_;
};

TEST_F(VersionStoreTest, ANewVersionSupersedesAndAnUnleasedOneGoes) {
  TensorVersion* first = Add("m/w");
  EXPECT_EQ(first->number, 1u);
  EXPECT_EQ(*first->name, "m/w");
  first->lease_count = 1;
  TensorVersion* second = Add("m/w");
  EXPECT_EQ(second->number, 2u);
  EXPECT_TRUE(first->superseded);
  EXPECT_EQ(store_.version_count(), 2u);  // The leased one lives on.
  EXPECT_EQ(store_.TensorCount(), 1u);
  EXPECT_EQ(store_.Find("m/w", 0).get(), second);
  EXPECT_EQ(store_.Find("m/w", 1).get(), first);
  EXPECT_EQ(store_.FindEntry("m/w")->LeaseCount(), 1u);

  first->lease_count = 0;
  store_.ReclaimIfUnused(first);
  EXPECT_EQ(store_.version_count(), 1u);
  EXPECT_EQ(store_.Find("m/w", 1), nullptr);
  Add("m/w");  // Superseding an unleased version reclaims it at once.
  EXPECT_EQ(store_.version_count(), 1u);
  EXPECT_EQ(store_.Find("m/w", 0)->number, 3u);
}

TEST_F(VersionStoreTest, DeletingHidesAndTheNameGoesWithItsLastVersion) {
  Add("m/a");
  TensorVersion* kept = Add("m/b");
  kept->lease_count = 1;
  EXPECT_TRUE(store_.MarkDeleted("m/b", 2).empty());  // No such version.
  std::vector<TensorVersion*> deleted = store_.MarkDeleted("m/b", 0);
  ASSERT_EQ(deleted.size(), 1u);
  EXPECT_EQ(store_.Find("m/b", 0), nullptr);
  EXPECT_EQ(store_.Find("m/b", 1), nullptr);
  EXPECT_TRUE(store_.MarkDeleted("m/b", 0).empty());  // Already deleted.
  store_.ReclaimIfUnused(deleted[0]);                 // Leased: stays.
  EXPECT_NE(store_.FindEntry("m/b"), nullptr);
  EXPECT_EQ(store_.TensorCount(), 1u);

  kept->lease_count = 0;
  store_.ReclaimIfUnused(kept);
  EXPECT_EQ(store_.FindEntry("m/b"), nullptr);
  EXPECT_EQ(store_.NextNumber("m/b"), 1u);
  EXPECT_EQ(store_.version_count(), 1u);
}

TEST_F(VersionStoreTest, PublishedAndReclaimedBytesCountEveryVersionOnce) {
  TensorVersion* first = Add("m/w", 100);
  first->lease_count = 1;
  Add("m/w", 30);  // Supersedes the leased first: nothing reclaimed yet.
  EXPECT_EQ(store_.published_bytes(), 130u);
  EXPECT_EQ(store_.reclaimed_bytes(), 0u);
  first->lease_count = 0;
  store_.ReclaimIfUnused(first);
  EXPECT_EQ(store_.reclaimed_bytes(), 100u);
  for (TensorVersion* deleted : store_.MarkDeleted("m/w", 0)) store_.ReclaimIfUnused(deleted);
  EXPECT_EQ(store_.reclaimed_bytes(), 130u);
  EXPECT_EQ(store_.published_bytes(), 130u);
}

}  // namespace
}  // namespace hurray::daemon
