#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

extern char** environ;

namespace hurray::integration {
namespace {

using Clock = std::chrono::steady_clock;

// Opens `path` for appending and makes it descriptor `target`. Async-signal-safe.
bool RedirectToFile(const char* path, int target) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  return ::dup2(fd, target) == target;  // dup2 clears O_CLOEXEC on the target.
}

// The test's environment with `extra` ("NAME=value") replacing or adding entries.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> result;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view current(*entry);
    const std::string_view name = current.substr(0, current.find('='));
    bool replaced = false;
    for (const std::string& added : extra) {
      if (std::string_view(added).substr(0, added.find('=')) == name) replaced = true;
    }
    if (!replaced) result.emplace_back(current);
  }
  result.insert(result.end(), extra.begin(), extra.end());
  return result;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

}  // namespace

ChildProcess ChildProcess::Start(const std::vector<std::string>& argv, const Options& options) {
  ChildProcess child;
  for (const std::string& arg : argv) {
    if (!child.command_line_.empty()) child.command_line_ += ' ';
    child.command_line_ += arg;
  }
  // Everything the child needs is prepared before fork: after it, in a multi-threaded
  // parent, the child may only make async-signal-safe calls until exec.
  std::vector<std::string> arguments = argv;
  std::vector<char*> argument_pointers = Pointers(arguments);
  std::vector<std::string> environment = ChildEnvironment(options.environment);
  std::vector<char*> environment_pointers = Pointers(environment);
  const char* stdout_path = options.stdout_path.empty() ? nullptr : options.stdout_path.c_str();
  const char* stderr_path = options.stderr_path.empty() ? nullptr : options.stderr_path.c_str();

  int pipe_fds[2] = {-1, -1};
  if (stdout_path == nullptr && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    std::perror("ChildProcess: pipe2");
    std::abort();
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("ChildProcess: fork");
    std::abort();
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
    if (::getppid() != parent) ::_exit(126);  // The parent died before prctl.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    if (stdout_path != nullptr) {
      if (!RedirectToFile(stdout_path, STDOUT_FILENO)) ::_exit(127);
    } else if (::dup2(pipe_fds[1], STDOUT_FILENO) != STDOUT_FILENO) {
      ::_exit(127);
    }
    if (stderr_path != nullptr && !RedirectToFile(stderr_path, STDERR_FILENO)) ::_exit(127);
    ::execve(argument_pointers[0], argument_pointers.data(), environment_pointers.data());
    ::_exit(127);
  }
  child.pid_ = pid;
  if (stdout_path == nullptr) {
    ::close(pipe_fds[1]);
    child.stdout_fd_ = pipe_fds[0];
  } else {
    child.stdout_closed_ = true;
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      status_(std::exchange(other.status_, std::nullopt)),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)),
      pending_(std::move(other.pending_)),
      stdout_closed_(other.stdout_closed_),
      command_line_(std::move(other.command_line_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Kill();
    CloseOutput();
    pid_ = std::exchange(other.pid_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    pending_ = std::move(other.pending_);
    stdout_closed_ = other.stdout_closed_;
    command_line_ = std::move(other.command_line_);
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  Kill();
  CloseOutput();
}

void ChildProcess::CloseOutput() {
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
  stdout_closed_ = true;
}

std::optional<std::string> ChildProcess::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (const auto newline = pending_.find('\n'); newline != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      return line;
    }
    if (stdout_closed_) {
      if (pending_.empty()) return std::nullopt;
      return std::exchange(pending_, {});
    }
    pollfd poll_fd{.fd = stdout_fd_, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&poll_fd, 1, RemainingMs(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return std::nullopt;  // Time is up.
    char chunk[4096];
    const ssize_t count = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      CloseOutput();
      continue;
    }
    pending_.append(chunk, static_cast<std::size_t>(count));
  }
}

std::optional<std::string> ChildProcess::ReadToEnd(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string all;
  while (true) {
    auto line = ReadLine(std::chrono::milliseconds(RemainingMs(deadline)));
    if (line) {
      all += *line;
      all += '\n';
      continue;
    }
    if (stdout_closed_) return all;
    return std::nullopt;  // Time is up with the stream still open.
  }
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0 && !status_) ::kill(pid_, signal);
}

bool ChildProcess::Running() { return pid_ > 0 && !Wait(std::chrono::milliseconds(0)); }

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (status_ || pid_ <= 0) return status_;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
    if (reaped == pid_) {
      status_ = status;
      return status_;
    }
    if (reaped < 0 && errno != EINTR) {
      std::perror("ChildProcess: waitpid");
      status_ = -1;
      return status_;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ChildProcess::Kill() {
  if (pid_ <= 0 || status_) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  status_ = status;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "wait status " + std::to_string(status);
}

}  // namespace hurray::integration
