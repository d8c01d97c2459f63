// Quarantine (docs/architecture.md, "Failure behaviour"): what a session could still write when
// it ended stays out of use until its process has exited. RangeQuarantine's bookkeeping alone,
// then the registry with a real child process whose pidfd it watches.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "hurray/descriptor_codec.h"
#include "pool/cpu_pool.h"
#include "registry/range_quarantine.h"
#include "registry/registry.h"
#include "testing/io_thread.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kPoolBytes = 4 << 20;

std::unique_ptr<CpuPool> MakePool(std::uint64_t capacity = kPoolBytes) {
  auto pool = CpuPool::Create(
      CpuPool::Options{.name = "cpu", .capacity_bytes = capacity, .shm_prefix = "hurray-test"});
  EXPECT_OK(pool);
  return pool ? std::move(*pool) : nullptr;
}

// ---- RangeQuarantine ----

TEST(RangeQuarantineTest, HoldsRangesPerPoolUntilReleased) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  RangeQuarantine quarantine;
  quarantine.Open(7);
  const PoolRange ranges[] = {{.segment_id = 1, .offset = 0, .size = 100},
                              {.segment_id = 0, .offset = 0, .size = 0},  // An empty buffer.
                              {.segment_id = 1, .offset = 4096, .size = 50}};
  EXPECT_TRUE(
      quarantine.Add(7, *pool, ranges,
                     {.uid = 1001, .bytes = 4096, .kind = RangeQuarantine::ChargeKind::kPending}));
  EXPECT_TRUE(quarantine.IsOpen(7));
  EXPECT_EQ(quarantine.hold_count(), 1u);
  EXPECT_EQ(quarantine.Totals(pool.get()).bytes, 150u);
  EXPECT_EQ(quarantine.Totals(pool.get()).ranges, 2u);

  const RangeQuarantine::Released released = quarantine.Release(7);
  ASSERT_EQ(released.ranges.size(), 2u);
  EXPECT_EQ(released.ranges[0].pool, pool.get());
  EXPECT_EQ(released.ranges[1].range, ranges[2]);
  ASSERT_EQ(released.charges.size(), 1u);
  EXPECT_EQ(released.charges[0].uid, 1001u);
  EXPECT_EQ(released.charges[0].bytes, 4096u);
  EXPECT_FALSE(quarantine.IsOpen(7));
  EXPECT_EQ(quarantine.hold_count(), 0u);
  EXPECT_EQ(quarantine.Totals(pool.get()).bytes, 0u);
  EXPECT_EQ(quarantine.Totals(pool.get()).ranges, 0u);
}

TEST(RangeQuarantineTest, TakesNothingIntoAHoldThatIsNotOpen) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  RangeQuarantine quarantine;
  const PoolRange range{.segment_id = 1, .offset = 0, .size = 100};
  EXPECT_FALSE(quarantine.Add(3, *pool, {&range, 1}, {}));
  quarantine.Open(3);
  (void)quarantine.Release(3);
  EXPECT_FALSE(quarantine.Add(3, *pool, {&range, 1}, {}));  // Released: the caller frees.
  EXPECT_EQ(quarantine.Totals(pool.get()).bytes, 0u);
  EXPECT_TRUE(quarantine.Release(3).ranges.empty());
}

TEST(RangeQuarantineTest, KeepsHoldsApart) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  RangeQuarantine quarantine;
  quarantine.Open(1);
  quarantine.Open(2);
  const PoolRange first{.segment_id = 1, .offset = 0, .size = 10};
  const PoolRange second{.segment_id = 1, .offset = 4096, .size = 20};
  ASSERT_TRUE(quarantine.Add(1, *pool, {&first, 1}, {}));
  ASSERT_TRUE(quarantine.Add(2, *pool, {&second, 1}, {}));
  EXPECT_EQ(quarantine.hold_ids(), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(quarantine.Release(2).ranges.at(0).range, second);
  EXPECT_EQ(quarantine.Totals(pool.get()).bytes, 10u);
  EXPECT_EQ(quarantine.Release(1).ranges.at(0).range, first);
}

// ---- The registry, with a real process ----

// A child process that sleeps until killed, and a pidfd on it.
class SleepingChild {
 public:
  SleepingChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      // Holds no pipe of the test's runner open.
      ::close(STDOUT_FILENO);
      ::close(STDERR_FILENO);
      while (true) ::pause();
    }
  }
  ~SleepingChild() { Kill(); }
  SleepingChild(const SleepingChild&) = delete;
  SleepingChild& operator=(const SleepingChild&) = delete;

  [[nodiscard]] UniqueFd Pidfd() const {
    return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0U)));
  }
  // SIGKILL, and reaped.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
};

bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class RegistryQuarantineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pool = MakePool();
    ASSERT_NE(pool, nullptr);
    pool_ = pool.get();
    pools_.Add(std::move(pool));
    registry_ = std::make_unique<Registry>(pools_, io_, Registry::Options{.daemon_epoch = 1});
    io_thread_.emplace(io_);
  }
  void TearDown() override {
    io_thread_.reset();  // First: its handlers reach the registry.
    registry_.reset();
    EXPECT_EQ(pool_->Usage().used_bytes, 0u) << "the pool leaked";
  }

  std::uint64_t OpenSession(std::uint32_t uid = 1001) {
    auto grant = registry_->OpenSession(PeerCredentials{.pid = 1, .uid = uid, .gid = uid}, "t");
    EXPECT_OK(grant);
    return grant ? grant->session_id : 0;
  }
  Result<v1::AllocateResponse> Allocate(std::uint64_t session, std::uint64_t bytes) {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() =
        DescriptorToProto(*TensorDescriptor::Dense(ElementType::kUint8, {bytes}));
    return registry_->Allocate(session, request);
  }
  [[nodiscard]] std::uint64_t QuarantinedBytes() const {
    const v1::StatsResponse stats = registry_->Stats();
    return stats.pools(0).quarantined_bytes();
  }
  [[nodiscard]] std::uint64_t PendingBytesOf(std::uint32_t uid) const {
    const v1::StatsResponse stats = registry_->Stats();
    for (const v1::UidUsage& usage : stats.uids()) {
      if (usage.uid() == uid) return usage.pending_bytes();
    }
    return 0;
  }

  boost::asio::io_context io_;
  std::optional<testing::IoThread> io_thread_;
  PoolSet pools_;
  Pool* pool_ = nullptr;
  std::unique_ptr<Registry> registry_;
};

TEST_F(RegistryQuarantineTest, AllocationOfAnEndedSessionWaitsForItsProcessToExit) {
  SleepingChild producer;
  const std::uint64_t session = OpenSession();
  UniqueFd pidfd = producer.Pidfd();
  ASSERT_TRUE(pidfd.valid()) << "pidfd_open refused";
  registry_->SetPeerProcess(session, std::move(pidfd));
  constexpr std::uint64_t kBytes = 3 << 20;  // Of a 4 MiB pool: a second one cannot fit.
  ASSERT_OK_AND_ASSIGN(const v1::AllocateResponse first, Allocate(session, kBytes));

  registry_->CloseSession(session);
  v1::StatsResponse stats = registry_->Stats();
  EXPECT_EQ(stats.pending_allocation_count(), 0u);
  EXPECT_EQ(stats.quarantined_sessions(), 1u);
  EXPECT_EQ(stats.pools(0).quarantined_bytes(), kBytes);
  EXPECT_EQ(stats.pools(0).quarantined_ranges(), 1u);
  EXPECT_GE(stats.pools(0).used_bytes(), kBytes);
  EXPECT_GT(PendingBytesOf(1001), kBytes) << "the quarantined bytes stay charged to the uid";

  // While the producer lives, nobody gets its range.
  const std::uint64_t next = OpenSession();
  auto refused = Allocate(next, kBytes);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);

  producer.Kill();
  EXPECT_TRUE(Eventually([&] { return QuarantinedBytes() == 0; }));
  stats = registry_->Stats();
  EXPECT_EQ(stats.quarantined_sessions(), 0u);
  EXPECT_EQ(stats.pools(0).used_bytes(), 0u);
  EXPECT_EQ(PendingBytesOf(1001), 0u) << "uncharged when freed";
  ASSERT_OK_AND_ASSIGN(const v1::AllocateResponse second, Allocate(next, kBytes));
  EXPECT_EQ(second.buffers(0).offset(), first.buffers(0).offset());
  registry_->CloseSession(next);
}

TEST_F(RegistryQuarantineTest, AProcessGoneAlreadyFreesSoon) {
  SleepingChild producer;
  const std::uint64_t session = OpenSession();
  registry_->SetPeerProcess(session, producer.Pidfd());
  ASSERT_OK(Allocate(session, 1 << 20));
  producer.Kill();
  registry_->CloseSession(session);
  EXPECT_TRUE(Eventually([&] { return pool_->Usage().used_bytes == 0; }));
  EXPECT_EQ(registry_->Stats().quarantined_sessions(), 0u);
}

TEST_F(RegistryQuarantineTest, SessionWithoutAPidfdFreesAtOnce) {
  const std::uint64_t session = OpenSession();
  ASSERT_OK(Allocate(session, 1 << 20));
  registry_->CloseSession(session);
  EXPECT_EQ(pool_->Usage().used_bytes, 0u);
  EXPECT_EQ(QuarantinedBytes(), 0u);
  EXPECT_EQ(PendingBytesOf(1001), 0u);
}

TEST_F(RegistryQuarantineTest, SessionThatHeldNothingToWriteQuarantinesNothing) {
  SleepingChild process;
  const std::uint64_t session = OpenSession();
  registry_->SetPeerProcess(session, process.Pidfd());
  ASSERT_OK_AND_ASSIGN(const v1::AllocateResponse allocation, Allocate(session, 1 << 20));
  v1::CancelAllocationRequest cancel;
  cancel.set_allocation_id(allocation.allocation_id());
  ASSERT_OK(registry_->CancelAllocation(session, cancel));
  registry_->CloseSession(session);
  EXPECT_EQ(registry_->Stats().quarantined_sessions(), 0u);
  EXPECT_EQ(pool_->Usage().used_bytes, 0u);
}

TEST_F(RegistryQuarantineTest, RegistryDestroyedWithAHoldFreesIt) {
  SleepingChild producer;  // Outlives the registry.
  const std::uint64_t session = OpenSession();
  registry_->SetPeerProcess(session, producer.Pidfd());
  ASSERT_OK(Allocate(session, 1 << 20));
  registry_->CloseSession(session);
  EXPECT_GT(pool_->Usage().used_bytes, 0u);
  io_thread_.reset();
  registry_.reset();
  EXPECT_EQ(pool_->Usage().used_bytes, 0u);
}

}  // namespace
}  // namespace hurray::daemon
