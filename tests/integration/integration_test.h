// IntegrationTest: the base of every integration fixture. Each test gets a fresh, real
// hurrayd (testing::DaemonProcess, shared-memory prefix "hurray-it-...") and a client
// connected to it; agents (hurray_test_agent, hurray_test_c_agent) run as separate
// processes (testing::ChildProcess) against the same daemon. TearDown stops the daemon with
// SIGTERM and checks that it exits 0 and leaves no socket or segment behind
// (testing::ExpectStopsCleanly); on failure it prints the daemon's log.
//
// Waits are bounded polls (Eventually) with generous limits: session teardown after a
// client dies is asynchronous, and the tests must pass on a loaded two-core machine. No
// assertion depends on how long anything takes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/client.h"
#include "hurray/v1/exchange.pb.h"
#include "testing/child_process.h"
#include "testing/daemon_process.h"

namespace hurray::integration {

using namespace std::chrono_literals;
using ::hurray::testing::ChildProcess;
using ::hurray::testing::DaemonProcess;
using ::hurray::testing::DescribeWaitStatus;

class IntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The daemon this fixture starts (hurrayd, 64 MiB pool); override to change the pool.
  [[nodiscard]] virtual DaemonProcess::Options daemon_options() const;

  [[nodiscard]] DaemonProcess& daemon() { return *daemon_; }
  [[nodiscard]] const std::string& socket() const { return daemon_->socket_path(); }
  // The test process's own client (session).
  [[nodiscard]] Client& client() { return *client_; }

  // A further client of this process (a second session).
  [[nodiscard]] std::unique_ptr<Client> Connect(std::string_view name);

  // Starts `hurray_test_agent MODE SOCKET ARGS...` for args = {MODE, ARGS...}; its stderr
  // goes to `stderr_path`, or to the test's stderr when empty. INTERNAL when it cannot be
  // started (ChildProcess::Start).
  [[nodiscard]] Result<ChildProcess> StartAgent(const std::vector<std::string>& args,
                                                const std::string& stderr_path = {});

  // How an agent run ended.
  struct AgentOutcome {
    std::optional<int> status;  // Wait status; nullopt when it had to be killed.
    std::string out;            // Its stdout.
    std::string err;            // Its stderr.
  };
  // Runs an agent to its end (killing it after `timeout`).
  AgentOutcome RunAgentToEnd(const std::vector<std::string>& args,
                             std::chrono::seconds timeout = 120s);
  // Runs an agent to its end; expects exit status 0 and returns its stdout.
  std::string RunAgent(const std::vector<std::string>& args, std::chrono::seconds timeout = 120s);
  // Runs `hurray_test_c_agent SOCKET NAME SEED`; expects exit 0 and returns its stdout.
  std::string RunCAgent(const std::string& name, std::uint64_t seed);

  // The next line the agent prints, expected to be `expected`.
  static void ExpectLine(ChildProcess& agent, const std::string& expected,
                         std::chrono::seconds timeout = 60s);

  [[nodiscard]] DaemonStats Stats();
  [[nodiscard]] PoolStats CpuPool();

  // Polls `condition` until it holds or `timeout` passes; returns its last value.
  static bool Eventually(const std::function<bool()>& condition,
                         std::chrono::milliseconds timeout = 30s);

  // Expects the daemon to hold nothing (polling, since sessions end asynchronously): pool
  // used_bytes 0 and no allocation, no pending allocation, no lease, no tensor.
  void ExpectEverythingReturned();

  // After a test's abuse: a normal round trip between two processes still works (name
  // "it/after"), and then the daemon holds nothing (ExpectEverythingReturned).
  void ExpectStillServingWithNothingLeaked();

  // kill -9 of the daemon, then a new one on the same directory, state directory and
  // shared-memory prefix (it adopts the tensors); client() is a new client of it.
  void KillAndRestartDaemon();
  // A clean stop (SIGTERM) of the daemon, which must succeed, keeping its state; then
  // RestartDaemon.
  void StopDaemon();
  // kill -9 of the daemon (KillAndRestartDaemon's first half); then RestartDaemon.
  void KillDaemon();
  // A new daemon on the same directory, state directory and shared-memory prefix as the
  // stopped or killed one; client() is a new client of it. Its log (daemon().Log()) goes
  // on from the old one's.
  void RestartDaemon();

 private:
  std::unique_ptr<DaemonProcess> daemon_;
  // Daemons KillAndRestartDaemon killed: their directory and segments stay until TearDown.
  std::vector<std::unique_ptr<DaemonProcess>> killed_daemons_;
  std::unique_ptr<Client> client_;
};

// "used_bytes=.. allocations=.. pending=.. leases=.. tensors=.. versions=.. sessions=..".
[[nodiscard]] std::string Summary(const DaemonStats& stats);

// A suite run over both channels of the hot path (see HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS).
class BothChannelsTest : public IntegrationTest,
                         public ::testing::WithParamInterface<Client::Options::HotPath> {
 protected:
  // A client of the test's daemon whose hot path is the test's parameter; null (and a
  // failure recorded) when it cannot connect.
  std::unique_ptr<Client> ConnectWithHotPath(std::string_view name);
};

// Runs a parameterized suite over both channels of the hot path (Client::Options::hot_path),
// its tests named .../SessionSocket and .../Grpc.
#define HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS(suite)                                                \
  INSTANTIATE_TEST_SUITE_P(                                                                        \
      BothChannels, suite,                                                                         \
      ::testing::Values(::hurray::Client::Options::HotPath::kSessionSocket,                        \
                        ::hurray::Client::Options::HotPath::kGrpc),                                \
      [](const ::testing::TestParamInfo<::hurray::Client::Options::HotPath>& param) {              \
        return param.param == ::hurray::Client::Options::HotPath::kSessionSocket ? "SessionSocket" \
                                                                                 : "Grpc";         \
      })

}  // namespace hurray::integration
