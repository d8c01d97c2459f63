// Clients that die or misbehave: kill -9 of a consumer holding leases and of a producer
// between allocate and publish gives every byte back; a consumer writing into a mapped
// tensor is killed by the kernel and the tensor stays intact.
#include <sys/wait.h>

#include <csignal>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class SessionCleanupTest : public IntegrationTest {};

TEST_F(SessionCleanupTest, KilledConsumerReleasesItsLeases) {
  const std::uint64_t used_before = CpuPool().used_bytes;
  EXPECT_EQ(RunAgent({"produce", "it/a", "dense", "1"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "it/b", "quantized", "2"}), "version 1\n");
  const std::uint64_t used_published = CpuPool().used_bytes;
  ASSERT_GT(used_published, used_before);

  ASSERT_OK_AND_ASSIGN(ChildProcess holder, StartAgent({"hold", "it/a", "it/b", "it/a"}));
  ASSERT_NO_FATAL_FAILURE(ExpectLine(holder, "holding 1 1 1"));
  // The second acquire of it/a takes the fast path: a pin in the holder's lease page, which
  // keeps the memory as a lease does but is none.
  EXPECT_EQ(Stats().lease_count, 2u);
  // Deleted while leased: the memory must stay until the last lease ends.
  ASSERT_OK(client().Delete("it/a"));
  ASSERT_OK(client().Delete("it/b"));
  EXPECT_EQ(CpuPool().used_bytes, used_published);

  holder.Signal(SIGKILL);
  const auto status = holder.Wait(30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << DescribeWaitStatus(*status);

  DaemonStats stats;
  EXPECT_TRUE(Eventually([&] {
    stats = Stats();
    return stats.lease_count == 0 && CpuPool().used_bytes == used_before;
  })) << Summary(stats);
  EXPECT_EQ(stats.pending_allocation_count, 0u);
  EXPECT_EQ(stats.version_count, 0u);
  ExpectEverythingReturned();
}

TEST_F(SessionCleanupTest, KilledProducerFreesItsUnpublishedAllocation) {
  EXPECT_EQ(RunAgent({"produce", "it/keep", "csr", "9"}), "version 1\n");
  const std::uint64_t used_before = CpuPool().used_bytes;
  ASSERT_GT(used_before, 0u);

  constexpr std::uint64_t kBytes = 3 << 20;
  ASSERT_OK_AND_ASSIGN(ChildProcess producer,
                       StartAgent({"allocate-and-hang", std::to_string(kBytes)}));
  const auto line = producer.ReadLine(60s);
  ASSERT_TRUE(line.has_value()) << "the producer did not allocate";
  EXPECT_TRUE(line->starts_with("allocated ")) << *line;
  DaemonStats stats = Stats();
  EXPECT_EQ(stats.pending_allocation_count, 1u);
  EXPECT_GE(CpuPool().used_bytes, used_before + kBytes);

  producer.Signal(SIGKILL);
  const auto status = producer.Wait(30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << DescribeWaitStatus(*status);

  EXPECT_TRUE(Eventually([&] {
    stats = Stats();
    return stats.pending_allocation_count == 0 && CpuPool().used_bytes == used_before;
  })) << Summary(stats);
  EXPECT_EQ(stats.lease_count, 0u);
  // Another session's published tensor is untouched.
  EXPECT_EQ(RunAgent({"consume", "it/keep", "9"}), "OK csr v1\n");
  ASSERT_OK(client().Delete("it/keep"));
  ExpectEverythingReturned();
}

TEST_F(SessionCleanupTest, KilledProducerAndConsumerTogetherLeaveThePoolAsItWas) {
  const std::uint64_t used_before = CpuPool().used_bytes;
  EXPECT_EQ(RunAgent({"produce", "it/shared", "dense", "4"}), "version 1\n");
  const std::uint64_t used_published = CpuPool().used_bytes;
  ASSERT_OK_AND_ASSIGN(ChildProcess holder, StartAgent({"hold", "it/shared"}));
  ASSERT_OK_AND_ASSIGN(ChildProcess producer,
                       StartAgent({"allocate-and-hang", std::to_string(1 << 20)}));
  ASSERT_NO_FATAL_FAILURE(ExpectLine(holder, "holding 1"));
  const auto line = producer.ReadLine(60s);
  ASSERT_TRUE(line.has_value() && line->starts_with("allocated ")) << line.value_or("(none)");
  // Superseded while leased.
  EXPECT_EQ(RunAgent({"produce", "it/shared", "dense", "5"}), "version 2\n");

  holder.Signal(SIGKILL);
  producer.Signal(SIGKILL);
  ASSERT_TRUE(holder.Wait(30s).has_value());
  ASSERT_TRUE(producer.Wait(30s).has_value());
  DaemonStats stats;
  EXPECT_TRUE(Eventually([&] {
    stats = Stats();
    return stats.pending_allocation_count == 0 && stats.lease_count == 0 &&
           stats.version_count == 1 && CpuPool().used_bytes == used_published;
  })) << Summary(stats);
  EXPECT_EQ(RunAgent({"consume", "it/shared", "5"}), "OK dense v2\n");
  ASSERT_OK(client().Delete("it/shared"));
  EXPECT_TRUE(Eventually([&] { return CpuPool().used_bytes == used_before; }));
  ExpectEverythingReturned();
}

TEST_F(SessionCleanupTest, KilledWaiterTakesNoLeaseWhenTheTensorAppears) {
  ASSERT_OK_AND_ASSIGN(ChildProcess waiter, StartAgent({"wait-for", "it/awaited"}));
  ASSERT_NO_FATAL_FAILURE(ExpectLine(waiter, "waiting"));
  waiter.Signal(SIGKILL);
  ASSERT_TRUE(waiter.Wait(30s).has_value());
  EXPECT_TRUE(Eventually([&] { return Stats().session_count == 1; })) << Summary(Stats());
  EXPECT_EQ(RunAgent({"produce", "it/awaited", "dense", "6"}), "version 1\n");
  auto described = client().Describe("it/awaited");
  ASSERT_OK(described);
  ASSERT_EQ(described->versions.size(), 1);
  EXPECT_EQ(described->versions[0].lease_count, 0u);
  EXPECT_EQ(Stats().lease_count, 0u);
  ASSERT_OK(client().Delete("it/awaited"));
  ExpectEverythingReturned();
}

class ReadOnlyMappingTest : public IntegrationTest {};

TEST_F(ReadOnlyMappingTest, ConsumerWritingIntoATensorIsKilledAndTheTensorStaysIntact) {
  EXPECT_EQ(RunAgent({"produce", "it/ro", "dense", "5"}), "version 1\n");
  ASSERT_OK_AND_ASSIGN(ChildProcess writer, StartAgent({"write-into", "it/ro"}));
  ASSERT_NO_FATAL_FAILURE(ExpectLine(writer, "writing"));
  const auto status = writer.Wait(60s);
  ASSERT_TRUE(status.has_value()) << "the writer neither died nor finished";
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGSEGV) << DescribeWaitStatus(*status);
  EXPECT_EQ(writer.ReadLine(5s), std::nullopt) << "the write went through";

  EXPECT_EQ(RunAgent({"consume", "it/ro", "5"}), "OK dense v1\n");
  EXPECT_TRUE(Eventually([&] { return Stats().lease_count == 0; })) << Summary(Stats());
}

}  // namespace
}  // namespace hurray::integration
