#include "watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <thread>

#include "pool/cpu_pool.h"
#include "pool/pool_set.h"
#include "registry/registry.h"
#include "serving_probe.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr std::chrono::microseconds kInterval = milliseconds(40);
// Long enough for many watchdog periods (kInterval / 2) on a loaded machine.
constexpr milliseconds kObservation{400};

// A probe whose answer the test sets; a hanging probe blocks until its deadline and fails.
class FakeProbe final : public ServingProbe {
 public:
  [[nodiscard]] Status Probe(steady_clock::time_point deadline) override {
    probes_.fetch_add(1);
    if (!hangs_.load()) return {};
    std::this_thread::sleep_until(deadline);
    return DeadlineExceededError("the fake probe hangs");
  }
  void SetHangs(bool hangs) { hangs_.store(hangs); }
  [[nodiscard]] int probes() const { return probes_.load(); }

 private:
  std::atomic<bool> hangs_{false};
  std::atomic<int> probes_{0};
};

class WatchdogTest : public ::testing::Test {
 protected:
  std::unique_ptr<Watchdog> StartWatchdog(std::chrono::microseconds interval = kInterval) {
    return Watchdog::Start(probe_, {.interval = interval, .ping = [this] { pings_.fetch_add(1); }});
  }

  FakeProbe probe_;
  std::atomic<int> pings_{0};
};

TEST_F(WatchdogTest, PingsRepeatedlyWhileTheProbeAnswers) {
  auto watchdog = StartWatchdog();
  std::this_thread::sleep_for(kObservation);
  watchdog->Stop();
  EXPECT_GE(pings_.load(), 3);
  EXPECT_EQ(pings_.load(), probe_.probes());
}

TEST_F(WatchdogTest, HangingProbeSendsNoPing) {
  probe_.SetHangs(true);
  auto watchdog = StartWatchdog();
  std::this_thread::sleep_for(kObservation);
  watchdog->Stop();
  EXPECT_GE(probe_.probes(), 2);  // It kept probing...
  EXPECT_EQ(pings_.load(), 0);    // ...and never pinged.
}

TEST_F(WatchdogTest, PingsResumeWhenTheProbeAnswersAgain) {
  probe_.SetHangs(true);
  auto watchdog = StartWatchdog();
  std::this_thread::sleep_for(kObservation / 2);
  EXPECT_EQ(pings_.load(), 0);
  probe_.SetHangs(false);
  std::this_thread::sleep_for(kObservation);
  watchdog->Stop();
  EXPECT_GE(pings_.load(), 2);
}

TEST_F(WatchdogTest, StopEndsAWaitOfAnHourAndNoPingFollows) {
  auto watchdog = StartWatchdog(std::chrono::hours(1));
  while (pings_.load() == 0) std::this_thread::sleep_for(milliseconds(1));  // The first probe.
  watchdog->Stop();  // Returns at once rather than after the half-hour period.
  const int pings = pings_.load();
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(pings_.load(), pings);
  EXPECT_EQ(pings, 1);
}

TEST(SystemdWatchdogIntervalTest, ReadsWatchdogUsecForThisProcessOnly) {
  ::unsetenv("WATCHDOG_PID");
  ::unsetenv("WATCHDOG_USEC");
  EXPECT_EQ(SystemdWatchdogInterval(), std::nullopt);
  ::setenv("WATCHDOG_USEC", "4000000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  EXPECT_EQ(SystemdWatchdogInterval(), std::chrono::microseconds(4'000'000));
  ::setenv("WATCHDOG_PID", std::to_string(::getpid() + 1).c_str(), 1);  // Another process's.
  EXPECT_EQ(SystemdWatchdogInterval(), std::nullopt);
  ::unsetenv("WATCHDOG_PID");
  ::unsetenv("WATCHDOG_USEC");
}

// The daemon's probe over a real registry and io_context.
class EventLoopRegistryProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pool = CpuPool::Create(CpuPool::Options{
        .name = "cpu", .capacity_bytes = 4 << 20, .shm_prefix = "hurray-watchdog-test"});
    ASSERT_OK(pool);
    pools_.Add(std::move(*pool));
    registry_ = std::make_unique<Registry>(pools_, io_, Registry::Options{.daemon_epoch = 7});
    probe_ = std::make_unique<EventLoopRegistryProbe>(io_, *registry_);
  }
  void TearDown() override {
    io_.stop();
    if (io_thread_.joinable()) io_thread_.join();
  }
  void RunIo() {
    io_thread_ = std::thread([this] {
      auto work = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }
  static steady_clock::time_point Soon() { return steady_clock::now() + milliseconds(100); }

  boost::asio::io_context io_;
  PoolSet pools_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<EventLoopRegistryProbe> probe_;
  std::thread io_thread_;
};

TEST_F(EventLoopRegistryProbeTest, AnswersWhenTheLoopRunsAndTheRegistryAnswers) {
  RunIo();
  EXPECT_OK(probe_->Probe(Soon()));
  EXPECT_OK(probe_->Probe(Soon()));
}

TEST_F(EventLoopRegistryProbeTest, EventLoopThatRunsNothingFailsTheProbe) {
  EXPECT_ERROR(probe_->Probe(Soon()), StatusCode::kDeadlineExceeded,
               {"event loop", "has not run a task"});
}

TEST_F(EventLoopRegistryProbeTest, BlockedEventLoopFailsUntilItRunsAgain) {
  std::promise<void> release;
  boost::asio::post(io_, [blocked = release.get_future().share()] { blocked.wait(); });
  RunIo();
  EXPECT_ERROR(probe_->Probe(Soon()), StatusCode::kDeadlineExceeded, {"event loop"});
  EXPECT_ERROR(probe_->Probe(Soon()), StatusCode::kDeadlineExceeded, {"event loop"});
  release.set_value();
  EXPECT_OK(probe_->Probe(Soon()));  // The task posted first has run now.
  EXPECT_OK(probe_->Probe(Soon()));
}

}  // namespace
}  // namespace hurray::daemon
