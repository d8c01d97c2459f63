// The client's fast path (Client::Acquire, TensorView::fast_path): a version this process
// acquired before is acquired again with no message to the daemon, pinned in the session's
// lease page; anything the pin cannot vouch for goes the usual way, with the same results.
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "integration_test.h"
#include "raw_session.h"
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

// A consumer waiting for a later version of a name it acquired before sleeps on the name's
// directory entry (a futex the daemon wakes as it writes the entry), then asks for it.
TEST_P(FastPathClientTest, WaitForTheNextVersionIsAnsweredWhenItIsPublished) {
  auto consumer = ConnectWithHotPath("fast-wait");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/w", 30), 1u);
  // Asked for by number: the directory shows it as the latest, so it is cached all the same.
  ASSERT_OK(consumer->Acquire("fp/w", {.version = 1}));
  for (std::uint64_t version = 2; version <= 4; ++version) {
    auto waiting = std::async(std::launch::async, [&] {
      return consumer->Acquire("fp/w", {.version = version, .wait = std::chrono::seconds(60)});
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(Produce(client(), "fp/w", 30 + version), version);
    ASSERT_OK_AND_ASSIGN(TensorView view, waiting.get());
    EXPECT_EQ(view.version(), version);
    EXPECT_EQ(CheckBuffer(view.buffer(0), 30 + version, 0), "");
    ASSERT_OK(view.Release());
  }
  // Several versions published while it waits for the last of them: that one, no other.
  auto waiting = std::async(std::launch::async, [&] {
    return consumer->Acquire("fp/w", {.version = 7, .wait = std::chrono::seconds(60)});
  });
  for (std::uint64_t version = 5; version <= 7; ++version) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(Produce(client(), "fp/w", 30 + version), version);
  }
  ASSERT_OK_AND_ASSIGN(TensorView seventh, waiting.get());
  EXPECT_EQ(seventh.version(), 7u);
  EXPECT_EQ(CheckBuffer(seventh.buffer(0), 37, 0), "");
  ASSERT_OK(seventh.Release());
  // Published already when asked: answered at once, as without a wait.
  ASSERT_OK_AND_ASSIGN(TensorView again,
                       consumer->Acquire("fp/w", {.version = 7, .wait = std::chrono::seconds(60)}));
  EXPECT_EQ(CheckBuffer(again.buffer(0), 37, 0), "");
  ASSERT_OK(again.Release());
  ASSERT_OK(consumer->SyncReleases());
  ASSERT_OK(client().Delete("fp/w"));
  ExpectEverythingReturned();
}

TEST_P(FastPathClientTest, WaitForALaterVersionEndsAsTheDaemonsWaitWould) {
  auto consumer = ConnectWithHotPath("fast-wait-end");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/e", 40), 1u);
  ASSERT_OK(consumer->Acquire("fp/e"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_ERROR(consumer->Acquire("fp/e", {.version = 2, .wait = std::chrono::milliseconds(150)}),
               StatusCode::kDeadlineExceeded, {"not published before the wait timed out", "fp/e"});
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
  // A version published and gone since will not come again: NOT_FOUND at once, not a wait.
  ASSERT_EQ(Produce(client(), "fp/e", 41), 2u);
  EXPECT_ERROR(consumer->Acquire("fp/e", {.version = 1, .wait = std::chrono::minutes(10)}),
               StatusCode::kNotFound,
               {"fp/e version 1 is not published (no longer: the name's versions reached 2)"});
  // Longer than the daemon's max_wait_ms (1 hour by default): refused, as the daemon does.
  EXPECT_ERROR(
      consumer->Acquire("fp/e", {.version = 3, .wait = std::chrono::milliseconds(3600001)}),
      StatusCode::kInvalidArgument, {"wait_timeout_ms 3600001 is above the limit"});
  ASSERT_OK(client().Delete("fp/e"));
  ExpectEverythingReturned();
}

// While the consumer waits, its name is deleted and its directory entry goes to another
// name, which publishes version after version: the consumer is never handed those, and
// gets its own name's version once published anew.
TEST_P(FastPathClientTest, WaitOutlivesItsNameLosingItsEntryToAnother) {
  auto consumer = ConnectWithHotPath("fast-wait-reuse");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/mine", 50), 1u);
  ASSERT_OK(consumer->Acquire("fp/mine"));
  auto waiting = std::async(std::launch::async, [&] {
    return consumer->Acquire("fp/mine", {.version = 2, .wait = std::chrono::seconds(60)});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_OK(client().Delete("fp/mine"));
  for (std::uint64_t version = 1; version <= 3; ++version) {
    ASSERT_EQ(Produce(client(), "fp/other", 60 + version), version);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ASSERT_EQ(Produce(client(), "fp/mine", 51), 1u);
  ASSERT_EQ(Produce(client(), "fp/mine", 52), 2u);
  ASSERT_OK_AND_ASSIGN(TensorView view, waiting.get());
  EXPECT_EQ(view.name(), "fp/mine");
  EXPECT_EQ(view.version(), 2u);
  EXPECT_EQ(CheckBuffer(view.buffer(0), 52, 0), "");
  ASSERT_OK(view.Release());
  ASSERT_OK(consumer->SyncReleases());
  ASSERT_OK(client().Delete("fp/mine"));
  ASSERT_OK(client().Delete("fp/other"));
  ExpectEverythingReturned();
}

HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS(FastPathClientTest);

TEST_P(FastPathClientTest, OtherCallsOfTheProcessGoOnWhileOneOfItsAcquiresWaits) {
  auto consumer = ConnectWithHotPath("wait-beside");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(Produce(client(), "fp/other", 60), 1u);
  auto waiting = std::async(std::launch::async, [&] {
    return consumer->Acquire("fp/later", {.wait = std::chrono::seconds(60)});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // The same client, meanwhile: acquires of another name (the slow path first, then the fast
  // path), a version it publishes itself, and one it waits for and publishes itself.
  for (int i = 0; i < 200; ++i) {
    ASSERT_OK_AND_ASSIGN(TensorView view, consumer->Acquire("fp/other"));
    ASSERT_EQ(CheckBuffer(view.buffer(0), 60, 0), "");
    ASSERT_OK(view.Release());
  }
  ASSERT_EQ(Produce(*consumer, "fp/mine", 61), 1u);
  auto own = std::async(std::launch::async, [&] {
    return consumer->Acquire("fp/mine", {.version = 2, .wait = std::chrono::seconds(60)});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(Produce(*consumer, "fp/mine", 62), 2u);
  ASSERT_OK_AND_ASSIGN(TensorView mine, own.get());
  EXPECT_EQ(CheckBuffer(mine.buffer(0), 62, 0), "");
  ASSERT_OK(mine.Release());
  ASSERT_OK(consumer->SyncReleases());
  EXPECT_EQ(waiting.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the first wait ended before its name was published";

  ASSERT_EQ(Produce(client(), "fp/later", 63), 1u);
  ASSERT_OK_AND_ASSIGN(TensorView later, waiting.get());
  EXPECT_EQ(later.version(), 1u);
  EXPECT_EQ(CheckBuffer(later.buffer(0), 63, 0), "");
  ASSERT_OK(later.Release());
  ASSERT_OK(consumer->SyncReleases());
  for (const char* name : {"fp/other", "fp/mine", "fp/later"}) ASSERT_OK(client().Delete(name));
  ExpectEverythingReturned();
}

// One wait per uid, so that the daemon's count of waits shows in what it allows.
class OneWaitPerUidTest : public IntegrationTest {
 protected:
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = IntegrationTest::daemon_options();
    options.settings.emplace_back("max_waits_per_uid = 1");
    return options;
  }

  // The error of an acquire of `name` waiting 50 ms through the fixture's client.
  StatusCode BriefWaitFor(const std::string& name) {
    auto acquired = client().Acquire(name, {.wait = std::chrono::milliseconds(50)});
    return acquired ? StatusCode::kOk : acquired.error().code();
  }
};

TEST_F(OneWaitPerUidTest, ASessionThatEndsWhileItsAcquireWaitsLeavesNoWaitBehind) {
  auto raw = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(raw.has_value());
  v1::SessionMessage wait;
  wait.set_request_id(1);
  wait.mutable_acquire()->set_name("fp/never");
  wait.mutable_acquire()->set_wait_timeout_ms(600000);
  ASSERT_OK(raw->Send(wait));
  // The session's later requests are answered while the wait is held; once the sync is, the
  // wait is in the daemon (requests are read in order), before any of the client's below.
  v1::SessionMessage sync;
  sync.set_request_id(2);
  sync.mutable_sync();
  ASSERT_OK(raw->Send(sync));
  ASSERT_OK_AND_ASSIGN(const v1::SessionMessage synced, raw->Receive());
  EXPECT_EQ(synced.request_id(), 2u);
  EXPECT_TRUE(synced.has_synced()) << synced.DebugString();
  // Its wait holds the uid's one: another is refused at once.
  ASSERT_TRUE(
      Eventually([&] { return BriefWaitFor("fp/other") == StatusCode::kResourceExhausted; }));

  raw.reset();  // The session ends: its wait with it.
  ASSERT_TRUE(
      Eventually([&] { return BriefWaitFor("fp/other") == StatusCode::kDeadlineExceeded; }));
  ExpectEverythingReturned();
}

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

// A daemon killed while a consumer waits on its directory wakes nobody: the consumer sees
// the session end within its next look and answers as a wait held by the daemon would.
TEST_F(FastPathRestartTest, DaemonKilledDuringAWaitEndsTheWait) {
  auto consumer = Connect("fast-wait-kill");
  ASSERT_NE(consumer, nullptr);
  ASSERT_EQ(RunAgent({"produce", "fp/k", "dense", "3"}), "version 1\n");
  ASSERT_OK(consumer->Acquire("fp/k"));
  auto waiting = std::async(std::launch::async, [&] {
    return consumer->Acquire("fp/k", {.version = 2, .wait = std::chrono::minutes(10)});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_NO_FATAL_FAILURE(KillDaemon());
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the wait outlived its daemon";
  EXPECT_ERROR(waiting.get(), StatusCode::kUnavailable, {});
  // Its cached mapping of the killed daemon's memory would keep that memory held.
  consumer.reset();
  ASSERT_NO_FATAL_FAILURE(RestartDaemon());
  EXPECT_EQ(RunAgent({"consume", "fp/k", "3"}), "OK dense v1\n");
  ASSERT_OK(client().Delete("fp/k"));
  ExpectEverythingReturned();
}

}  // namespace
}  // namespace hurray::integration
