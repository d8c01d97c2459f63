// kill -9 of hurrayd, then a new daemon on the same state directory: every published CPU
// tensor is served again, byte for byte, under the same name and version and a new epoch;
// what was not published is gone; /dev/shm holds one pool's worth of segments however often
// the daemon is killed; and no view held across the kill changes, whatever the new daemon
// allocates, until its holder lets go.
#include <gmock/gmock.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class RestartTest : public IntegrationTest {
 protected:
  // Allocates every free range of the CPU pool, each filled from seed 99, as a new daemon
  // would hand them out; returns the allocations (unpublished).
  std::vector<WritableTensor> AllocateEverythingFree() {
    std::vector<WritableTensor> taken;
    for (int round = 0; round < 64; ++round) {
      const std::uint64_t largest = CpuPool().largest_free_bytes;
      if (largest < 4096) break;
      auto tensor = client().Allocate(MakeByteTensor(largest));
      if (!tensor) {
        ADD_FAILURE() << "Allocate " << largest << ": " << tensor.error().ToString();
        break;
      }
      FillBuffer(tensor->buffer(0), 99, 0);
      taken.push_back(std::move(*tensor));
    }
    return taken;
  }

  // Every buffer of `view` holds what the produce agent wrote from `seed`.
  static void ExpectIntact(const TensorView& view, std::uint64_t seed) {
    for (std::size_t i = 0; i < view.buffer_count(); ++i) {
      EXPECT_EQ(CheckBuffer(view.buffer(i), seed, i), "")
          << view.name() << " v" << view.version() << " buffer " << i;
    }
  }
};

TEST_F(RestartTest, KilledDaemonsPublishedTensorsAreServedAgainByteForByte) {
  EXPECT_EQ(RunAgent({"produce", "rs/dense", "dense", "1"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "rs/quantized", "quantized", "2"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "rs/csr", "csr", "3"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "rs/dense", "dense", "4"}), "version 2\n");
  EXPECT_EQ(RunAgent({"produce", "rs/deleted", "dense", "5"}), "version 1\n");
  ASSERT_OK(client().Delete("rs/deleted"));
  const std::uint64_t published_bytes = CpuPool().used_bytes;
  // An allocation that is never published dies with the daemon.
  ASSERT_OK_AND_ASSIGN(ChildProcess producer, StartAgent({"allocate-and-hang", "3145728"}));
  const auto line = producer.ReadLine(60s);
  ASSERT_TRUE(line.has_value() && line->starts_with("allocated ")) << line.value_or("(none)");
  const std::uint64_t old_epoch = Stats().daemon_epoch;

  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  producer.Kill();

  const DaemonStats stats = Stats();
  EXPECT_NE(stats.daemon_epoch, old_epoch);
  EXPECT_EQ(stats.tensor_count, 3u) << Summary(stats);
  EXPECT_EQ(stats.pending_allocation_count, 0u);
  EXPECT_EQ(CpuPool().used_bytes, published_bytes);
  EXPECT_EQ(RunAgent({"consume", "rs/dense", "4"}), "OK dense v2\n");
  EXPECT_EQ(RunAgent({"consume", "rs/quantized", "2"}), "OK quantized v1\n");
  EXPECT_EQ(RunAgent({"consume", "rs/csr", "3"}), "OK csr v1\n");
  auto deleted = client().Acquire("rs/deleted");
  ASSERT_FALSE(deleted.has_value());
  EXPECT_EQ(deleted.error().code(), StatusCode::kNotFound);

  // The restarted daemon allocates around the adopted ranges and numbers on.
  EXPECT_EQ(RunAgent({"produce", "rs/dense", "dense", "6"}), "version 3\n");
  EXPECT_EQ(RunAgent({"produce", "rs/new", "csr", "7"}), "version 1\n");
  EXPECT_EQ(RunAgent({"consume", "rs/quantized", "2"}), "OK quantized v1\n");
  EXPECT_EQ(RunAgent({"consume", "rs/csr", "3"}), "OK csr v1\n");
  EXPECT_EQ(RunAgent({"consume", "rs/new", "7"}), "OK csr v1\n");
  for (const char* name : {"rs/dense", "rs/quantized", "rs/csr", "rs/new"}) {
    ASSERT_OK(client().Delete(name));
  }
  ExpectEverythingReturned();
}

