// mmap failing in the client: a consumer whose address-space limit (RLIMIT_AS) leaves no room
// for the tensor's segment gets a clear error from Acquire, the daemon holds no lease for
// it while its session lives on, and once the limit is raised the same session acquires the
// tensor and reads every byte.
#include <gtest/gtest.h>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::fault {
namespace {

using namespace std::chrono_literals;
using ::hurray::testing::ChildProcess;
using integration::IntegrationTest;

constexpr std::uint64_t kSeed = 77;
constexpr char kName[] = "fault/mapped";

class ClientMmapFailureTest : public IntegrationTest {};

TEST_F(ClientMmapFailureTest, AcquireWhoseMappingFailsIsAClearErrorAndLeavesNoLease) {
#ifdef HURRAY_FAULT_SANITIZED
  GTEST_SKIP() << "a sanitized agent maps shadow memory at any time: RLIMIT_AS would stop it "
                  "anywhere, not at the segment's mmap";
#endif
  {
    ASSERT_OK_AND_ASSIGN(WritableTensor tensor,
                         client().Allocate(integration::MakeByteTensor(std::uint64_t{1} << 20)));
    integration::FillBuffer(tensor.buffer(0), kSeed, 0);
    ASSERT_OK(tensor.Publish(kName));
  }
  ASSERT_OK_AND_ASSIGN(ChildProcess agent,
                       ChildProcess::Start({HURRAY_FAULT_AGENT_PATH, "acquire-limited", socket(),
                                            kName, std::to_string(kSeed)},
                                           {.stdin_pipe = true}));
  const auto refused = agent.ReadLine(60s);
  ASSERT_TRUE(refused.has_value()) << agent.command_line() << " printed nothing";
  RecordProperty("refused", *refused);
  RecordProperty("refused", *refused);
  EXPECT_TRUE(refused->starts_with("refused ")) << *refused;
  EXPECT_NE(refused->find("mmap"), std::string::npos) << *refused;
  EXPECT_NE(refused->find("Cannot allocate memory"), std::string::npos) << *refused;

  // The agent's session lives on (two sessions: the test's and the agent's), with no lease.
  DaemonStats stats;
  EXPECT_TRUE(Eventually([&] {
    stats = Stats();
    return stats.session_count == 2 && stats.lease_count == 0;
  })) << integration::Summary(stats);
  ASSERT_TRUE(agent.Running());

  ASSERT_OK(agent.WriteLine("go"));
  ExpectLine(agent, "OK");
  EXPECT_TRUE(Eventually([&] { return Stats().lease_count == 1; }));
  agent.Kill();
  ASSERT_OK(client().Delete(kName));
  ExpectEverythingReturned();
}

}  // namespace
}  // namespace hurray::fault
