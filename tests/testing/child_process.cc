#include "testing/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "hurray/ipc/errno_error.h"

extern char** environ;

namespace hurray::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Both ends of a pipe (close-on-exec), closed on destruction unless taken.
struct Pipe {
  int read_end = -1;
  int write_end = -1;

  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    if (read_end >= 0) ::close(read_end);
    if (write_end >= 0) ::close(write_end);
  }

  Status Open() {
    int fds[2] = {-1, -1};
    if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoFailure("pipe2", "", errno);
    read_end = fds[0];
    write_end = fds[1];
    return {};
  }
};

// Whether the "NAME=value" or "NAME" entry `entry` names `name`.
bool Names(std::string_view entry, std::string_view name) {
  return entry.substr(0, entry.find('=')) == name.substr(0, name.find('='));
}

// The parent's environment with `options`' entries added, replaced and removed.
std::vector<std::string> ChildEnvironment(const ChildProcess::Options& options) {
  std::vector<std::string> result;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view current(*entry);
    const auto named = [&](const std::string& other) { return Names(current, other); };
    if (std::ranges::any_of(options.environment, named)) continue;
    if (std::ranges::any_of(options.unset_environment, named)) continue;
    result.emplace_back(current);
  }
  result.insert(result.end(), options.environment.begin(), options.environment.end());
  return result;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Everything the child does between fork and exec, prepared before fork: after it, in a
// multi-threaded parent, the child may only make async-signal-safe calls until exec.
struct ExecPlan {
  std::vector<char*> argv;
  std::vector<char*> environment;
  const char* stdout_path = nullptr;  // Null: stdout_pipe.
  const char* stderr_path = nullptr;  // Null: inherited.
  int stdout_pipe = -1;               // Write end, when stdout is captured.
  int stdin_pipe = -1;                // Read end, when stdin is a pipe.
  bool set_affinity = false;
  cpu_set_t cpus{};
  int parent_death_signal = SIGKILL;
  pid_t parent = -1;
};

// Opens `path` for appending and makes it descriptor `target`. Async-signal-safe.
bool RedirectToFile(const char* path, int target) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  return ::dup2(fd, target) == target;  // dup2 clears O_CLOEXEC on the target.
}

// The child's side of Start: async-signal-safe calls only, then exec.
[[noreturn]] void RunChild(const ExecPlan& plan) {
  ::prctl(PR_SET_PDEATHSIG, plan.parent_death_signal);
  if (::getppid() != plan.parent) ::_exit(126);  // The parent died before prctl.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (plan.set_affinity) ::sched_setaffinity(0, sizeof(plan.cpus), &plan.cpus);
  if (plan.stdin_pipe >= 0) {
    if (::dup2(plan.stdin_pipe, STDIN_FILENO) != STDIN_FILENO) ::_exit(127);
  } else {
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
  }
  if (plan.stdout_path != nullptr) {
    if (!RedirectToFile(plan.stdout_path, STDOUT_FILENO)) ::_exit(127);
  } else if (::dup2(plan.stdout_pipe, STDOUT_FILENO) != STDOUT_FILENO) {
    ::_exit(127);
  }
  if (plan.stderr_path != nullptr && !RedirectToFile(plan.stderr_path, STDERR_FILENO)) {
    ::_exit(127);
  }
  ::execve(plan.argv[0], plan.argv.data(), plan.environment.data());
  ::_exit(127);
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

}  // namespace

Result<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                         const Options& options) {
  if (argv.empty()) return InvalidArgumentError("ChildProcess::Start: empty argv");
  ChildProcess child;
  child.command_line_ = fmt::format("{}", fmt::join(argv, " "));
  std::vector<std::string> arguments = argv;
  std::vector<std::string> environment = ChildEnvironment(options);
  ExecPlan plan{.argv = Pointers(arguments),
                .environment = Pointers(environment),
                .stdout_path = options.stdout_path.empty() ? nullptr : options.stdout_path.c_str(),
                .stderr_path = options.stderr_path.empty() ? nullptr : options.stderr_path.c_str(),
                .set_affinity = !options.cpus.empty(),
                .parent_death_signal = options.parent_death_signal,
                .parent = ::getpid()};
  CPU_ZERO(&plan.cpus);
  for (int cpu : options.cpus) CPU_SET(cpu, &plan.cpus);
  Pipe stdout_pipe;
  Pipe stdin_pipe;
  if (plan.stdout_path == nullptr) {
    HURRAY_RETURN_IF_ERROR(stdout_pipe.Open());
    plan.stdout_pipe = stdout_pipe.write_end;
  }
  if (options.stdin_pipe) {
    HURRAY_RETURN_IF_ERROR(stdin_pipe.Open());
    plan.stdin_pipe = stdin_pipe.read_end;
  }
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoFailure("fork", "", errno);
  if (pid == 0) RunChild(plan);
  // The child's ends close with the pipes; the parent keeps its own.
  child.pid_ = pid;
  child.stdout_fd_ = std::exchange(stdout_pipe.read_end, -1);
  child.stdout_closed_ = child.stdout_fd_ < 0;
  child.stdin_fd_ = std::exchange(stdin_pipe.write_end, -1);
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      status_(std::exchange(other.status_, std::nullopt)),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)),
      stdin_fd_(std::exchange(other.stdin_fd_, -1)),
      pending_(std::move(other.pending_)),
      stdout_closed_(other.stdout_closed_),
      command_line_(std::move(other.command_line_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Kill();
    CloseStreams();
    pid_ = std::exchange(other.pid_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    stdin_fd_ = std::exchange(other.stdin_fd_, -1);
    pending_ = std::move(other.pending_);
    stdout_closed_ = other.stdout_closed_;
    command_line_ = std::move(other.command_line_);
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  Kill();
  CloseStreams();
}

void ChildProcess::CloseStreams() {
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdout_fd_ = -1;
  stdin_fd_ = -1;
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
    char chunk[65536];
    const ssize_t count = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      ::close(stdout_fd_);
      stdout_fd_ = -1;
      stdout_closed_ = true;
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

Status ChildProcess::WriteLine(const std::string& line) {
  if (stdin_fd_ < 0) return UnavailableError(fmt::format("no stdin pipe to {}", command_line_));
  const std::string text = line + "\n";
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t count = ::write(stdin_fd_, text.data() + written, text.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      return UnavailableError(
          ErrnoError(fmt::format("write to the stdin of {}", command_line_), "", errno).message());
    }
    written += static_cast<std::size_t>(count);
  }
  return {};
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
      status_ = -1;
      return status_;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
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
  if (WIFEXITED(status)) return fmt::format("exited {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* description = ::sigdescr_np(WTERMSIG(status));
    return fmt::format("killed by signal {} ({})", WTERMSIG(status),
                       description != nullptr ? description : "unknown");
  }
  return fmt::format("wait status {}", status);
}

}  // namespace hurray::testing
