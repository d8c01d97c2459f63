// GPU exchange end to end: the real hurrayd (its pool cuda:0) and real separate processes
// (an agent) handing device memory over with the fence handoff, including kill -9 of either
// side and the daemon stopping mid-wait. Every test skips without a CUDA driver or device.
//
// Built twice from this one file: as cuda_exchange_test with hurray_cuda_agent, whose
// kernels fill and check the data (tests/cuda, a real GPU only), and as
// softcuda_exchange_test with hurray_driver_agent, which does so with driver calls
// (tests/softcuda: it runs on the software driver in every `make test`, and the same on a
// real GPU). The test itself makes no CUDA call but the driver probe.
//
// Waits are bounded (ReadLine and Eventually with generous limits); no assertion depends
// on how long anything takes. $HURRAY_TEST_HURRAYD and $HURRAY_TEST_CUDA_AGENT override the
// programs' built paths.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hurray/cuda/driver.h"
#include "testing/child_process.h"
#include "testing/daemon_expectations.h"
#include "testing/daemon_process.h"
#include "testing/daemon_stats.h"
#include "testing/status_matchers.h"

namespace hurray::cuda_testing {
namespace {

using namespace std::chrono_literals;
using ::hurray::testing::ChildProcess;
using ::hurray::testing::DaemonProcess;
using ::hurray::testing::FetchDaemonStats;
using ::hurray::testing::FindPool;

constexpr std::uint64_t kTensorBytes = std::uint64_t{64} << 20;
constexpr std::uint64_t kSetCount = 1000;
constexpr std::uint64_t kSetMemberBytes = std::uint64_t{64} << 10;
constexpr auto kLineTimeout = 120s;
constexpr std::string_view kDevicePool = "cuda:0";

// Devices the CUDA driver of this process sees (the real one, or softcuda when the test puts
// it first on LD_LIBRARY_PATH): 0 without a driver, or when cuInit says there is no device.
// Any other failure (a driver older than hurray needs, a broken install) is an error that
// fails the test, never a skip.
Result<int> DriverDeviceCount() {
  if (::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE) == nullptr) return 0;
  const Result<const cuda::DriverApi*> driver = cuda::LoadDriver();
  if (!driver) {
    // LoadDriver's words for cuInit's CUDA_ERROR_NO_DEVICE (cuda/driver.h).
    if (driver.error().message().find("CUDA_ERROR_NO_DEVICE") != std::string::npos) return 0;
    return std::unexpected(driver.error());
  }
  int count = 0;
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(**driver, "cuDeviceGetCount", (*driver)->DeviceGetCount(&count)));
  return count;
}

// A program's path: $`variable` when set (the GPU bundle, tests/cuda/bundle.sh, runs the
// test away from its build tree), else where the build put it.
std::string ProgramPath(const char* variable, const char* built) {
  const char* path = std::getenv(variable);
  return path != nullptr && *path != '\0' ? path : built;
}

// How StartAgent starts an agent.
struct AgentOptions {
  bool stdin_pipe = false;
  // The agent's Client::Options::orphaned_fence_wait; 0: the default.
  std::uint64_t orphaned_fence_wait_ms = 0;
};

class CudaExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(const int devices, DriverDeviceCount());
    if (devices == 0) GTEST_SKIP() << "skipped: no CUDA driver or device";
    ASSERT_OK_AND_ASSIGN(
        daemon_, DaemonProcess::Start({.binary = ProgramPath("HURRAY_TEST_HURRAYD", HURRAYD_PATH),
                                       .name = "hurray-cuda"}));
    ASSERT_OK_AND_ASSIGN(const v1::StatsResponse stats, FetchDaemonStats(socket()));
    const auto pool = FindPool(stats, kDevicePool);
    ASSERT_TRUE(pool.has_value()) << pool.error().ToString() << "; hurrayd log:\n"
                                  << daemon_->Log(4096);
  }

  void TearDown() override {
    agents_.clear();  // Kills what still runs.
    if (daemon_ == nullptr) return;
    ::hurray::testing::ExpectStopsCleanly(*daemon_);
    if (HasFailure()) std::cerr << "hurrayd log:\n" << daemon_->Log(16384) << "\n";
  }

  [[nodiscard]] const std::string& socket() const { return daemon_->socket_path(); }
  [[nodiscard]] DaemonProcess& daemon() { return *daemon_; }

  // Starts `hurray_cuda_agent MODE SOCKET ARGS...`; the fixture kills it at the end.
  ChildProcess& StartAgent(const std::string& mode, const std::vector<std::string>& args,
                           AgentOptions options = {}) {
    std::vector<std::string> argv = {ProgramPath("HURRAY_TEST_CUDA_AGENT", HURRAY_CUDA_AGENT_PATH)};
    if (options.orphaned_fence_wait_ms != 0) {
      argv.push_back("--orphaned-fence-wait-ms=" + std::to_string(options.orphaned_fence_wait_ms));
    }
    argv.push_back(mode);
    argv.push_back(socket());
    argv.insert(argv.end(), args.begin(), args.end());
    auto started = ChildProcess::Start(argv, {.stdin_pipe = options.stdin_pipe});
    EXPECT_OK(started);
    agents_.push_back(std::make_unique<ChildProcess>(std::move(*started)));
    return *agents_.back();
  }

  // The agent's next line; "" (and a test failure) when none comes in time.
  static std::string NextLine(ChildProcess& agent) {
    const std::optional<std::string> line = agent.ReadLine(kLineTimeout);
    EXPECT_TRUE(line.has_value()) << agent.command_line() << " printed nothing in time";
    return line.value_or("");
  }

  // Runs an agent to its end; expects exit 0 and returns its last line.
  std::string RunAgent(const std::string& mode, const std::vector<std::string>& args) {
    ChildProcess& agent = StartAgent(mode, args);
    const std::string out = agent.ReadToEnd(kLineTimeout).value_or("");
    const std::optional<int> status = agent.Wait(5s);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << agent.command_line() << ": "
        << (status ? ::hurray::testing::DescribeWaitStatus(*status) : "still running")
        << "; stdout:\n"
        << out;
    const std::size_t last = out.find_last_of('\n', out.size() >= 2 ? out.size() - 2 : 0);
    std::string line = out.substr(last == std::string::npos ? 0 : last + 1);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }

  [[nodiscard]] v1::StatsResponse Stats() {
    auto stats = FetchDaemonStats(socket());
    EXPECT_OK(stats);
    return stats.value_or(v1::StatsResponse());
  }
  [[nodiscard]] v1::PoolStats DevicePool() {
    auto pool = FindPool(Stats(), kDevicePool);
    EXPECT_OK(pool);
    return pool.value_or(v1::PoolStats());
  }

  // Polls `condition` until it holds or `timeout` passes; returns its last value.
  static bool Eventually(const std::function<bool()>& condition,
                         std::chrono::seconds timeout = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }

  // Expects the pool to hold nothing: no bytes, no pending allocation, no lease, no fence.
  void ExpectDevicePoolEmpty() {
    EXPECT_TRUE(Eventually([&] {
      const v1::StatsResponse stats = Stats();
      const v1::PoolStats pool = FindPool(stats, kDevicePool).value_or(v1::PoolStats());
      return pool.used_bytes() == 0 && pool.fences_in_use() == 0 && stats.lease_count() == 0 &&
             stats.pending_allocation_count() == 0;
    })) << Stats().DebugString();
  }

 private:
  std::unique_ptr<DaemonProcess> daemon_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
};

std::string Bytes(std::uint64_t bytes) { return std::to_string(bytes); }

TEST_F(CudaExchangeTest, ProducerKernelDataReachesConsumerStream) {
  // The consumer waits for the name first: its stream, not its host, waits for the data.
  ChildProcess& consumer = StartAgent("consume", {"gpu/exchange", "7", "60000"});
  EXPECT_EQ(RunAgent("produce", {"gpu/exchange", Bytes(kTensorBytes), "7", "synced"}),
            "published 1");
  EXPECT_EQ(NextLine(consumer), "waiting");
  EXPECT_EQ(NextLine(consumer), "verified " + Bytes(kTensorBytes));
}

