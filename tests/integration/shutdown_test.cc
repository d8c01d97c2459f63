// SIGTERM while clients are connected: the daemon exits 0 and removes its sockets and
// segments (ExpectStopsCleanly checks all three), and clients' next calls fail with
// UNAVAILABLE.
#include <atomic>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/daemon_expectations.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class ShutdownTest : public IntegrationTest {};

TEST_F(ShutdownTest, SigtermWithClientsConnectedExitsCleanlyAndClientsSeeUnavailable) {
  EXPECT_EQ(RunAgent({"produce", "it/s", "dense", "1"}), "version 1\n");
  ASSERT_OK_AND_ASSIGN(ChildProcess holder, StartAgent({"hold", "it/s"}));
  ASSERT_OK_AND_ASSIGN(ChildProcess producer,
                       StartAgent({"allocate-and-hang", std::to_string(1 << 20)}));
  ASSERT_NO_FATAL_FAILURE(ExpectLine(holder, "holding 1"));
  const auto line = producer.ReadLine(60s);
  ASSERT_TRUE(line.has_value() && line->starts_with("allocated ")) << line.value_or("(none)");

  // This process too: a lease, a pending allocation and a watch.
  auto view = client().Acquire("it/s");
  ASSERT_OK(view);
  auto pending = client().Allocate(MakeByteTensor(4096));
  ASSERT_OK(pending);
  std::atomic<bool> watch_ended{false};
  auto watch =
      client().Watch("it/", [](const WatchEvent&) {}, [&](const Status&) { watch_ended = true; });
  ASSERT_OK(watch);
  const DaemonStats stats = Stats();
  EXPECT_EQ(stats.lease_count, 2u);
  EXPECT_EQ(stats.pending_allocation_count, 2u);
  EXPECT_GE(stats.session_count, 3u);

  // SIGTERM; expects exit 0, no socket file, no segment left.
  ::hurray::testing::ExpectStopsCleanly(daemon());
  EXPECT_TRUE(holder.Running()) << "a client must outlive the daemon";
  EXPECT_TRUE(producer.Running()) << "a client must outlive the daemon";

  EXPECT_ERROR(client().Stats(), StatusCode::kUnavailable);
  EXPECT_ERROR(client().Acquire("it/s"), StatusCode::kUnavailable);
  EXPECT_ERROR(client().Allocate(MakeByteTensor(4096)), StatusCode::kUnavailable);
  EXPECT_TRUE(Eventually([&] { return watch_ended.load(); })) << "the watch never ended";
  // A new client finds no daemon.
  EXPECT_ERROR(Client::Connect({.socket_path = socket(), .client_name = "late"}),
               StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hurray::integration