TEST_F(RestartTest, ShmHoldsOnePoolsWorthHoweverOftenTheDaemonIsKilled) {
  EXPECT_EQ(RunAgent({"produce", "rs/kept", "quantized", "11"}), "version 1\n");
  const std::vector<std::string> segments = daemon().Segments();
  ASSERT_EQ(segments.size(), 1u);
  for (int kill = 0; kill < 3; ++kill) {
    ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
    EXPECT_EQ(daemon().Segments(), segments) << "kill " << kill;
    EXPECT_EQ(RunAgent({"consume", "rs/kept", "11"}), "OK quantized v1\n");
  }
  // With nothing published, a restart removes the old segment and makes one new one.
  ASSERT_OK(client().Delete("rs/kept"));
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  const std::vector<std::string> fresh = daemon().Segments();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_NE(fresh, segments);
  ExpectStillServingWithNothingLeaked();
}

TEST_F(RestartTest, CleanStopKeepsTheSegmentsOfPublishedTensors) {
  EXPECT_EQ(RunAgent({"produce", "rs/stays", "dense", "21"}), "version 1\n");
  const std::vector<std::string> segments = daemon().Segments();
  ASSERT_OK(daemon().Stop());
  EXPECT_EQ(daemon().Segments(), segments);
}

// Views held across a kill -9 by a process that goes on: one of a version retired before the
// kill (kept then by the view's lease), one of a version served again and retired after it.
// The restarted daemon hands out every other free byte, and neither view changes; once the
// holder has dropped its views and made a call of the new daemon, the memory is free again.
TEST_F(RestartTest, ViewsHeldAcrossAKillStayIntactUntilTheirHolderLetsGo) {
  EXPECT_EQ(RunAgent({"produce", "rs/early", "dense", "31"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "rs/late", "quantized", "32"}), "version 1\n");
  std::unique_ptr<Client> holder = Connect("holder");
  ASSERT_NE(holder, nullptr);
  std::optional<TensorView> early = holder->Acquire("rs/early").value();
  std::optional<TensorView> late = holder->Acquire("rs/late").value();
  EXPECT_EQ(RunAgent({"produce", "rs/early", "dense", "33"}), "version 2\n");

  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  EXPECT_EQ(Stats().earlier_epoch_held_versions, 1u) << "rs/early v1";
  EXPECT_EQ(RunAgent({"produce", "rs/late", "quantized", "34"}), "version 2\n");
  const DaemonStats held = Stats();
  EXPECT_EQ(held.earlier_epoch_held_versions, 2u) << "rs/early v1 and rs/late v1";
  EXPECT_EQ(held.earlier_epoch_held_bytes, early->descriptor().buffers()[0].byte_size() +
                                               late->descriptor().buffers()[0].byte_size() +
                                               late->descriptor().buffers()[1].byte_size());
  // Held memory still counts against its publisher (this process's uid), as it did when the
  // version was retired: both held versions and both live ones.
  std::uint64_t charged = 0;
  for (const UidUsage& usage : held.uids) {
    if (usage.uid == ::geteuid()) charged = usage.published_bytes;
  }
  EXPECT_GE(charged, 2 * held.earlier_epoch_held_bytes);
  std::vector<WritableTensor> everything = AllocateEverythingFree();
  EXPECT_FALSE(everything.empty());
  ExpectIntact(*early, 31);
  ExpectIntact(*late, 32);
  everything.clear();

  // Still held while the holder keeps a view, whatever else it does.
  early.reset();
  EXPECT_EQ(RunAgent({"consume", "rs/early", "33"}), "OK dense v2\n");
  EXPECT_EQ(Stats().earlier_epoch_held_versions, 2u);
  late.reset();
  // Its next call reconnects, and its cached mappings of the old daemon go.
  ASSERT_OK(holder->Acquire("rs/late", {.version = 2}));
  EXPECT_TRUE(Eventually([&] { return Stats().earlier_epoch_held_versions == 0; }))
      << Summary(Stats());
  EXPECT_EQ(Stats().earlier_epoch_held_bytes, 0u);
  holder.reset();
  ASSERT_OK(client().Delete("rs/early"));
  ASSERT_OK(client().Delete("rs/late"));
  ExpectEverythingReturned();
}

