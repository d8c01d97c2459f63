// /dev/shm full at segment creation: hurrayd started (as root) in a private mount namespace
// whose /dev/shm is a 4 MiB tmpfs, asked for a 64 MiB pool. It must refuse to start with an
// error naming /dev/shm and the sizes, and leave nothing behind: no segment in that
// /dev/shm, no socket file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/child_process.h"
#include "testing/host_facilities.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray::fault {
namespace {

using namespace std::chrono_literals;
using ::hurray::testing::ChildProcess;
using ::hurray::testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Mounts the small tmpfs, runs the daemon ("$@", its output all to stderr), then counts
// what it left in /dev/shm.
constexpr char kInNamespace[] =
    "mount -t tmpfs -o size=4m,mode=1777 hurray-fault /dev/shm || exit 90\n"
    "\"$@\" >&2\n"
    "status=$?\n"
    "echo \"left in /dev/shm: $(ls -A /dev/shm | wc -l)\"\n"
    "exit $status\n";

TEST(ShmFullTest, DaemonWhosePoolDoesNotFitInDevShmRefusesToStartAndLeavesNothing) {
  if (auto why = testing::WhyNoPrivateMountNamespace()) GTEST_SKIP() << *why;
  ASSERT_OK_AND_ASSIGN(TempDir directory, TempDir::Create("hurray-fault-shm"));
  const std::string socket = directory.path() + "/d.sock";
  const std::string config = directory.path() + "/hurrayd.toml";
  const std::string log = directory.path() + "/hurrayd.log";
  std::ofstream(config) << "state_directory = \"" << directory.path() << "/state\"\n"
                        << "[cpu_pool]\nshm_prefix = \"hurray-fault-shm\"\n";
  ASSERT_OK_AND_ASSIGN(
      ChildProcess daemon,
      ChildProcess::Start({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh",
                           "-c", kInNamespace, "sh", HURRAYD_PATH, "--socket", socket,
                           "--cpu-pool-capacity", "67108864", "--config", config},
                          {.stderr_path = log}));
  const auto output = daemon.ReadToEnd(120s);
  const auto status = daemon.Wait(10s);
  ASSERT_TRUE(output.has_value() && status.has_value()) << "hurrayd did not end: " << ReadFile(log);
  ASSERT_TRUE(WIFEXITED(*status)) << testing::DescribeWaitStatus(*status);
  ASSERT_NE(WEXITSTATUS(*status), 90) << "could not mount the tmpfs: " << ReadFile(log);
  EXPECT_NE(WEXITSTATUS(*status), 0) << ReadFile(log);
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("cannot reserve 67108864 bytes of shared memory: /dev/shm has"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("No space left on device"), std::string::npos) << text;
  EXPECT_EQ(*output, "left in /dev/shm: 0\n");
  EXPECT_FALSE(std::filesystem::exists(socket));
  EXPECT_FALSE(std::filesystem::exists(socket + ".session"));
}

}  // namespace
}  // namespace hurray::fault
