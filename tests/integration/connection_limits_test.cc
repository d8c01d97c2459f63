// The session socket under a flood of connections: thousands of idle ones cost the daemon no
// threads and every other client is still served; connections beyond max_sessions_per_uid
// are refused with RESOURCE_EXHAUSTED naming the cap, counted in Stats; a connection that
// never says hello is closed at hello_timeout_ms. (EMFILE at accept is injected in
// tests/daemon/session/session_test.cc, where the lowest free descriptor is known.)
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hurray/ipc/unix_socket.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "integration_test.h"
#include "raw_session.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

// The Threads: line of /proc/PID/status; -1 when it cannot be read.
int ThreadCount(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
  }
  return -1;
}

using ::hurray::testing::DescriptorEnd;

// Raises this process's soft RLIMIT_NOFILE to at least `needed`; false when the hard limit
// is lower.
bool RaiseDescriptorLimit(rlim_t needed) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_max < needed) return false;
  files.rlim_cur = std::max(files.rlim_cur, needed);
  return ::setrlimit(RLIMIT_NOFILE, &files) == 0;
}

class ConnectionLimitsTest : public RawGrpcTest {
 protected:
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = IntegrationTest::daemon_options();
    options.log_level = "info";  // "accepting connections again" is logged at info.
    options.settings.insert(options.settings.end(), settings_.begin(), settings_.end());
    return options;
  }

  [[nodiscard]] v1::StatsResponse RawStats() {
    v1::StatsResponse stats;
    EXPECT_TRUE(stub_->Stats(RawContext(std::nullopt).get(), v1::StatsRequest(), &stats).ok());
    return stats;
  }

  // Connects without a hello, waiting for the daemon to take the connection.
  std::vector<UniqueFd> ConnectIdle(std::size_t count) {
    std::vector<UniqueFd> idle;
    idle.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      auto socket = ConnectUnixSocket(daemon().session_socket_path());
      EXPECT_OK(socket);
      if (!socket) break;
      idle.push_back(std::move(*socket));
    }
    return idle;
  }

  std::vector<std::string> settings_;
};

class UncappedConnectionsTest : public ConnectionLimitsTest {
 protected:
  UncappedConnectionsTest() {
    settings_ = {"max_sessions = 0", "max_sessions_per_uid = 0", "hello_timeout_ms = 0"};
  }
};

TEST_F(UncappedConnectionsTest, ThousandsOfIdleConnectionsCostNoThreadsAndOthersAreServed) {
  constexpr std::size_t kIdle = 5000;
  if (!RaiseDescriptorLimit(kIdle + 256)) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is low";
  rlimit daemon_files{.rlim_cur = 4 * kIdle, .rlim_max = 4 * kIdle};
  if (::prlimit(daemon().pid(), RLIMIT_NOFILE, &daemon_files, nullptr) != 0) {
    GTEST_SKIP() << "prlimit on hurrayd: " << std::strerror(errno);
  }
  const int threads_before = ThreadCount(daemon().pid());
  ASSERT_GT(threads_before, 0);
  std::vector<UniqueFd> idle = ConnectIdle(kIdle);
  ASSERT_EQ(idle.size(), kIdle);
  // The daemon holds each one: its session-socket descriptors.
  EXPECT_TRUE(Eventually([&] { return DescriptorEnd(daemon().pid()) > static_cast<int>(kIdle); }))
      << DescriptorEnd(daemon().pid());
  EXPECT_EQ(ThreadCount(daemon().pid()), threads_before);
  ExpectStillServingWithNothingLeaked();
  EXPECT_EQ(ThreadCount(daemon().pid()), threads_before);
  EXPECT_EQ(RawStats().refused_connection_count(), 0u);
}

class CappedConnectionsTest : public ConnectionLimitsTest {
 protected:
  CappedConnectionsTest() { settings_ = {"max_sessions_per_uid = 50", "hello_timeout_ms = 500"}; }
};

TEST_F(CappedConnectionsTest, ConnectionsBeyondThePerUidCapAreRefusedAndCounted) {
  // The fixture's client holds one of the uid's 50, once the daemon has seen the start's
  // readiness client go (it closes its connection as it notices the hang-up; counted until
  // then, it would take the place of one of the 49).
  ASSERT_TRUE(Eventually([&] { return RawStats().session_count() == 1; }))
      << RawStats().session_count() << " sessions";
  std::vector<UniqueFd> idle = ConnectIdle(49);
  ASSERT_EQ(idle.size(), 49u);
  auto refused = RawSession::Connect(daemon().session_socket_path());
  ASSERT_TRUE(refused.has_value());
  auto reply = refused->Receive();
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kResourceExhausted));
  EXPECT_NE(reply->error().message().find("max_sessions_per_uid 50 reached"), std::string::npos)
      << reply->error().message();
  EXPECT_TRUE(refused->ClosedByDaemon());
  EXPECT_EQ(RawStats().refused_connection_count(), 1u);
  // The idle ones never said hello: the deadline closes them, which makes room again.
  for (UniqueFd& socket : idle) {
    char byte = 0;
    EXPECT_GE(::recv(socket.get(), &byte, 1, 0), 0);  // The DEADLINE_EXCEEDED frame or EOF.
  }
  idle.clear();
  ExpectStillServingWithNothingLeaked();
  const v1::StatsResponse stats = RawStats();
  ASSERT_EQ(stats.uids_size(), 1);
  EXPECT_EQ(stats.uids(0).uid(), ::getuid());
  EXPECT_EQ(stats.uids(0).sessions(), 1u);  // The fixture's client.
}

}  // namespace
}  // namespace hurray::integration