// A holder that dies lets go as surely as one that drops its views, and a daemon killed again
// meanwhile keeps holding for it.
TEST_F(RestartTest, MemoryHeldForAKilledHolderIsFreedWhenItDies) {
  // A published tensor, so that the restarts adopt the segments.
  EXPECT_EQ(RunAgent({"produce", "rs/stays", "dense", "40"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "rs/gone", "dense", "41"}), "version 1\n");
  ASSERT_OK_AND_ASSIGN(ChildProcess holder, StartAgent({"hold", "rs/gone"}));
  ExpectLine(holder, "holding 1");
  ASSERT_OK(client().Delete("rs/gone"));
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  EXPECT_EQ(Stats().earlier_epoch_held_versions, 1u);
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  EXPECT_EQ(Stats().earlier_epoch_held_versions, 1u) << "held through a second kill";
  holder.Kill();
  EXPECT_TRUE(Eventually([&] { return Stats().earlier_epoch_held_versions == 0; }))
      << Summary(Stats());
  ASSERT_OK(client().Delete("rs/stays"));
  ExpectEverythingReturned();
}

// A retired version that no earlier client holds at a restart is free memory in the new
// daemon: once reused, a later restart (with an earlier client holding something else) must
// not take it back over the tensor that reuses it.
TEST_F(RestartTest, RetiredVersionNoOneHeldIsForgottenSoItsReuseSurvivesTheNextRestart) {
  EXPECT_EQ(RunAgent({"produce", "rs/stays", "dense", "50"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "rs/old", "dense", "51"}), "version 1\n");
  ASSERT_OK_AND_ASSIGN(ChildProcess holder, StartAgent({"hold", "rs/old"}));
  ExpectLine(holder, "holding 1");
  ASSERT_OK(client().Delete("rs/old"));  // Retired, its memory held by the holder.
  ASSERT_NO_FATAL_FAILURE(KillDaemon());
  holder.Kill();  // Nobody of the killed daemon's epoch is left.
  ASSERT_NO_FATAL_FAILURE(RestartDaemon());
  EXPECT_EQ(Stats().earlier_epoch_held_versions, 0u);

  // Every free byte, rs/old's range included, goes to new tensors, published.
  std::vector<WritableTensor> everything = AllocateEverythingFree();
  ASSERT_FALSE(everything.empty());
  std::vector<std::string> reused;
  for (WritableTensor& tensor : everything) {
    reused.push_back("rs/reuse-" + std::to_string(reused.size()));
    ASSERT_OK(tensor.Publish(reused.back()));
  }
  // A client of this daemon keeps a view across the next kill: an earlier epoch is held.
  std::unique_ptr<Client> viewer = Connect("viewer");
  ASSERT_NE(viewer, nullptr);
  ASSERT_OK_AND_ASSIGN(TensorView view, viewer->Acquire("rs/stays"));
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());

  EXPECT_EQ(Stats().tensor_count, reused.size() + 1) << Summary(Stats());
  EXPECT_THAT(daemon().Log(), ::testing::Not(::testing::HasSubstr("is lost")));
  ASSERT_OK_AND_ASSIGN(TensorView stays, client().Acquire("rs/stays"));
  ExpectIntact(stays, 50);
  for (const std::string& name : reused) {
    ASSERT_OK_AND_ASSIGN(TensorView again, client().Acquire(name));
    EXPECT_EQ(CheckBuffer(again.buffer(0), 99, 0), "") << name;
  }
}

}  // namespace
}  // namespace hurray::integration
