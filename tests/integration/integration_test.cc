#include "integration_test.h"

#include <sys/wait.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "test_tensors.h"
#include "testing/daemon_expectations.h"
#include "testing/status_matchers.h"

#ifndef HURRAYD_PATH
#error "HURRAYD_PATH must name the hurrayd binary"
#endif
#ifndef HURRAY_TEST_AGENT_PATH
#error "HURRAY_TEST_AGENT_PATH must name hurray_test_agent"
#endif
#ifndef HURRAY_TEST_C_AGENT_PATH
#error "HURRAY_TEST_C_AGENT_PATH must name hurray_test_c_agent"
#endif

namespace hurray::integration {

std::unique_ptr<Client> BothChannelsTest::ConnectWithHotPath(std::string_view name) {
  auto connected = Client::Connect(
      {.socket_path = socket(), .client_name = std::string(name), .hot_path = GetParam()});
  EXPECT_OK(connected);
  return connected ? std::move(*connected) : nullptr;
}

DaemonProcess::Options IntegrationTest::daemon_options() const {
  return {.binary = HURRAYD_PATH, .name = "hurray-it"};
}

void IntegrationTest::SetUp() {
  ASSERT_OK_AND_ASSIGN(daemon_, DaemonProcess::Start(daemon_options()));
  client_ = Connect("integration-test");
  ASSERT_NE(client_, nullptr);
}

void IntegrationTest::TearDown() {
  client_.reset();
  if (daemon_ == nullptr) return;
  ::hurray::testing::ExpectStopsCleanly(*daemon_);
  if (HasFailure()) {
    std::cerr << "---- hurrayd log (" << daemon_->directory() << ") ----\n"
              << daemon_->Log() << "---- end of hurrayd log ----\n";
  }
  daemon_.reset();
  killed_daemons_.clear();
}

void IntegrationTest::KillAndRestartDaemon() {
  ASSERT_NO_FATAL_FAILURE(KillDaemon());
  ASSERT_NO_FATAL_FAILURE(RestartDaemon());
}

void IntegrationTest::KillDaemon() {
  client_.reset();
  ASSERT_OK(daemon_->Kill());
}

void IntegrationTest::StopDaemon() {
  client_.reset();
  ASSERT_OK(daemon_->Stop());
}

void IntegrationTest::RestartDaemon() {
  DaemonProcess::Options options = daemon_options();
  options.directory = daemon_->directory();
  options.shm_prefix = daemon_->shm_prefix();
  killed_daemons_.push_back(std::move(daemon_));
  ASSERT_OK_AND_ASSIGN(daemon_, DaemonProcess::Start(options));
  client_ = Connect("integration-test");
  ASSERT_NE(client_, nullptr);
}

std::unique_ptr<Client> IntegrationTest::Connect(std::string_view name) {
  auto client = Client::Connect({.socket_path = socket(), .client_name = std::string(name)});
  if (!client) {
    ADD_FAILURE() << "Connect: " << client.error().ToString();
    return nullptr;
  }
  return std::move(*client);
}

Result<ChildProcess> IntegrationTest::StartAgent(const std::vector<std::string>& args,
                                                 const std::string& stderr_path) {
  std::vector<std::string> argv = {HURRAY_TEST_AGENT_PATH};
  if (!args.empty()) argv.push_back(args.front());
  argv.push_back(socket());
  if (!args.empty()) argv.insert(argv.end(), args.begin() + 1, args.end());
  return ChildProcess::Start(argv, {.stderr_path = stderr_path});
}

IntegrationTest::AgentOutcome IntegrationTest::RunAgentToEnd(const std::vector<std::string>& args,
                                                             std::chrono::seconds timeout) {
  static int next_run = 1;
  const std::string stderr_path =
      daemon_->directory() + "/agent-" + std::to_string(next_run++) + ".stderr";
  AgentOutcome outcome;
  auto started = StartAgent(args, stderr_path);
  if (!started) {
    ADD_FAILURE() << "hurray_test_agent: " << started.error().ToString();
    return outcome;
  }
  ChildProcess& agent = *started;
  const auto output = agent.ReadToEnd(timeout);
  outcome.status = agent.Wait(output ? timeout : 0s);
  if (!outcome.status) {
    ADD_FAILURE() << agent.command_line() << " still runs after " << timeout.count()
                  << " s; killed";
    agent.Kill();
  }
  outcome.out = output.value_or("");
  std::ifstream errors(stderr_path);
  outcome.err.assign(std::istreambuf_iterator<char>(errors), std::istreambuf_iterator<char>());
  return outcome;
}

std::string IntegrationTest::RunAgent(const std::vector<std::string>& args,
                                      std::chrono::seconds timeout) {
  const AgentOutcome outcome = RunAgentToEnd(args, timeout);
  if (!outcome.status) return outcome.out;
  if (!(WIFEXITED(*outcome.status) && WEXITSTATUS(*outcome.status) == 0)) {
    std::string command;
    for (const std::string& arg : args) command += " " + arg;
    ADD_FAILURE() << "hurray_test_agent" << command << ": " << DescribeWaitStatus(*outcome.status)
                  << "\nstdout:\n"
                  << outcome.out << "stderr:\n"
                  << outcome.err;
  }
  return outcome.out;
}

std::string IntegrationTest::RunCAgent(const std::string& name, std::uint64_t seed) {
  auto started =
      ChildProcess::Start({HURRAY_TEST_C_AGENT_PATH, socket(), name, std::to_string(seed)});
  if (!started) {
    ADD_FAILURE() << "hurray_test_c_agent: " << started.error().ToString();
    return {};
  }
  ChildProcess& agent = *started;
  const auto output = agent.ReadToEnd(120s);
  const auto status = agent.Wait(120s);
  if (!output || !status) {
    ADD_FAILURE() << agent.command_line() << " still runs after 120 s; killed";
    return {};
  }
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << agent.command_line() << ": " << DescribeWaitStatus(*status);
  return *output;
}

void IntegrationTest::ExpectLine(ChildProcess& agent, const std::string& expected,
                                 std::chrono::seconds timeout) {
  const auto line = agent.ReadLine(timeout);
  ASSERT_TRUE(line.has_value()) << agent.command_line() << " printed no line within "
                                << timeout.count() << " s (expected \"" << expected << "\")";
  EXPECT_EQ(*line, expected) << agent.command_line();
}

DaemonStats IntegrationTest::Stats() {
  auto stats = client_->Stats();
  if (!stats) {
    ADD_FAILURE() << "Stats: " << stats.error().ToString();
    return {};
  }
  return *stats;
}

PoolStats IntegrationTest::CpuPool() {
  const DaemonStats stats = Stats();
  for (const PoolStats& pool : stats.pools) {
    if (pool.name == "cpu") return pool;
  }
  ADD_FAILURE() << "Stats has no cpu pool";
  return {};
}

bool IntegrationTest::Eventually(const std::function<bool()>& condition,
                                 std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(10ms);
  }
}

