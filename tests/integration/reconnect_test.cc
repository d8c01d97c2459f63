// A client outlives its daemon: after `kill -9` of hurrayd and a new daemon on the same
// directory (the same socket paths), the client's next call opens a new session by itself
// and works, views of the old epoch stay readable, and objects of the old epoch (an
// unpublished allocation, a lease) answer UNAVAILABLE naming the restart. Run over both
// channels of the hot path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray::integration {
namespace {

using ::hurray::testing::TempDir;
using ::testing::HasSubstr;

constexpr std::uint64_t kBytes = 256 << 10;

// Polls `condition` (every 10 ms, up to 30 s) until it holds; returns its last value.
bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class ReconnectTest : public ::testing::TestWithParam<Client::Options::HotPath> {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(directory_, TempDir::Create("hurray-reconnect"));
    ASSERT_NO_FATAL_FAILURE(StartDaemon());
    ASSERT_OK_AND_ASSIGN(client_, Client::Connect({.socket_path = daemon_->socket_path(),
                                                   .client_name = "reconnect",
                                                   .hot_path = GetParam()}));
  }

  void TearDown() override {
    client_.reset();
    if (daemon_ && daemon_->Running()) {
      const Status stopped = daemon_->Stop();
      EXPECT_TRUE(stopped) << stopped.error().ToString();
    }
  }

  // A daemon on the test's directory, replacing the one before (whose /dev/shm segments
  // its harness removes; mappings of them stay valid).
  void StartDaemon() {
    daemon_.reset();
    ASSERT_OK_AND_ASSIGN(daemon_, DaemonProcess::Start({.binary = HURRAYD_PATH,
                                                        .name = "hurray-reconnect",
                                                        .directory = directory_->path()}));
  }

  // kill -9 of the daemon, reaped, then a new one on the same directory.
  void KillAndRestartDaemon() {
    ASSERT_EQ(::kill(daemon_->pid(), SIGKILL), 0);
    ASSERT_TRUE(Eventually([&] { return !daemon_->Running(); }));
    ASSERT_NO_FATAL_FAILURE(StartDaemon());
  }

  // Publishes `name`, filled from `seed`.
  void Publish(const std::string& name, std::uint64_t seed) {
    ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client_->Allocate(MakeByteTensor(kBytes)));
    FillBuffer(tensor.buffer(0), seed, 0);
    ASSERT_OK(tensor.Publish(name));
  }

  std::optional<TempDir> directory_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_P(ReconnectTest, NextCallAfterDaemonKillWorksAndOldViewStaysReadable) {
  ASSERT_NO_FATAL_FAILURE(Publish("re/before", 11));
  ASSERT_OK_AND_ASSIGN(TensorView old_view, client_->Acquire("re/before"));
  const std::uint64_t old_epoch = client_->daemon_epoch();
  EXPECT_EQ(old_view.daemon_epoch(), old_epoch);

  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());

  // The very first call after the restart goes through, on a new session.
  ASSERT_NO_FATAL_FAILURE(Publish("re/after", 12));
  EXPECT_NE(client_->daemon_epoch(), old_epoch);
  ASSERT_OK_AND_ASSIGN(TensorView new_view, client_->Acquire("re/after"));
  EXPECT_EQ(CheckBuffer(new_view.buffer(0), 12, 0), "");
  EXPECT_EQ(new_view.daemon_epoch(), client_->daemon_epoch());

  // The old view's mapping is its own: still readable, byte for byte.
  EXPECT_EQ(CheckBuffer(old_view.buffer(0), 11, 0), "");
  // Its lease ended with the old session; the release says so and sends nothing.
  EXPECT_ERROR(old_view.Release(), StatusCode::kUnavailable, {"restarted"});
  // The new view's lease is untouched by that.
  ASSERT_OK_AND_ASSIGN(DaemonStats stats, client_->Stats());
  EXPECT_EQ(stats.lease_count, 1u);
  ASSERT_OK(new_view.Release());
  ASSERT_OK(client_->Delete("re/after"));
}

TEST_P(ReconnectTest, AllocationOfTheOldEpochCannotBePublishedButStaysWritable) {
  ASSERT_OK_AND_ASSIGN(WritableTensor stale, client_->Allocate(MakeByteTensor(kBytes)));
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());

  FillBuffer(stale.buffer(0), 21, 0);
  EXPECT_EQ(CheckBuffer(stale.buffer(0), 21, 0), "");
  EXPECT_ERROR(stale.Publish("re/stale"), StatusCode::kUnavailable, {"restarted", "epoch"});
  EXPECT_ERROR(client_->Acquire("re/stale"), StatusCode::kNotFound, {"re/stale"});
  ASSERT_NO_FATAL_FAILURE(Publish("re/fresh", 22));
  ASSERT_OK(client_->Delete("re/fresh"));
}

TEST_P(ReconnectTest, CallInFlightWhenTheDaemonDiesFailsWithUnavailableNamingTheRestart) {
  // A stopped daemon takes the request but never answers; killing it then ends the call.
  ASSERT_EQ(::kill(daemon_->pid(), SIGSTOP), 0);
  auto in_flight =
      std::async(std::launch::async, [&] { return client_->Allocate(MakeByteTensor(kBytes)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  EXPECT_ERROR(in_flight.get(), StatusCode::kUnavailable, {"restart"});

  ASSERT_NO_FATAL_FAILURE(Publish("re/next", 31));
  ASSERT_OK(client_->Delete("re/next"));
}

TEST_P(ReconnectTest, CallsFailWithUnavailableWhileNoDaemonServesThenRecover) {
  ASSERT_EQ(::kill(daemon_->pid(), SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return !daemon_->Running(); }));
  EXPECT_ERROR(client_->Allocate(MakeByteTensor(kBytes)), StatusCode::kUnavailable, {"restart"});
  EXPECT_ERROR(client_->Acquire("re/none"), StatusCode::kUnavailable, {"restart"});
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_NO_FATAL_FAILURE(Publish("re/back", 41));
  ASSERT_OK_AND_ASSIGN(TensorView view, client_->Acquire("re/back"));
  EXPECT_EQ(CheckBuffer(view.buffer(0), 41, 0), "");
  ASSERT_OK(view.Release());
  ASSERT_OK(client_->Delete("re/back"));
}

HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS(ReconnectTest);

}  // namespace
}  // namespace hurray::integration
