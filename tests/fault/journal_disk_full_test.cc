// The journal's disk full: hurrayd (as root) with its state_directory on a 64 KiB tmpfs
// mounted in a private mount namespace that a holder process keeps alive, so that the
// daemon, killed and restarted (nsenter), finds the same journal. Publishing until the
// journal cannot grow must end in a refusal naming the journal and ENOSPC, with the refused
// allocation still pending and every tensor published before still served byte for byte;
// once the tmpfs is made larger, the same allocation publishes, and after a kill -9 and a
// restart every acknowledged tensor is served again.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "integration_test.h"
#include "private_mount_namespace.h"
#include "test_tensors.h"
#include "testing/host_facilities.h"
#include "testing/status_matchers.h"

namespace hurray::fault {
namespace {

using namespace std::chrono_literals;
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
    ASSERT_OK_AND_ASSIGN(namespace_,
                         PrivateMountNamespace::Start(kHoldNamespace, {state_directory_}));
    wrapper_ = directory_->path() + "/hurrayd-in-namespace";
    ASSERT_OK(namespace_->WriteWrapper(wrapper_, HURRAYD_PATH));
    IntegrationTest::SetUp();
  }

  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = IntegrationTest::daemon_options();
    options.binary = wrapper_;
    options.state_directory = state_directory_;
    return options;
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
  std::optional<PrivateMountNamespace> namespace_;
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
  ASSERT_OK(namespace_->Run({"/bin/mount", "-o", "remount,size=4m", state_directory_}));
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
