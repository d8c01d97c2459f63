// A restart under the embedded default configuration on a nearly full /dev/shm: hurrayd
// (as root) in a private mount namespace whose /dev/shm is a 512 MiB tmpfs that another
// program's 256 MiB file already takes, with no cpu_pool capacity configured, so the pool
// follows the free space. After a kill -9 the old segments take that space themselves: the
// restarted daemon computes a smaller pool, yet must adopt the old segments at the sizes
// the journal recorded and serve every tensor byte for byte. A clean stop then keeps only
// the pages of the live tensors in /dev/shm (the free ranges punched out), and the daemon
// after it adopts them again.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "integration_test.h"
#include "private_mount_namespace.h"
#include "test_tensors.h"
#include "testing/host_facilities.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray::fault {
namespace {

using ::hurray::testing::DaemonProcess;
using ::hurray::testing::TempDir;
using integration::IntegrationTest;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kOtherProgramBytes = 256 * kMiB;
constexpr std::uint64_t kTensorBytes = kMiB;
constexpr int kTensors = 4;

// A 512 MiB /dev/shm, half of it taken by another program's file; holds the namespace.
constexpr char kNearlyFullShm[] =
    "mount -t tmpfs -o size=512m,mode=1777 hurray-nearly-full /dev/shm || exit 90\n"
    "fallocate -l 268435456 /dev/shm/another-program || exit 91\n"
    "echo mounted\n"
    "exec sleep 100000\n";

class ShmNearlyFullRestartTest : public IntegrationTest {
 protected:
  void SetUp() override {
    if (auto why = testing::WhyNoPrivateMountNamespace()) GTEST_SKIP() << *why;
    ASSERT_OK_AND_ASSIGN(directory_, TempDir::Create("hurray-fault-nearly-full"));
    ASSERT_OK_AND_ASSIGN(namespace_, PrivateMountNamespace::Start(kNearlyFullShm, {}));
    wrapper_ = directory_->path() + "/hurrayd-in-namespace";
    ASSERT_OK(namespace_->WriteWrapper(wrapper_, HURRAYD_PATH));
    IntegrationTest::SetUp();
  }

  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = IntegrationTest::daemon_options();
    options.binary = wrapper_;
    options.pool_capacity_bytes = 0;  // The embedded default.
    options.log_level = "info";
    options.shm_directory = namespace_->Root() + "/dev/shm";
    return options;
  }

  // Bytes the namespace's /dev/shm holds (df: its tmpfs's used blocks).
  std::uint64_t ShmUsedBytes() {
    Result<std::string> output =
        namespace_->Run({"/usr/bin/df", "-B1", "--output=used", "/dev/shm"});
    EXPECT_OK(output);
    if (!output) return 0;
    const std::size_t digits = output->find_first_of("0123456789");
    return digits == std::string::npos ? 0 : std::stoull(output->substr(digits));
  }

  void ExpectAllServed() {
    for (int i = 0; i < kTensors; ++i) {
      ASSERT_OK_AND_ASSIGN(TensorView view, client().Acquire("shm/t" + std::to_string(i)));
      EXPECT_EQ(integration::CheckBuffer(view.buffer(0), i, 0), "") << "shm/t" << i;
    }
  }

  std::optional<TempDir> directory_;
  std::string wrapper_;
  std::optional<PrivateMountNamespace> namespace_;
};

TEST_F(ShmNearlyFullRestartTest,
       KilledDaemonsSegmentsAreAdoptedAtTheirSizeAndAStopKeepsOnlyLivePages) {
  // The embedded default followed the free space: at most half of the 256 MiB left.
  const std::uint64_t capacity = CpuPool().capacity_bytes;
  ASSERT_GT(capacity, 0u);
  EXPECT_LE(capacity, (512 * kMiB - kOtherProgramBytes) / 2);
  RecordProperty("default_capacity", std::to_string(capacity));
  for (int i = 0; i < kTensors; ++i) {
    ASSERT_OK_AND_ASSIGN(WritableTensor tensor,
                         client().Allocate(integration::MakeByteTensor(kTensorBytes)));
    integration::FillBuffer(tensor.buffer(0), i, 0);
    ASSERT_OK(tensor.Publish("shm/t" + std::to_string(i)));
  }
  // The whole pool is reserved in /dev/shm while the daemon runs.
  EXPECT_GE(ShmUsedBytes(), kOtherProgramBytes + capacity);

  // kill -9: the old segments now take the space the default would follow, so today's
  // default is smaller; the restarted daemon adopts them at their recorded size.
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  EXPECT_EQ(CpuPool().capacity_bytes, capacity);
  EXPECT_NE(daemon().Log().find("adopting the " + std::to_string(capacity) +
                                " bytes of segments the daemon before left"),
            std::string::npos)
      << daemon().Log();
  EXPECT_EQ(Stats().tensor_count, static_cast<std::uint64_t>(kTensors));
  ASSERT_NO_FATAL_FAILURE(ExpectAllServed());

  // A clean stop keeps only the live tensors' pages in /dev/shm, not the whole pool; the
  // next daemon adopts them again.
  ASSERT_NO_FATAL_FAILURE(StopDaemon());
  const std::uint64_t kept = ShmUsedBytes() - kOtherProgramBytes;
  RecordProperty("kept_after_stop", std::to_string(kept));
  EXPECT_GE(kept, kTensors * kTensorBytes);
  EXPECT_LT(kept, kTensors * kTensorBytes + 4 * kMiB) << "of a " << capacity << "-byte pool";
  ASSERT_NO_FATAL_FAILURE(RestartDaemon());
  EXPECT_EQ(CpuPool().capacity_bytes, capacity);
  ASSERT_NO_FATAL_FAILURE(ExpectAllServed());
  for (int i = 0; i < kTensors; ++i) ASSERT_OK(client().Delete("shm/t" + std::to_string(i)));
  ExpectEverythingReturned();
}

}  // namespace
}  // namespace hurray::fault
