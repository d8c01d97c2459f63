// The client's fast path (Client::Acquire, TensorView::fast_path): a version this process
// acquired before is acquired again with no message to the daemon, pinned in the session's
// lease page; anything the pin cannot vouch for goes the usual way, with the same results.
#include <vector>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

constexpr std::uint64_t kBytes = 256 * 1024;

class FastPathClientTest : public BothChannelsTest {
 protected:
  // Publishes a kBytes tensor filled from `seed` under `name` through `producer`; its version.
  static std::uint64_t Produce(Client& producer, const std::string& name, std::uint64_t seed) {
    auto tensor = producer.Allocate(MakeByteTensor(kBytes));
    EXPECT_OK(tensor);
    if (!tensor) return 0;
    FillBuffer(tensor->buffer(0), seed, 0);
    auto published = tensor->Publish(name);
    EXPECT_OK(published);
    return published ? published->version : 0;
  }
};

TEST_P(FastPathClientTest, SecondAcquireOfTheSameVersionTakesTheFastPath) {
  auto consumer = ConnectWithHotPath("fast-consumer");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/t", 3), 1u);

  ASSERT_OK_AND_ASSIGN(TensorView first, consumer->Acquire("fp/t"));
  EXPECT_FALSE(first.fast_path());
  EXPECT_NE(first.lease_id(), 0u);
  ASSERT_OK(first.Release());

  for (int round = 0; round < 20; ++round) {
    ASSERT_OK_AND_ASSIGN(TensorView view, consumer->Acquire("fp/t"));
    EXPECT_TRUE(view.fast_path()) << "round " << round;
    EXPECT_EQ(view.lease_id(), 0u);
    EXPECT_EQ(view.name(), "fp/t");
    EXPECT_EQ(view.version(), 1u);
    EXPECT_EQ(view.daemon_epoch(), consumer->daemon_epoch());
    EXPECT_EQ(CheckBuffer(view.buffer(0), 3, 0), "");
    // A pin is no lease of the daemon's.
    EXPECT_EQ(Stats().lease_count, 0u);
    ASSERT_OK(view.Release());
    EXPECT_FALSE(view.holds_lease());
  }
  // The version asked for by its number, when it is the one cached, is fast too.
  ASSERT_OK_AND_ASSIGN(TensorView numbered, consumer->Acquire("fp/t", {.version = 1}));
  EXPECT_TRUE(numbered.fast_path());
  ASSERT_OK(numbered.Release());
  ASSERT_OK(client().Delete("fp/t"));
  ExpectEverythingReturned();
}

TEST_P(FastPathClientTest, NewVersionIsAcquiredTheUsualWayThenOnTheFastPath) {
  auto consumer = ConnectWithHotPath("fast-new-version");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/v", 1), 1u);
  ASSERT_OK(consumer->Acquire("fp/v"));  // Cached; released at once.
  ASSERT_OK_AND_ASSIGN(TensorView old, consumer->Acquire("fp/v"));
  EXPECT_TRUE(old.fast_path());
  ASSERT_OK(old.Release());

  ASSERT_EQ(Produce(client(), "fp/v", 2), 2u);
  ASSERT_OK_AND_ASSIGN(TensorView slow, consumer->Acquire("fp/v"));
  EXPECT_FALSE(slow.fast_path());
  EXPECT_EQ(slow.version(), 2u);
  EXPECT_EQ(CheckBuffer(slow.buffer(0), 2, 0), "");
  ASSERT_OK(slow.Release());
  ASSERT_OK_AND_ASSIGN(TensorView fast, consumer->Acquire("fp/v"));
  EXPECT_TRUE(fast.fast_path());
  EXPECT_EQ(fast.version(), 2u);
  EXPECT_EQ(CheckBuffer(fast.buffer(0), 2, 0), "");
  ASSERT_OK(fast.Release());
  // The superseded version, asked for by number, is no longer the latest: a lease.
  EXPECT_ERROR(consumer->Acquire("fp/v", {.version = 1}), StatusCode::kNotFound, {"fp/v"});
  ASSERT_OK(client().Delete("fp/v"));
  ExpectEverythingReturned();
}

TEST_P(FastPathClientTest, DeletedNameIsNotFound) {
  auto consumer = ConnectWithHotPath("fast-deleted");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/d", 5), 1u);
  ASSERT_OK(consumer->Acquire("fp/d"));
  ASSERT_OK_AND_ASSIGN(TensorView fast, consumer->Acquire("fp/d"));
  EXPECT_TRUE(fast.fast_path());
  ASSERT_OK(fast.Release());
  ASSERT_OK(client().Delete("fp/d"));
  EXPECT_ERROR(consumer->Acquire("fp/d"), StatusCode::kNotFound, {"fp/d"});
  // Published anew, the name starts again at version 1: the new bytes, never the old.
  ASSERT_EQ(Produce(client(), "fp/d", 6), 1u);
  for (int round = 0; round < 2; ++round) {
    ASSERT_OK_AND_ASSIGN(TensorView view, consumer->Acquire("fp/d"));
    EXPECT_EQ(view.fast_path(), round == 1);
    EXPECT_EQ(CheckBuffer(view.buffer(0), 6, 0), "");
  }
  ASSERT_OK(client().Delete("fp/d"));
  ExpectEverythingReturned();
}

