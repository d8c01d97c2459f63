// kill -9 of hurrayd, then a new daemon on the same state directory: every published CPU
// tensor is served again, byte for byte, under the same name and version and a new epoch;
// what was not published is gone; /dev/shm holds one pool's worth of segments however often
// the daemon is killed.
#include <gmock/gmock.h>
#include <sys/wait.h>

#include <csignal>

#include "integration_test.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class RestartTest : public IntegrationTest {};

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

}  // namespace
}  // namespace hurray::integration