TEST_F(CudaExchangeTest, FreshProcessImportsEachSlabOnce) {
  EXPECT_EQ(RunAgent("produce-set", {"set/t", Bytes(kSetCount), Bytes(kSetMemberBytes), "100"}),
            "published " + Bytes(kSetCount));
  ASSERT_TRUE(Eventually([&] { return Stats().session_count() == 0; }));
  const v1::PoolStats before = DevicePool();
  ChildProcess& consumer = StartAgent("consume-set", {"set/t", "100"}, {.stdin_pipe = true});
  EXPECT_EQ(NextLine(consumer), "acquired " + Bytes(kSetCount));
  const v1::PoolStats holding = DevicePool();
  // One mapping per slab the set lies in, not one per tensor.
  EXPECT_LT(before.segment_count(), kSetCount);
  EXPECT_EQ(holding.slab_mappings() - before.slab_mappings(), before.segment_count());
  EXPECT_EQ(holding.read_only_slab_mappings() - before.read_only_slab_mappings(),
            before.segment_count());
  ASSERT_OK(consumer.WriteLine("go"));
  EXPECT_EQ(NextLine(consumer),
            "verified " + Bytes(kSetCount) + " " + Bytes(kSetCount * kSetMemberBytes));
}

TEST_F(CudaExchangeTest, ProducerKilledBeforePublishingLeavesNothing) {
  ChildProcess& producer =
      StartAgent("produce", {"gpu/unpublished", Bytes(kTensorBytes), "1", "hold-allocated"});
  EXPECT_EQ(NextLine(producer), "allocated");
  producer.Signal(SIGKILL);
  ExpectDevicePoolEmpty();
  EXPECT_EQ(RunAgent("consume", {"gpu/unpublished", "1", "1000"}), "absent DEADLINE_EXCEEDED");
}

TEST_F(CudaExchangeTest, ProducerKilledBeforeItsFenceReleasesTheWaitingConsumer) {
  ChildProcess& producer =
      StartAgent("produce", {"gpu/unreached", Bytes(kTensorBytes), "2", "hold-unreached"});
  EXPECT_EQ(NextLine(producer), "published 1");
  ChildProcess& consumer = StartAgent("consume", {"gpu/unreached", "2", "0"});
  EXPECT_EQ(NextLine(consumer), "waiting");
  producer.Signal(SIGKILL);
  // The daemon poisons the fence: the consumer's stream moves on and Ready() says DATA_LOSS.
  EXPECT_EQ(NextLine(consumer), "lost");
  EXPECT_EQ(RunAgent("consume", {"gpu/unreached", "2", "0"}), "absent NOT_FOUND");
  EXPECT_GE(DevicePool().fences_retired(), 1U);
  ExpectDevicePoolEmpty();
}

TEST_F(CudaExchangeTest, ProducerKilledAfterItsFenceKeepsTheData) {
  ChildProcess& producer =
      StartAgent("produce", {"gpu/reached", Bytes(kTensorBytes), "3", "hold-reached"});
  EXPECT_EQ(NextLine(producer), "published 1");
  producer.Signal(SIGKILL);
  ASSERT_TRUE(producer.Wait(30s).has_value());
  EXPECT_EQ(RunAgent("consume", {"gpu/reached", "3", "0"}), "verified " + Bytes(kTensorBytes));
  EXPECT_EQ(DevicePool().fences_retired(), 0U);
}

TEST_F(CudaExchangeTest, ProducerThatClosesBeforeItsFenceKeepsItsTensor) {
  // The producer closes its client and exits right after PublishAfter, its stream half a
  // second short of the fence: the close waits for the fence (Options::own_fence_wait), so
  // the daemon finds it reached when the session ends and keeps the tensor.
  EXPECT_EQ(RunAgent("produce", {"gpu/early", Bytes(kTensorBytes), "8", "exit-early"}),
            "published 1");
  EXPECT_EQ(RunAgent("consume", {"gpu/early", "8", "0"}), "verified " + Bytes(kTensorBytes));
  EXPECT_EQ(DevicePool().fences_retired(), 0U);
}

TEST_F(CudaExchangeTest, ConsumerKilledWhileWaitingLeaksNothing) {
  ChildProcess& producer =
      StartAgent("produce", {"gpu/waited", Bytes(kTensorBytes), "4", "hold-unreached"});
  EXPECT_EQ(NextLine(producer), "published 1");
  ChildProcess& consumer = StartAgent("consume", {"gpu/waited", "4", "0"});
  EXPECT_EQ(NextLine(consumer), "waiting");
  consumer.Signal(SIGKILL);
  EXPECT_TRUE(Eventually([&] { return Stats().lease_count() == 0; }));
  producer.Signal(SIGKILL);
  ExpectDevicePoolEmpty();
}