TEST_P(FastPathClientTest, ViewHeldAcrossSupersedeKeepsItsBytes) {
  auto consumer = ConnectWithHotPath("fast-held");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/h", 10), 1u);
  ASSERT_OK(consumer->Acquire("fp/h"));
  ASSERT_OK_AND_ASSIGN(TensorView held, consumer->Acquire("fp/h"));
  ASSERT_TRUE(held.fast_path());
  const std::uint64_t one_version = CpuPool().used_bytes;
  // New versions, whose memory would reuse the pinned one's were it freed.
  for (std::uint64_t seed = 11; seed < 15; ++seed) {
    ASSERT_NE(Produce(client(), "fp/h", seed), 0u);
    EXPECT_EQ(CheckBuffer(held.buffer(0), 10, 0), "") << "after publishing seed " << seed;
  }
  EXPECT_GT(CpuPool().used_bytes, one_version);  // The pinned version is still there.
  ASSERT_OK(held.Release());
  EXPECT_TRUE(Eventually([&] { return CpuPool().used_bytes == one_version; })) << Summary(Stats());
  ASSERT_OK(client().Delete("fp/h"));
  ExpectEverythingReturned();
}

TEST_P(FastPathClientTest, FastPathOffNeverTakesIt) {
  auto connected = Client::Connect({.socket_path = socket(),
                                    .client_name = "fast-off",
                                    .hot_path = GetParam(),
                                    .fast_path = false});
  ASSERT_OK(connected);
  Client& consumer = **connected;
  ASSERT_EQ(Produce(client(), "fp/off", 4), 1u);
  for (int round = 0; round < 5; ++round) {
    ASSERT_OK_AND_ASSIGN(TensorView view, consumer.Acquire("fp/off"));
    EXPECT_FALSE(view.fast_path());
    EXPECT_NE(view.lease_id(), 0u);
    EXPECT_EQ(CheckBuffer(view.buffer(0), 4, 0), "");
  }
  ASSERT_OK(client().Delete("fp/off"));
  ExpectEverythingReturned();
}

TEST_P(FastPathClientTest, EveryPinnedSlotTakenFallsBackToLeases) {
  auto consumer = ConnectWithHotPath("fast-slots");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/s", 8), 1u);
  ASSERT_OK(consumer->Acquire("fp/s"));
  std::vector<TensorView> views;
  std::size_t fast = 0;
  for (int i = 0; i < 600; ++i) {  // More than a lease page's 512 slots.
    ASSERT_OK_AND_ASSIGN(TensorView view, consumer->Acquire("fp/s"));
    fast += view.fast_path() ? 1 : 0;
    EXPECT_EQ(CheckBuffer(view.buffer(0), 8, 0), "");
    views.push_back(std::move(view));
  }
  EXPECT_GT(fast, 0u);
  EXPECT_LT(fast, views.size());
  EXPECT_EQ(Stats().lease_count, views.size() - fast);
  ASSERT_OK(consumer->Release(views));
  // On the session socket the release is one-way; Stats comes from another client, so the
  // consumer's own round trip is what orders it before the count.
  ASSERT_OK(consumer->SyncReleases());
  EXPECT_EQ(Stats().lease_count, 0u);
  ASSERT_OK_AND_ASSIGN(TensorView again, consumer->Acquire("fp/s"));
  EXPECT_TRUE(again.fast_path());  // The slots came back.
  ASSERT_OK(again.Release());
  ASSERT_OK(client().Delete("fp/s"));
  ExpectEverythingReturned();
}

TEST_P(FastPathClientTest, BatchAcquireFillsTheCache) {
  auto consumer = ConnectWithHotPath("fast-batch");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/b1", 21), 1u);
  ASSERT_EQ(Produce(client(), "fp/b2", 22), 1u);
  ASSERT_OK(consumer->BatchAcquire({}, "fp/"));
  ASSERT_OK_AND_ASSIGN(TensorView view, consumer->Acquire("fp/b2"));
  EXPECT_TRUE(view.fast_path());
  EXPECT_EQ(CheckBuffer(view.buffer(0), 22, 0), "");
  ASSERT_OK(view.Release());
  ASSERT_OK(client().Delete("fp/b1"));
  ASSERT_OK(client().Delete("fp/b2"));
  ExpectEverythingReturned();
}

HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS(FastPathClientTest);

class FastPathRestartTest : public IntegrationTest {};

TEST_F(FastPathRestartTest, AcquireAfterADaemonKillWorksOnTheNewEpoch) {
  auto consumer = Connect("fast-restart");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(RunAgent({"produce", "fp/r", "dense", "9"}), "version 1\n");
  ASSERT_OK(consumer->Acquire("fp/r"));
  ASSERT_OK_AND_ASSIGN(TensorView before, consumer->Acquire("fp/r"));
  ASSERT_TRUE(before.fast_path());
  const std::uint64_t old_epoch = before.daemon_epoch();
  ASSERT_OK(before.Release());

  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());

  // The new daemon ended the old directory: no pin confirms, and the acquire goes to it.
  ASSERT_OK_AND_ASSIGN(TensorView after, consumer->Acquire("fp/r"));
  EXPECT_FALSE(after.fast_path());
  EXPECT_NE(after.daemon_epoch(), old_epoch);
  EXPECT_EQ(after.daemon_epoch(), consumer->daemon_epoch());
  EXPECT_EQ(CheckBuffer(after.buffer(0), 9, 0), "");
  ASSERT_OK(after.Release());
  ASSERT_OK_AND_ASSIGN(TensorView fast, consumer->Acquire("fp/r"));
  EXPECT_TRUE(fast.fast_path());
  EXPECT_EQ(fast.daemon_epoch(), consumer->daemon_epoch());
  EXPECT_EQ(CheckBuffer(fast.buffer(0), 9, 0), "");
  ASSERT_OK(fast.Release());
  EXPECT_EQ(RunAgent({"consume", "fp/r", "9"}), "OK dense v1\n");
  ASSERT_OK(client().Delete("fp/r"));
  ExpectEverythingReturned();
}

}  // namespace
}  // namespace hurray::integration
