// FenceRelay over a fake DeviceMemoryMapper: which words consumer streams wait on, who sets
// them and when, on the CPU (the GPU relay's stream is the test itself).
#include "device/fence_relay.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hurray/ipc/fence_word.h"
#include "testing/status_matchers.h"

namespace hurray::client_internal {
namespace {

using namespace std::chrono_literals;

// Host addresses are device addresses; RelayValue only records what the GPU was asked to do.
class FakeMapper final : public DeviceMemoryMapper {
 public:
  struct Relayed {
    DeviceAddress wait_address = 0;
    std::uint64_t wait_value = 0;
    DeviceAddress write_address = 0;
    std::uint64_t write_value = 0;
  };

  Result<int> DeviceOrdinalOf(std::string_view) override { return 0; }
  Result<std::uint64_t> DeviceMemoryBytes(int) override { return 0; }
  Result<MappedSlab> ImportAndMap(const SlabToImport&) override { return MappedSlab{}; }
  void Unmap(const MappedSlab&) override {}
  Result<DeviceAddress> RegisterHostMemory(void* host, std::uint64_t, int,
                                           bool read_only) override {
    std::lock_guard lock(mutex_);
    registered_read_only_ = registered_read_only_ || read_only;
    ++registrations_;
    return reinterpret_cast<DeviceAddress>(host);
  }
  void UnregisterHostMemory(void*) override { ++unregistrations_; }
  Status WaitValue(void*, int, DeviceAddress, std::uint64_t) override { return {}; }
  Status WriteValue(void*, int, DeviceAddress, std::uint64_t) override { return {}; }
  Result<void*> RecordEventAfterWait(int, DeviceAddress, std::uint64_t) override { return nullptr; }
  void DestroyEvent(void*) override {}
  Status LaunchHostFunction(void*, int, void (*function)(void*), void* data) override {
    function(data);
    return {};
  }
  Status RelayValue(int, DeviceAddress wait_address, std::uint64_t wait_value,
                    DeviceAddress write_address, std::uint64_t write_value) override {
    std::lock_guard lock(mutex_);
    if (fail_relay_) return InternalError("cuStreamWaitValue64: CUDA_ERROR_NOT_SUPPORTED");
    relayed_.push_back({wait_address, wait_value, write_address, write_value});
    return {};
  }

  std::vector<Relayed> relayed() {
    std::lock_guard lock(mutex_);
    return relayed_;
  }
  int registrations() {
    std::lock_guard lock(mutex_);
    return registrations_;
  }
  bool registered_read_only() {
    std::lock_guard lock(mutex_);
    return registered_read_only_;
  }
  void set_fail_relay(bool fail) {
    std::lock_guard lock(mutex_);
    fail_relay_ = fail;
  }
  std::atomic<int> unregistrations_{0};

