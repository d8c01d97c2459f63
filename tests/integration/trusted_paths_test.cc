// The real hurrayd (run as root, as in CI) and hurrayctl trust only paths their user owns:
//   - a state or socket directory that another user (nobody) owns is refused at start,
//     and a link planted in it is never followed;
//   - a link planted in the daemon's own state directory, where the fast path's record
//     goes, is refused, never followed;
//   - a journal naming files outside the pool's /dev/shm prefix (an own state directory
//     with a planted journal) leaves them untouched, at start and with --discard-state;
//   - hurrayctl, as another uid with no HURRAY_SOCKET, XDG_RUNTIME_DIR or system socket,
//     refuses a /tmp/hurray-$UID that someone else owns, and connects to nothing there.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "hurray/ipc/unique_fd.h"
#include "journal/tensor_journal.h"
#include "testing/child_process.h"
#include "testing/daemon_expectations.h"
#include "testing/daemon_process.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray::integration {
namespace {

using namespace std::chrono_literals;
using ::hurray::testing::ChildProcess;
using ::hurray::testing::DaemonProcess;
using ::hurray::testing::TempDir;

constexpr uid_t kOtherUser = 65534;   // nobody: who made the directories first.
constexpr uid_t kClientUser = 61005;  // The client whose /tmp/hurray-$UID is squatted.

std::string Contents(const std::string& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

class TrustedPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give directories to another user";
    ASSERT_OK_AND_ASSIGN(TempDir temp, TempDir::Create("hurray-trusted-paths"));
    temp_.emplace(std::move(temp));
    victim_ = temp_->Path("victim");
    std::ofstream(victim_) << "keep me";
  }

  [[nodiscard]] DaemonProcess::Options Options(const std::string& directory,
                                               const std::string& state_directory) const {
    return {.binary = HURRAYD_PATH,
            .name = "hurray-trusted",
            .directory = directory,
            .state_directory = state_directory};
  }

  // Starts hurrayd; the error (with the end of its log) when it does not serve.
  Result<std::unique_ptr<DaemonProcess>> Start(const std::string& directory,
                                               const std::string& state_directory) {
    return DaemonProcess::Start(Options(directory, state_directory));
  }

  std::optional<TempDir> temp_;
  std::string victim_;  // A root-owned file that nothing may change.
};

TEST_F(TrustedPathsTest, RefusesAStateDirectoryOfAnotherUserAndFollowsNoLinkInIt) {
  const std::string state = temp_->Path("state");
  ASSERT_EQ(::mkdir(state.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(victim_.c_str(), (state + "/fast_path_directory.new").c_str()), 0);
  ASSERT_EQ(::lchown(state.c_str(), kOtherUser, kOtherUser), 0);
  auto started = Start(temp_->Path("daemon"), state);
  ASSERT_FALSE(started) << "hurrayd served from a state directory that uid 65534 owns";
  EXPECT_NE(started.error().message().find("state directory " + state +
                                           " is owned by uid 65534 with mode 0755"),
            std::string::npos)
      << started.error().message();
  EXPECT_EQ(Contents(victim_), "keep me");
  EXPECT_FALSE(std::filesystem::exists(state + "/lock"));
}

TEST_F(TrustedPathsTest, RefusesALinkPlantedWhereTheFastPathRecordGoes) {
  const std::string state = temp_->Path("state");
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(victim_.c_str(), (state + "/fast_path_directory.new").c_str()), 0);
  auto started = Start(temp_->Path("daemon"), state);
  ASSERT_FALSE(started) << "hurrayd started past a planted link";
  EXPECT_NE(started.error().message().find(state + "/fast_path_directory.new is a symbolic link"),
            std::string::npos)
      << started.error().message();
  EXPECT_EQ(Contents(victim_), "keep me");
}

TEST_F(TrustedPathsTest, RefusesASocketDirectoryOfAnotherUser) {
  const std::string sockets = temp_->Path("sockets");
  ASSERT_EQ(::mkdir(sockets.c_str(), 0755), 0);
  ASSERT_EQ(::chown(sockets.c_str(), kOtherUser, kOtherUser), 0);
  auto started = Start(sockets, temp_->Path("state"));
  ASSERT_FALSE(started) << "hurrayd served from a socket directory that uid 65534 owns";
  EXPECT_NE(started.error().message().find("socket directory " + sockets +
                                           " is owned by uid 65534 with mode 0755"),
            std::string::npos)
      << started.error().message();
  EXPECT_FALSE(std::filesystem::exists(sockets + "/d.sock"));
}

