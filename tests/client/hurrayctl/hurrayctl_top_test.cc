// `hurrayctl top` on a real terminal: tmux (a private server on a socket in the test's
// directory) runs the real hurrayctl against the real hurrayd; the test reads the screen with
// capture-pane and types with send-keys, as an operator would. HURRAYD_PATH and
// HURRAYCTL_PATH come from the build.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "hurray/client.h"
#include "testing/daemon_expectations.h"
#include "testing/daemon_process.h"
#include "testing/host_facilities.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray {
namespace {

using ::hurray::testing::DaemonProcess;
using ::hurray::testing::TempDir;
using std::chrono::steady_clock;

constexpr auto kScreenTimeout = std::chrono::seconds(15);

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

bool Contains(std::string_view text, std::string_view fragment) {
  return text.find(fragment) != std::string_view::npos;
}

// Runs `command` under /bin/sh and returns its stdout; nullopt when it fails.
std::optional<std::string> Shell(const std::string& command) {
  std::unique_ptr<FILE, decltype(&::pclose)> pipe(::popen(command.c_str(), "r"), &::pclose);
  if (!pipe) return std::nullopt;
  std::string out;
  char buffer[4096];
  while (std::size_t count = std::fread(buffer, 1, sizeof(buffer), pipe.get())) {
    out.append(buffer, count);
  }
  if (::pclose(pipe.release()) != 0) return std::nullopt;
  return out;
}

// Single-quotes `text` for /bin/sh.
std::string Quote(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

class HurrayctlTopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Shell("command -v tmux >/dev/null")) GTEST_SKIP() << "tmux is not installed";
    if (auto why = testing::WhyNoPseudoTerminal()) GTEST_SKIP() << *why;
    ASSERT_OK_AND_ASSIGN(dir_, TempDir::Create("hurrayctl_top_test"));
    ASSERT_OK_AND_ASSIGN(daemon_,
                         DaemonProcess::Start({.binary = HURRAYD_PATH, .name = "top-test"}));
    ASSERT_OK_AND_ASSIGN(client_,
                         Client::Connect(Client::Options{.socket_path = daemon_->socket_path()}));
  }

  void TearDown() override {
    if (dir_) (void)Shell(Tmux("kill-server") + " 2>/dev/null");
    client_.reset();
    if (daemon_) ::hurray::testing::ExpectStopsCleanly(*daemon_);
  }

  // A tmux command line for the test's own server.
  [[nodiscard]] std::string Tmux(const std::string& arguments) const {
    return "env -u TMUX tmux -S " + Quote(dir_->Path("tmux.sock")) + " " + arguments;
  }

  // Starts top in a 120x40 tmux pane: the shell records the terminal's settings before and
  // after it (stty -g), its pid (the inner shell execs hurrayctl) and its exit status.
  void StartTop() {
    const std::string top = "echo $$ > " + Quote(Path("pid")) + "; exec " + Quote(HURRAYCTL_PATH) +
                            " --socket " + Quote(daemon_->socket_path()) + " top --interval 0.2";
    const std::string script = "stty -g > " + Quote(Path("before")) + "; sh -c " + Quote(top) +
                               "; echo $? > " + Quote(Path("rc.tmp")) + "; stty -g > " +
                               Quote(Path("after")) + "; mv " + Quote(Path("rc.tmp")) + " " +
                               Quote(Path("rc")) + "; exec sleep 60";
    ASSERT_TRUE(Shell(Tmux("new-session -d -x 120 -y 40 " + Quote("sh -c " + Quote(script)))));
  }

  [[nodiscard]] std::string Screen() const { return Shell(Tmux("capture-pane -p")).value_or(""); }

  // Waits until the pane shows `fragment`.
  bool WaitForScreen(std::string_view fragment) {
    const auto deadline = steady_clock::now() + kScreenTimeout;
    while (steady_clock::now() < deadline) {
      if (Contains(Screen(), fragment)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits for top to end and returns its exit status as the shell wrote it ("0\n").
  std::string WaitForExit() {
    const auto deadline = steady_clock::now() + kScreenTimeout;
    while (steady_clock::now() < deadline) {
      if (std::string rc = ReadFile(Path("rc")); !rc.empty()) return rc;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "(still running)";
  }

  void Publish(const std::string& name) {
    ASSERT_OK_AND_ASSIGN(auto descriptor, TensorDescriptor::Dense(ElementType::kFloat32, {256}));
    ASSERT_OK_AND_ASSIGN(auto tensor, client_->Allocate(descriptor));
    ASSERT_OK(tensor.Publish(name));
  }

  [[nodiscard]] std::string Path(std::string_view name) const { return dir_->Path(name); }

  std::optional<TempDir> dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(HurrayctlTopTest, ShowsPublishedTensorsUpdatesAndQuitsOnQ) {
  Publish("top/first");
  StartTop();
  ASSERT_TRUE(WaitForScreen("top/first")) << Screen();
  const std::string screen = Screen();
  EXPECT_TRUE(Contains(screen, "pools:")) << screen;
  EXPECT_TRUE(Contains(screen, "cpu")) << screen;
  EXPECT_TRUE(Contains(screen, "1.0 KiB")) << screen;
  EXPECT_TRUE(Contains(screen, "sessions")) << screen;

  Publish("top/second");
  ASSERT_TRUE(WaitForScreen("top/second")) << Screen();
  EXPECT_TRUE(Contains(Screen(), "top/first")) << Screen();

  ASSERT_TRUE(Shell(Tmux("send-keys q")));
  EXPECT_EQ(WaitForExit(), "0\n");
  EXPECT_EQ(ReadFile(Path("after")), ReadFile(Path("before"))) << "terminal settings restored";
  EXPECT_FALSE(Contains(Screen(), "top/second")) << "alternate screen left: " << Screen();
}

TEST_F(HurrayctlTopTest, SigtermEndsItWithTheTerminalRestored) {
  StartTop();
  ASSERT_TRUE(WaitForScreen("pools:")) << Screen();
  const int pid = std::atoi(ReadFile(Path("pid")).c_str());
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitForExit(), "0\n");
  EXPECT_EQ(ReadFile(Path("after")), ReadFile(Path("before"))) << "terminal settings restored";
  EXPECT_FALSE(Contains(Screen(), "pools:")) << "alternate screen left: " << Screen();
}

}  // namespace
}  // namespace hurray
