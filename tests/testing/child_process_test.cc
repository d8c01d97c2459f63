// ChildProcess with real programs (/bin/sh): output, input, environment, exit statuses,
// kill -9, and the failure to start a missing program.
#include "testing/child_process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdlib>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray::testing {
namespace {

using namespace std::chrono_literals;

TEST(ChildProcessTest, CapturesStdoutLineByLineAndReportsTheExitStatus) {
  ASSERT_OK_AND_ASSIGN(ChildProcess child,
                       ChildProcess::Start({"/bin/sh", "-c", "echo one; echo two; exit 3"}));
  EXPECT_EQ(child.command_line(), "/bin/sh -c echo one; echo two; exit 3");
  EXPECT_EQ(child.ReadLine(30s), "one");
  EXPECT_EQ(child.ReadToEnd(30s), "two\n");
  const auto status = child.Wait(30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << DescribeWaitStatus(*status);
  EXPECT_EQ(DescribeWaitStatus(*status), "exited 3");
  EXPECT_FALSE(child.Running());
}

TEST(ChildProcessTest, WritesLinesToStdinAndAppendsOutputToFiles) {
  ASSERT_OK_AND_ASSIGN(TempDir directory, TempDir::Create("child-process-test"));
  const std::string out = directory.Path("out");
  ASSERT_OK_AND_ASSIGN(
      ChildProcess child,
      ChildProcess::Start({"/bin/sh", "-c", "read line; echo \"got $line\"; echo oops >&2"},
                          {.stdout_path = out, .stderr_path = out, .stdin_pipe = true}));
  ASSERT_OK(child.WriteLine("hello"));
  const auto status = child.Wait(30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*status), "exited 0");
  ASSERT_OK_AND_ASSIGN(ChildProcess cat, ChildProcess::Start({"/bin/cat", out}));
  EXPECT_EQ(cat.ReadToEnd(30s), "got hello\noops\n");
}

TEST(ChildProcessTest, AddsReplacesAndRemovesEnvironmentEntries) {
  ::setenv("HURRAY_CHILD_TEST_KEPT", "kept", 1);
  ::setenv("HURRAY_CHILD_TEST_REPLACED", "old", 1);
  ::setenv("HURRAY_CHILD_TEST_REMOVED", "removed", 1);
  ASSERT_OK_AND_ASSIGN(
      ChildProcess child,
      ChildProcess::Start(
          {"/bin/sh", "-c",
           "echo \"$HURRAY_CHILD_TEST_KEPT $HURRAY_CHILD_TEST_REPLACED "
           "${HURRAY_CHILD_TEST_REMOVED-unset} $HURRAY_CHILD_TEST_ADDED\""},
          {.environment = {"HURRAY_CHILD_TEST_REPLACED=new", "HURRAY_CHILD_TEST_ADDED=added"},
           .unset_environment = {"HURRAY_CHILD_TEST_REMOVED"}}));
  EXPECT_EQ(child.ReadToEnd(30s), "kept new unset added\n");
}

TEST(ChildProcessTest, KillEndsARunningChildWithSigkill) {
  ASSERT_OK_AND_ASSIGN(ChildProcess child, ChildProcess::Start({"/bin/sleep", "600"}));
  EXPECT_TRUE(child.Running());
  EXPECT_EQ(child.Wait(10ms), std::nullopt);
  child.Kill();
  const auto status = child.Wait(0ms);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << DescribeWaitStatus(*status);
  EXPECT_EQ(DescribeWaitStatus(*status), "killed by signal 9 (Killed)");
}

TEST(ChildProcessTest, AProgramThatCannotBeExecutedExits127) {
  ASSERT_OK_AND_ASSIGN(ChildProcess child, ChildProcess::Start({"/nonexistent/program"}));
  const auto status = child.Wait(30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*status), "exited 127");
  EXPECT_ERROR(child.WriteLine("x"), StatusCode::kUnavailable, {"no stdin pipe"});
}

TEST(ChildProcessTest, EmptyArgvIsInvalid) {
  EXPECT_ERROR(ChildProcess::Start({}), StatusCode::kInvalidArgument, {"empty argv"});
}

}  // namespace
}  // namespace hurray::testing