TEST_F(CudaExchangeTest, DaemonStoppingReleasesTheWaitingConsumer) {
  ChildProcess& producer =
      StartAgent("produce", {"gpu/stopping", Bytes(kTensorBytes), "5", "hold-unreached"});
  EXPECT_EQ(NextLine(producer), "published 1");
  ChildProcess& consumer = StartAgent("consume", {"gpu/stopping", "5", "0"});
  EXPECT_EQ(NextLine(consumer), "waiting");
  // The daemon poisons every unreached fence as it stops.
  EXPECT_OK(daemon().Stop());
  EXPECT_EQ(NextLine(consumer), "lost");
  producer.Signal(SIGKILL);
}

TEST_F(CudaExchangeTest, DaemonKilledThenProducerKilledReleasesTheWaitingConsumer) {
  ChildProcess& producer =
      StartAgent("produce", {"gpu/orphaned", Bytes(kTensorBytes), "9", "hold-unreached"});
  EXPECT_EQ(NextLine(producer), "published 1");
  // The consumer gives a fence whose daemon has exited 2 s (Options::orphaned_fence_wait).
  ChildProcess& consumer =
      StartAgent("consume", {"gpu/orphaned", "9", "0"}, {.orphaned_fence_wait_ms = 2000});
  EXPECT_EQ(NextLine(consumer), "waiting");
  // Nothing poisons the fence: the daemon is gone, then the producer. Without the client's
  // own relay of the fence, the consumer's stream would wait for ever.
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_OK(daemon().Kill());
  producer.Signal(SIGKILL);
  EXPECT_EQ(NextLine(consumer), "lost");
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 2s);
}

TEST_F(CudaExchangeTest, LeaseEndedAfterTheStreamKeepsTheMemoryUntilTheStreamIsDone) {
  EXPECT_EQ(RunAgent("produce", {"gpu/ordered", Bytes(kTensorBytes), "10", "synced"}),
            "published 1");
  // The consumer's check waits behind a delay of its stream (at most 120 s), which this test
  // ends once it has checked; the consumer's lease ends after the check.
  ChildProcess& consumer =
      StartAgent("consume-release-after", {"gpu/ordered", "10", "120000"}, {.stdin_pipe = true});
  EXPECT_EQ(NextLine(consumer), "released");
  // The view is gone in the consumer, but the daemon still sees the lease: the memory can
  // not go to another tensor while the stream may still read it. A new version supersedes
  // the one read, and another tensor is allocated: with the lease ended at once, it could
  // take the superseded version's memory and overwrite it under the pending check.
  EXPECT_EQ(Stats().lease_count(), 1U);
  EXPECT_EQ(RunAgent("produce", {"gpu/ordered", Bytes(kTensorBytes), "11", "synced"}),
            "published 2");
  EXPECT_EQ(RunAgent("produce", {"gpu/overwrite", Bytes(kTensorBytes), "12", "synced"}),
            "published 1");
  EXPECT_EQ(Stats().lease_count(), 1U);
  ASSERT_OK(consumer.WriteLine("go"));
  EXPECT_EQ(NextLine(consumer), "verified " + Bytes(kTensorBytes));
  EXPECT_TRUE(Eventually([&] { return Stats().lease_count() == 0; }));
}

TEST_F(CudaExchangeTest, ConsumerWriteThroughReadOnlyMappingIsRefused) {
  EXPECT_EQ(RunAgent("produce", {"gpu/read-only", Bytes(kTensorBytes), "6", "synced"}),
            "published 1");
  ChildProcess& writer = StartAgent("write-into", {"gpu/read-only"});
  const std::string access = NextLine(writer);
  RecordProperty("consumer_mapping", access);
  EXPECT_EQ(access, "access read-only");
  EXPECT_TRUE(NextLine(writer).starts_with("write refused: ")) << access;
  // The faulting process's context is gone; the tensor is intact for everyone else.
  EXPECT_EQ(RunAgent("consume", {"gpu/read-only", "6", "0"}), "verified " + Bytes(kTensorBytes));
}

}  // namespace
}  // namespace hurray::cuda_testing