 private:
  std::mutex mutex_;
  std::vector<Relayed> relayed_;
  int registrations_ = 0;
  bool registered_read_only_ = false;
  bool fail_relay_ = false;
};

std::uint64_t Load(const std::uint64_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
void Store(std::uint64_t* word, std::uint64_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}
std::uint64_t* Host(DeviceAddress address) {
  return reinterpret_cast<std::uint64_t*>(address);  // NOLINT(performance-no-int-to-ptr)
}

// Polls `condition` until it holds or `timeout` passes; returns its last value.
bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A process that only waits to be killed, and a pidfd of it: a daemon to lose.
class StandInDaemon {
 public:
  StandInDaemon() : pid_(::fork()) {
    if (pid_ == 0) {
      while (true) ::pause();
    }
    const long pidfd = ::syscall(SYS_pidfd_open, pid_, 0U);  // NOLINT(google-runtime-int)
    if (pidfd >= 0) pidfd_ = std::make_shared<const UniqueFd>(static_cast<int>(pidfd));
  }
  ~StandInDaemon() { Kill(); }
  StandInDaemon(const StandInDaemon&) = delete;
  StandInDaemon& operator=(const StandInDaemon&) = delete;

  [[nodiscard]] const std::shared_ptr<const UniqueFd>& pidfd() const { return pidfd_; }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_;
  std::shared_ptr<const UniqueFd> pidfd_;
};

class FenceRelayTest : public ::testing::Test {
 protected:
  // A fence of the fake daemon: word `index` of its segment, waited for at `value`.
  FenceToRelay Fence(std::size_t index, std::uint64_t value, bool gpu = false) {
    return FenceToRelay{
        .word = &daemon_words_[index],
        .keep = keep_,
        .value = value,
        .device_ordinal = 0,
        .device_word = gpu ? reinterpret_cast<DeviceAddress>(&daemon_words_[index]) : 0,
        .daemon_pidfd = nullptr,
        .orphaned_wait = 10s};
  }

  FakeMapper mapper_;
  FenceRelay relay_{mapper_};
  std::uint64_t daemon_words_[8] = {};  // NOLINT(modernize-avoid-c-arrays)
  std::shared_ptr<const int> keep_ = std::make_shared<const int>(0);
};

TEST_F(FenceRelayTest, AReachedFenceNeedsNoRelay) {
  Store(&daemon_words_[0], 5);
  ASSERT_OK_AND_ASSIGN(auto relayed, relay_.Relay(Fence(0, 5)));
  EXPECT_EQ(relayed, nullptr);
  // The poison reaches every live value: a stream would move on at once too.
  Store(&daemon_words_[1], kFencePoison);
  ASSERT_OK_AND_ASSIGN(auto poisoned, relay_.Relay(Fence(1, 7)));
  EXPECT_EQ(poisoned, nullptr);
  EXPECT_EQ(mapper_.registrations(), 0);
}

TEST_F(FenceRelayTest, TheHostRelaysAWordItCannotRegister) {
  ASSERT_OK_AND_ASSIGN(auto relayed, relay_.Relay(Fence(0, 3)));
  ASSERT_NE(relayed, nullptr);
  // The relay word is the process's own, registered read-write.
  EXPECT_EQ(mapper_.registrations(), 1);
  EXPECT_FALSE(mapper_.registered_read_only());
  std::uint64_t* word = Host(relayed->device_word());
  EXPECT_FALSE(FenceWordReaches(Load(word), relayed->value()));
  // Nothing set it while the daemon's word stays below the fence.
  Store(&daemon_words_[0], 2);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(FenceWordReaches(Load(word), relayed->value()));
  EXPECT_EQ(relay_.pending_count(), 1U);
  Store(&daemon_words_[0], 3);
  EXPECT_TRUE(Eventually([&] { return FenceWordReaches(Load(word), relayed->value()); }));
  EXPECT_TRUE(Eventually([&] { return relay_.pending_count() == 0; }));
  EXPECT_FALSE(relayed->abandoned());
  EXPECT_TRUE(mapper_.relayed().empty());
}

TEST_F(FenceRelayTest, APoisonedFenceIsRelayedToo) {
  ASSERT_OK_AND_ASSIGN(auto relayed, relay_.Relay(Fence(0, 9)));
  Store(&daemon_words_[0], kFencePoison);
  EXPECT_TRUE(Eventually(
      [&] { return FenceWordReaches(Load(Host(relayed->device_word())), relayed->value()); }));
  EXPECT_FALSE(relayed->abandoned());
  EXPECT_EQ(relayed->daemon_word(), kFencePoison);
}

TEST_F(FenceRelayTest, EveryWaiterOfAFenceSharesOneRelay) {
  ASSERT_OK_AND_ASSIGN(auto first, relay_.Relay(Fence(0, 4)));
  ASSERT_OK_AND_ASSIGN(auto second, relay_.Relay(Fence(0, 4)));
  EXPECT_EQ(first, second);
  // Another value of the same word (a reused word) is another fence.
  ASSERT_OK_AND_ASSIGN(auto later, relay_.Relay(Fence(0, 6)));
  EXPECT_NE(later, first);
  EXPECT_NE(later->device_word(), first->device_word());
  EXPECT_EQ(relay_.pending_count(), 2U);
}

TEST_F(FenceRelayTest, AWordIsReusedWithALargerValueOnlyOnceReleased) {
  ASSERT_OK_AND_ASSIGN(auto first, relay_.Relay(Fence(0, 1)));
  Store(&daemon_words_[0], 1);
  ASSERT_TRUE(Eventually([&] { return relay_.pending_count() == 0; }));
  ASSERT_OK_AND_ASSIGN(auto second, relay_.Relay(Fence(1, 1)));
  // The same word: a stream still to evaluate the first wait (>= its value) passes anyway.
  EXPECT_EQ(second->device_word(), first->device_word());
  EXPECT_GT(second->value(), first->value());
  EXPECT_FALSE(FenceWordReaches(Load(Host(second->device_word())), second->value()));
  EXPECT_EQ(mapper_.registrations(), 1);
}

TEST_F(FenceRelayTest, TheGpuRelaysAWordItCanRegister) {
  ASSERT_OK_AND_ASSIGN(auto relayed, relay_.Relay(Fence(0, 2, /*gpu=*/true)));
  const std::vector<FakeMapper::Relayed> asked = mapper_.relayed();
  ASSERT_EQ(asked.size(), 1U);
  EXPECT_EQ(asked[0].wait_address, reinterpret_cast<DeviceAddress>(&daemon_words_[0]));
  EXPECT_EQ(asked[0].wait_value, 2U);
  EXPECT_EQ(asked[0].write_address, relayed->device_word());
  EXPECT_EQ(asked[0].write_value, relayed->value());
  // The host leaves it to the GPU: a reached word is not copied by the thread.
  Store(&daemon_words_[0], 2);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(FenceWordReaches(Load(Host(relayed->device_word())), relayed->value()));
  EXPECT_TRUE(relay_.GpuMayRead(keep_.get()));
  // The GPU's write; then the word is free again.
  Store(Host(asked[0].write_address), asked[0].write_value);
  ASSERT_OK_AND_ASSIGN(auto next, relay_.Relay(Fence(1, 2, /*gpu=*/true)));
  EXPECT_TRUE(Eventually([&] { return relay_.pending_count() == 1; }, 1s));
  (void)next;
}

TEST_F(FenceRelayTest, AGpuRelayThatCannotBeEnqueuedIsAnErrorAndKeepsNoWord) {
  mapper_.set_fail_relay(true);
  const auto refused = relay_.Relay(Fence(0, 2, /*gpu=*/true));
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("CUDA_ERROR_NOT_SUPPORTED"), std::string::npos);
  EXPECT_EQ(relay_.pending_count(), 0U);
  mapper_.set_fail_relay(false);
  ASSERT_OK_AND_ASSIGN(auto relayed, relay_.Relay(Fence(0, 2)));
  EXPECT_EQ(relayed->value(), 1U);  // The refused relay used no value of the word.
}

TEST_F(FenceRelayTest, AFenceOfAnExitedDaemonIsAbandonedAfterTheOrphanedWait) {
  StandInDaemon daemon;
  if (daemon.pidfd() == nullptr) GTEST_SKIP() << "pidfd_open is not available here";
  std::vector<std::shared_ptr<const RelayedFence>> relays;
  for (const bool gpu : {false, true}) {
    FenceToRelay fence = Fence(gpu ? 1 : 0, 3, gpu);
    fence.daemon_pidfd = daemon.pidfd();
    fence.orphaned_wait = 300ms;
    ASSERT_OK_AND_ASSIGN(auto relayed, relay_.Relay(std::move(fence)));
    ASSERT_NE(relayed, nullptr);
    relays.push_back(std::move(relayed));
  }
  // While the daemon lives, nothing is given up on.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(relay_.pending_count(), 2U);
  const auto killed = std::chrono::steady_clock::now();
  daemon.Kill();
  EXPECT_TRUE(Eventually([&] { return relay_.pending_count() == 0; }));
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 300ms);
  for (const auto& relayed : relays) {
    EXPECT_TRUE(relayed->abandoned());
    EXPECT_TRUE(FenceWordReaches(Load(Host(relayed->device_word())), relayed->value()));
  }
  // The GPU relay may still read the daemon's word: its mapping stays.
  EXPECT_TRUE(relay_.GpuMayRead(keep_.get()));
}

TEST_F(FenceRelayTest, AnOrphanedFenceReachedInTimeIsNotAbandoned) {
  StandInDaemon daemon;
  if (daemon.pidfd() == nullptr) GTEST_SKIP() << "pidfd_open is not available here";
  FenceToRelay fence = Fence(0, 3, /*gpu=*/true);
  fence.daemon_pidfd = daemon.pidfd();
  fence.orphaned_wait = 10s;
  ASSERT_OK_AND_ASSIGN(auto relayed, relay_.Relay(std::move(fence)));
  daemon.Kill();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(relay_.pending_count(), 1U);
  // The producer still runs and reaches its fence: the host, watching now, relays it.
  Store(&daemon_words_[0], 3);
  EXPECT_TRUE(Eventually(
      [&] { return FenceWordReaches(Load(Host(relayed->device_word())), relayed->value()); }));
  EXPECT_FALSE(relayed->abandoned());
}

}  // namespace
}  // namespace hurray::client_internal