void IntegrationTest::ExpectEverythingReturned() {
  DaemonStats stats;
  const bool empty = Eventually([&] {
    stats = Stats();
    const PoolStats* cpu = nullptr;
    for (const auto& pool : stats.pools) {
      if (pool.name == "cpu") cpu = &pool;
    }
    return cpu != nullptr && cpu->used_bytes == 0 && cpu->allocation_count == 0 &&
           stats.pending_allocation_count == 0 && stats.lease_count == 0 &&
           stats.tensor_count == 0 && stats.version_count == 0;
  });
  EXPECT_TRUE(empty) << "the daemon still holds something: " << Summary(stats);
}

void IntegrationTest::ExpectStillServingWithNothingLeaked() {
  EXPECT_EQ(RunAgent({"produce", "it/after", "quantized", "99"}), "version 1\n");
  EXPECT_EQ(RunAgent({"consume", "it/after", "99"}), "OK quantized v1\n");
  auto deleted = client_->Delete("it/after");
  EXPECT_TRUE(deleted.has_value()) << "Delete it/after: " << ::hurray::testing::Describe(deleted);
  ExpectEverythingReturned();
}

std::string Summary(const DaemonStats& stats) {
  std::string text;
  for (const auto& pool : stats.pools) {
    text += "pool " + pool.name + ": used_bytes=" + std::to_string(pool.used_bytes) +
            " allocations=" + std::to_string(pool.allocation_count) + "; ";
  }
  text += "pending=" + std::to_string(stats.pending_allocation_count) +
          " leases=" + std::to_string(stats.lease_count) +
          " tensors=" + std::to_string(stats.tensor_count) +
          " versions=" + std::to_string(stats.version_count) +
          " sessions=" + std::to_string(stats.session_count);
  return text;
}

}  // namespace hurray::integration