TEST_F(TrustedPathsTest, AJournalNamingOtherFilesLeavesThemUntouched) {
  const std::string state = temp_->Path("state");
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  // A file of root in /dev/shm that is not this daemon's (another prefix), and one outside.
  const std::string shm_file = "/dev/shm/hurray-not-ours-" + std::to_string(::getpid()) + "-00ff";
  std::ofstream(shm_file) << "keep me";
  {
    ASSERT_OK_AND_ASSIGN(
        auto journal,
        daemon::TensorJournal::Create({.path = state + "/journal"},
                                      {{"cpu",
                                        {{.path = victim_, .size = 4096},
                                         {.path = shm_file, .size = 4096},
                                         {.path = "/dev/shm/../../" + victim_, .size = 4096}}}},
                                      {}));
  }
  const std::string directory = temp_->Path("daemon");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> daemon, Start(directory, state));
    EXPECT_NE(daemon->Log().find("is not a segment file of this daemon"), std::string::npos)
        << daemon->Log();
    ::hurray::testing::ExpectStopsCleanly(*daemon);
  }
  EXPECT_EQ(Contents(victim_), "keep me");
  EXPECT_EQ(Contents(shm_file), "keep me");

  // --discard-state on the same planted journal (written again: the daemon replaced it).
  {
    ASSERT_OK_AND_ASSIGN(
        auto journal,
        daemon::TensorJournal::Create(
            {.path = state + "/journal"},
            {{"cpu", {{.path = victim_, .size = 4096}, {.path = shm_file, .size = 4096}}}}, {}));
  }
  const std::string log = temp_->Path("discard.log");
  ASSERT_OK_AND_ASSIGN(ChildProcess discard,
                       ChildProcess::Start({HURRAYD_PATH, "--config", directory + "/hurrayd.toml",
                                            "--socket", directory + "/d.sock", "--discard-state"},
                                           {.stdout_path = log, .stderr_path = log}));
  const std::optional<int> status = discard.Wait(120s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << Contents(log);
  EXPECT_NE(Contents(log).find("and the 0 segments it kept"), std::string::npos) << Contents(log);
  EXPECT_EQ(Contents(victim_), "keep me");
  EXPECT_EQ(Contents(shm_file), "keep me");
  std::filesystem::remove(shm_file);
}

// hurrayctl run as kClientUser with only PATH in its environment; its exit status and its
// stderr and stdout.
struct CtlOutcome {
  int status = -1;
  std::string output;
};

CtlOutcome RunCtlAs(uid_t uid, const std::vector<std::string>& arguments) {
  std::vector<std::string> args = {HURRAYCTL_PATH};
  args.insert(args.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::string path = "PATH=/usr/bin:/bin";
  std::array<char*, 2> environment = {path.data(), nullptr};
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {  // Only async-signal-safe calls until exec: the parent has threads.
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(126);
    ::execve(argv[0], argv.data(), environment.data());
    ::_exit(127);
  }
  ::close(out[1]);
  CtlOutcome outcome;
  char buffer[4096];
  for (ssize_t got; (got = ::read(out[0], buffer, sizeof buffer)) > 0;) {
    outcome.output.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(out[0]);
  ::waitpid(pid, &outcome.status, 0);
  return outcome;
}

TEST_F(TrustedPathsTest, ClientRefusesAFallbackSocketDirectoryOfAnotherUser) {
  if (std::filesystem::exists("/run/hurray/hurrayd.sock")) {
    GTEST_SKIP() << "a system hurrayd's socket exists: the client would not fall back";
  }
  const std::string fallback = "/tmp/hurray-" + std::to_string(kClientUser);
  std::filesystem::remove_all(fallback);
  ASSERT_EQ(::mkdir(fallback.c_str(), 0755), 0);
  // A fake daemon's listeners, as the squatter would bind them.
  std::vector<UniqueFd> listeners;
  for (const std::string name : {"hurrayd.sock", "hurrayd.sock.session"}) {
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::string socket_path = fallback;
    socket_path.append("/").append(name);
    socket_path.copy(address.sun_path, sizeof(address.sun_path) - 1);
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)),
              0);
    ASSERT_EQ(::chmod(socket_path.c_str(), 0666), 0);
    ASSERT_EQ(::listen(listener.get(), 8), 0);
    listeners.push_back(std::move(listener));
  }
  ASSERT_EQ(::chown(fallback.c_str(), kOtherUser, kOtherUser), 0);

  const CtlOutcome outcome = RunCtlAs(kClientUser, {"stats"});
  std::filesystem::remove_all(fallback);
  ASSERT_TRUE(WIFEXITED(outcome.status)) << outcome.output;
  EXPECT_NE(WEXITSTATUS(outcome.status), 0) << outcome.output;
  EXPECT_NE(WEXITSTATUS(outcome.status), 126) << "setuid failed";
  EXPECT_NE(
      outcome.output.find("socket directory " + fallback + " is owned by uid 65534 with mode 0755"),
      std::string::npos)
      << outcome.output;
  for (const UniqueFd& listener : listeners) {
    const UniqueFd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_FALSE(accepted.valid()) << "hurrayctl connected to the squatter's socket";
  }
}

}  // namespace
}  // namespace hurray::integration
