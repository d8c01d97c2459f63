// The sd_notify protocol of the real hurrayd, against a NOTIFY_SOCKET the test binds (an
// AF_UNIX datagram socket, as systemd's), with WATCHDOG_USEC and WATCHDOG_PID set as systemd
// sets them for WatchdogSec=. No systemd runs.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "hurray/ipc/unique_fd.h"
#include "hurray/ipc/unix_socket.h"
#include "testing/child_process.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// systemd's WatchdogSec as WATCHDOG_USEC gives it: 400 ms, so a ping every 200 ms.
constexpr char kWatchdogUsec[] = "400000";
constexpr milliseconds kTimeout{30'000};

struct Notification {
  std::string text;  // "READY=1\nSTATUS=...".
  pid_t sender = 0;  // From the kernel's SCM_CREDENTIALS.
};

// The datagram socket systemd would listen on, with sender credentials (SO_PASSCRED).
class NotifySocket {
 public:
  static Result<NotifySocket> Bind(const std::string& path) {
    HURRAY_ASSIGN_OR_RETURN(const sockaddr_un address, UnixSocketAddress(path));
    UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd) return InternalError("socket(AF_UNIX, SOCK_DGRAM) failed");
    const int on = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0 ||
        ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      return InternalError("setsockopt SO_PASSCRED or bind of the notify socket failed");
    }
    return NotifySocket(std::move(fd));
  }

  // The next datagram, waiting until `deadline`; nullopt when none came.
  [[nodiscard]] std::optional<Notification> Receive(steady_clock::time_point deadline) const {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    pollfd ready{.fd = fd_.get(), .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, static_cast<int>(std::max(left.count(), std::int64_t{0}))) <= 0) {
      return std::nullopt;
    }
    std::string text(4096, '\0');
    iovec data{.iov_base = text.data(), .iov_len = text.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))] = {};
    msghdr message{};
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    const ssize_t got = ::recvmsg(fd_.get(), &message, 0);
    if (got < 0) return std::nullopt;
    text.resize(static_cast<std::size_t>(got));
    Notification notification{.text = std::move(text)};
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
         header = CMSG_NXTHDR(&message, header)) {
      if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_CREDENTIALS) {
        ucred credentials{};
        std::memcpy(&credentials, CMSG_DATA(header), sizeof(credentials));
        notification.sender = credentials.pid;
      }
    }
    return notification;
  }

 private:
  explicit NotifySocket(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

bool HasLine(const std::string& text, std::string_view line) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    if (std::string_view(text).substr(start, end - start) == line) return true;
    start = end + 1;
  }
  return false;
}

bool StartsLine(const std::string& text, std::string_view prefix) {
  return text.starts_with(prefix) || text.find(fmt::format("\n{}", prefix)) != std::string::npos;
}

class SystemdNotifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(directory_, testing::TempDir::Create("hurray-notify"));
    ASSERT_OK_AND_ASSIGN(notify_, NotifySocket::Bind(directory_->Path("notify")));
    // A state directory of its own: one daemon holds a state directory at a time.
    std::ofstream(directory_->Path("hurrayd.toml"))
        << "state_directory = \"" << directory_->Path("state") << "\"\n"
        << "[cpu_pool]\nshm_prefix = \"hurray-notify-" << ::getpid() << "\"\n";
  }

  // hurrayd under the environment systemd gives a Type=notify service with WatchdogSec=:
  // NOTIFY_SOCKET, WATCHDOG_USEC, and WATCHDOG_PID naming hurrayd (or, `watchdog_pid` set,
  // that other process).
  void StartDaemon(std::optional<pid_t> watchdog_pid = std::nullopt) {
    // The shell makes WATCHDOG_PID its own pid, which exec hands to hurrayd, as systemd
    // names the service's main process.
    const std::string set_pid = watchdog_pid ? fmt::format("export WATCHDOG_PID={}", *watchdog_pid)
                                             : std::string("export WATCHDOG_PID=$$");
    ASSERT_OK_AND_ASSIGN(
        daemon_,
        testing::ChildProcess::Start(
            {"/bin/sh", "-c", fmt::format("{}; exec \"$0\" \"$@\"", set_pid), HURRAYD_PATH,
             "--config", directory_->Path("hurrayd.toml"), "--socket", directory_->Path("d.sock"),
             "--cpu-pool-capacity", "64MiB", "--log-level", "info"},
            {.stderr_path = directory_->Path("hurrayd.log"),
             .environment = {fmt::format("NOTIFY_SOCKET={}", directory_->Path("notify")),
                             fmt::format("WATCHDOG_USEC={}", kWatchdogUsec)}}));
  }

  // SIGTERM, and the daemon's exit status 0.
  void ExpectStopsCleanly() {
    daemon_->Signal(SIGTERM);
    const std::optional<int> status = daemon_->Wait(kTimeout);
    ASSERT_TRUE(status.has_value()) << "hurrayd did not end after SIGTERM";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "wait status " << *status;
  }

  // Notifications until one has `line` (returned last), or none comes before the timeout.
  std::vector<Notification> ReceiveUntil(std::string_view line) {
    std::vector<Notification> received;
    const auto deadline = steady_clock::now() + kTimeout;
    while (auto notification = notify_->Receive(deadline)) {
      received.push_back(*notification);
      if (HasLine(notification->text, line)) break;
    }
    return received;
  }

  std::optional<testing::TempDir> directory_;
  std::optional<NotifySocket> notify_;
  std::optional<testing::ChildProcess> daemon_;
};

TEST_F(SystemdNotifyTest, ReadyStatusRepeatedWatchdogThenStoppingOnSigterm) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  const std::vector<Notification> start = ReceiveUntil("READY=1");
  ASSERT_FALSE(start.empty());
  const Notification& ready = start.back();
  ASSERT_TRUE(HasLine(ready.text, "READY=1")) << "no READY=1; last: " << ready.text;
  EXPECT_TRUE(StartsLine(ready.text, "STATUS=serving on ")) << ready.text;
  EXPECT_TRUE(HasLine(ready.text, fmt::format("MAINPID={}", daemon_->pid()))) << ready.text;
  EXPECT_EQ(ready.sender, daemon_->pid());  // NotifyAccess=main holds.

  int pings = 0;
  while (pings < 3) {
    const std::vector<Notification> next = ReceiveUntil("WATCHDOG=1");
    ASSERT_TRUE(!next.empty() && HasLine(next.back().text, "WATCHDOG=1"))
        << "only " << pings << " WATCHDOG=1 within " << kTimeout.count() << " ms";
    EXPECT_EQ(next.back().sender, daemon_->pid());
    ++pings;
  }

  daemon_->Signal(SIGTERM);
  const std::vector<Notification> stop = ReceiveUntil("STOPPING=1");
  ASSERT_TRUE(!stop.empty() && HasLine(stop.back().text, "STOPPING=1")) << "no STOPPING=1";
  // The watchdog stopped before STOPPING=1: nothing pings after it.
  while (auto late = notify_->Receive(steady_clock::now() + milliseconds(500))) {
    EXPECT_FALSE(HasLine(late->text, "WATCHDOG=1")) << "WATCHDOG=1 after STOPPING=1";
  }
  const std::optional<int> status = daemon_->Wait(kTimeout);
  ASSERT_TRUE(status.has_value()) << "hurrayd did not end after SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "wait status " << *status;
}

TEST_F(SystemdNotifyTest, NoWatchdogPingsWhenWatchdogPidNamesAnotherProcess) {
  ASSERT_NO_FATAL_FAILURE(
      StartDaemon(::getpid()));  // systemd asks this process, not hurrayd, for pings.
  const std::vector<Notification> start = ReceiveUntil("READY=1");
  ASSERT_TRUE(!start.empty() && HasLine(start.back().text, "READY=1"));
  while (auto next = notify_->Receive(steady_clock::now() + milliseconds(1000))) {
    EXPECT_FALSE(HasLine(next->text, "WATCHDOG=1")) << next->text;
  }
  ExpectStopsCleanly();
}

}  // namespace
}  // namespace hurray
