// Many client processes at once: 32 agents each run 100 cycles of allocate, write,
// publish, acquire, check and release (with a cancelled allocation every tenth cycle) on
// names of their own, concurrently. Every cycle must succeed, every version number must be
// the expected one, and once their tensors are deleted the pool must be empty.
#include <sys/wait.h>

#include "integration_test.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class ConcurrencyTest : public IntegrationTest {};

TEST_F(ConcurrencyTest, ThirtyTwoProcessesCycleConcurrentlyAndLeaveThePoolEmpty) {
  constexpr int kAgents = 32;
  constexpr int kCycles = 100;
  constexpr int kNamesPerAgent = 4;  // stress/agent-ID/t0..t3, as the agent names them.
  std::vector<ChildProcess> agents;
  for (int id = 0; id < kAgents; ++id) {
    ASSERT_OK_AND_ASSIGN(ChildProcess agent,
                         StartAgent({"stress", std::to_string(id), std::to_string(kCycles)}));
    agents.push_back(std::move(agent));
  }
  for (ChildProcess& agent : agents) {
    // A bound against a hang, not a timing requirement.
    const auto output = agent.ReadToEnd(600s);
    const auto status = agent.Wait(60s);
    ASSERT_TRUE(output.has_value() && status.has_value())
        << agent.command_line() << " did not finish";
    EXPECT_EQ(*output, "OK " + std::to_string(kCycles) + "\n") << agent.command_line();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << agent.command_line() << ": " << DescribeWaitStatus(*status);
  }

  // Every name holds only its latest version (the superseded ones were reclaimed as their
  // leases ended), and nothing is leased or pending any more.
  DaemonStats stats;
  EXPECT_TRUE(Eventually([&] {
    stats = Stats();
    return stats.lease_count == 0 && stats.pending_allocation_count == 0 &&
           stats.version_count == kAgents * kNamesPerAgent;
  })) << Summary(stats);
  auto listed = client().List("stress/", 1000);
  ASSERT_OK(listed);
  ASSERT_EQ(listed->tensors.size(), kAgents * kNamesPerAgent);
  EXPECT_TRUE(listed->next_page_token.empty());
  for (const auto& tensor : listed->tensors) {
    EXPECT_EQ(tensor.latest_version, static_cast<std::uint64_t>(kCycles / kNamesPerAgent))
        << tensor.name;
    EXPECT_EQ(tensor.version_count, 1u) << tensor.name;
    EXPECT_EQ(tensor.lease_count, 0u) << tensor.name;
  }
  for (const auto& tensor : listed->tensors) {
    auto deleted = client().Delete(tensor.name);
    ASSERT_OK(deleted);
    EXPECT_EQ(*deleted, 1u);
  }
  ExpectEverythingReturned();
  EXPECT_EQ(CpuPool().fragmentation, 0.0);
}

}  // namespace
}  // namespace hurray::integration
