// The journal's disk full: hurrayd (as root) with its state_directory on a 64 KiB tmpfs
// mounted in a private mount namespace that a holder process keeps alive, so that the
// daemon, killed and restarted (nsenter), finds the same journal. Publishing until the
// journal cannot grow must end in a refusal naming the journal and ENOSPC, with the refused
// allocation still pending and every tensor published before still served byte for byte;
// once the tmpfs is made larger, the same allocation publishes, and after a kill -9 and a
// restart every acknowledged tensor is served again.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/host_facilities.h"
#include "testing/status_matchers.h"

namespace hurray::fault {
namespace {

using namespace std::chrono_literals;
using ::hurray::testing::ChildProcess;
using ::hurray::testing::DaemonProcess;
using ::hurray::testing::TempDir;
using integration::IntegrationTest;

constexpr std::uint64_t kTensorBytes = 4096;
// Far more publishes than 64 KiB of journal records hold: reaching it means the disk never
// filled.
constexpr int kMaxPublishes = 5000;

// Mounts the small tmpfs on "$1" and waits, holding the mount namespace, until killed.
constexpr char kHoldNamespace[] =
    "mount -t tmpfs -o size=64k,mode=0700 hurray-journal-full \"$1\" || exit 90\n"
    "echo mounted\n"
    "exec sleep 100000\n";

class JournalDiskFullTest : public IntegrationTest {
 protected:
  void SetUp() override {
    if (auto why = testing::WhyNoPrivateMountNamespace()) GTEST_SKIP() << *why;
    ASSERT_OK_AND_ASSIGN(directory_, TempDir::Create("hurray-fault-journal"));
    state_directory_ = directory_->path() + "/state";
    std::filesystem::create_directory(state_directory_);
    ASSERT_OK_AND_ASSIGN(
        holder_, ChildProcess::Start({"/usr/bin/unshare", "--mount", "--propagation", "private",
                                      "/bin/sh", "-c", kHoldNamespace, "sh", state_directory_}));
    const std::optional<std::string> mounted = holder_->ReadLine(60s);
    ASSERT_EQ(mounted, "mounted") << "could not mount the tmpfs";
    // hurrayd itself, in the holder's mount namespace (nsenter execs it: its pid is the
    // daemon's).
    wrapper_ = directory_->path() + "/hurrayd-in-namespace";
    std::ofstream(wrapper_) << "#!/bin/sh\nexec /usr/bin/nsenter --mount=/proc/" << holder_->pid()
                            << "/ns/mnt " << HURRAYD_PATH << " \"$@\"\n";
    std::filesystem::permissions(wrapper_, std::filesystem::perms::owner_all);
    IntegrationTest::SetUp();
  }

  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = IntegrationTest::daemon_options();
    options.binary = wrapper_;
    options.state_directory = state_directory_;
    return options;
  }

  // Runs `command...` in the holder's mount namespace; expects it to exit 0.
  void RunInNamespace(const std::vector<std::string>& command) {
    std::vector<std::string> argv{"/usr/bin/nsenter",
                                  "--mount=/proc/" + std::to_string(holder_->pid()) + "/ns/mnt"};
    argv.insert(argv.end(), command.begin(), command.end());
    ASSERT_OK_AND_ASSIGN(ChildProcess process, ChildProcess::Start(argv));
    const std::optional<int> status = process.Wait(60s);
    ASSERT_TRUE(status.has_value()) << process.command_line() << " did not end";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << process.command_line() << ": " << testing::DescribeWaitStatus(*status);
  }

  // Every name of `published` (name i filled from seed i) is served, byte for byte.
  void ExpectAllServed(const std::vector<std::string>& published) {
    for (std::size_t i = 0; i < published.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(TensorView view, client().Acquire(published[i]));
      EXPECT_EQ(view.version(), 1u) << published[i];
      EXPECT_EQ(integration::CheckBuffer(view.buffer(0), i, 0), "") << published[i];
    }
  }

  std::optional<TempDir> directory_;
  std::string state_directory_;
  std::string wrapper_;
  std::optional<ChildProcess> holder_;
};

TEST_F(JournalDiskFullTest, PublishRefusedWhenTheJournalIsFullKeepsTheAllocationAndLosesNothing) {
  std::vector<std::string> published;
  std::optional<WritableTensor> refused;
  std::optional<Error> error;
  while (!refused && published.size() < kMaxPublishes) {
    const std::string name = "full/t" + std::to_string(published.size());
    ASSERT_OK_AND_ASSIGN(WritableTensor tensor,
                         client().Allocate(integration::MakeByteTensor(kTensorBytes)));
    integration::FillBuffer(tensor.buffer(0), published.size(), 0);
    Result<PublishedTensor> result = tensor.Publish(name);
    if (result) {
      published.push_back(name);
      continue;
    }
    error = result.error();
    refused.emplace(std::move(tensor));
  }
  ASSERT_TRUE(refused.has_value()) << published.size() << " publishes and the journal never filled";
  RecordProperty("publishes_before_full", static_cast<int>(published.size()));
  RecordProperty("refusal", error->ToString());
  EXPECT_EQ(error->code(), StatusCode::kResourceExhausted) << error->ToString();
  EXPECT_NE(error->message().find("journal " + state_directory_ + "/journal"), std::string::npos)
      << error->ToString();
  EXPECT_NE(error->message().find("No space left on device"), std::string::npos)
      << error->ToString();

  // The refused allocation is still pending; everything published before is served.
  EXPECT_EQ(Stats().pending_allocation_count, 1u);
  ASSERT_NO_FATAL_FAILURE(ExpectAllServed(published));

  // Room made: the same allocation publishes.
  ASSERT_NO_FATAL_FAILURE(
      RunInNamespace({"/bin/mount", "-o", "remount,size=4m", state_directory_}));
  const std::string last = "full/t" + std::to_string(published.size());
  ASSERT_OK_AND_ASSIGN(const PublishedTensor after_room, refused->Publish(last));
  EXPECT_EQ(after_room.version, 1u);
  published.push_back(last);
  EXPECT_EQ(Stats().pending_allocation_count, 0u);

  // kill -9 and a restart on the same journal: every acknowledged tensor is served again.
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  EXPECT_EQ(Stats().tensor_count, published.size());
  ASSERT_NO_FATAL_FAILURE(ExpectAllServed(published));
  for (const std::string& name : published) ASSERT_OK(client().Delete(name));
  ExpectEverythingReturned();
}

}  // namespace
}  // namespace hurray::fault
