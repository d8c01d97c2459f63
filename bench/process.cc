#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

namespace hurray::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::unexpected<Error> ErrnoError(std::string_view call) {
  return InternalError(std::string(call) + ": " + std::strerror(errno));
}

cpu_set_t ToMask(const std::vector<int>& cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int cpu : cpus) CPU_SET(cpu, &mask);
  return mask;
}

// Opens `path` for appending and makes it descriptor `target`. Async-signal-safe.
bool RedirectToFile(const char* path, int target) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  return ::dup2(fd, target) == target;  // dup2 clears O_CLOEXEC on the target.
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(mask), &mask) != 0) return {0};
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  }
  return cpus;
}

Status SetProcessAffinity(pid_t pid, const std::vector<int>& cpus) {
  const cpu_set_t mask = ToMask(cpus);
  std::error_code error;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& entry : std::filesystem::directory_iterator(tasks, error)) {
    const pid_t thread = static_cast<pid_t>(std::stol(entry.path().filename().string()));
    // A thread that ended since the listing is no error.
    if (::sched_setaffinity(thread, sizeof(mask), &mask) != 0 && errno != ESRCH) {
      return ErrnoError("sched_setaffinity(thread " + std::to_string(thread) + " of pid " +
                        std::to_string(pid) + ")");
    }
  }
  if (error) return InternalError("list " + tasks + ": " + error.message());
  return {};
}

std::string SelfExecutable() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("/proc/self/exe") : path.string();
}

Result<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                         const Options& options) {
  ChildProcess child;
  for (const std::string& argument : argv) {
    if (!child.command_line_.empty()) child.command_line_ += ' ';
    child.command_line_ += argument;
  }
  // Everything the child needs is prepared before fork: after it the child may only make
  // async-signal-safe calls until exec.
  std::vector<std::string> arguments = argv;
  std::vector<char*> argument_pointers;
  for (std::string& argument : arguments) argument_pointers.push_back(argument.data());
  argument_pointers.push_back(nullptr);
  const char* stdout_path = options.stdout_path.empty() ? nullptr : options.stdout_path.c_str();
  const char* stderr_path = options.stderr_path.empty() ? nullptr : options.stderr_path.c_str();
  const bool set_affinity = !options.cpus.empty();
  const cpu_set_t mask = ToMask(options.cpus);

  int stdout_pipe[2] = {-1, -1};
  int stdin_pipe[2] = {-1, -1};
  if (stdout_path == nullptr && ::pipe2(stdout_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  if (options.stdin_pipe && ::pipe2(stdin_pipe, O_CLOEXEC) != 0) {
    ::close(stdout_pipe[0]);
    ::close(stdout_pipe[1]);
    return ErrnoError("pipe2");
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const auto error = ErrnoError("fork");
    for (int fd : {stdout_pipe[0], stdout_pipe[1], stdin_pipe[0], stdin_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return error;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
    if (::getppid() != parent) ::_exit(126);  // The parent died before prctl.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (set_affinity) ::sched_setaffinity(0, sizeof(mask), &mask);
    if (options.stdin_pipe) {
      if (::dup2(stdin_pipe[0], STDIN_FILENO) != STDIN_FILENO) ::_exit(127);
    } else {
      const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    }
    if (stdout_path != nullptr) {
      if (!RedirectToFile(stdout_path, STDOUT_FILENO)) ::_exit(127);
    } else if (::dup2(stdout_pipe[1], STDOUT_FILENO) != STDOUT_FILENO) {
      ::_exit(127);
    }
    if (stderr_path != nullptr && !RedirectToFile(stderr_path, STDERR_FILENO)) ::_exit(127);
    ::execv(argument_pointers[0], argument_pointers.data());
    ::_exit(127);
  }
  child.pid_ = pid;
  if (stdout_path == nullptr) {
    ::close(stdout_pipe[1]);
    child.stdout_fd_ = stdout_pipe[0];
  } else {
    child.stdout_closed_ = true;
  }
  if (options.stdin_pipe) {
    ::close(stdin_pipe[0]);
    child.stdin_fd_ = stdin_pipe[1];
  }
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

Status ChildProcess::WriteLine(const std::string& line) {
  if (stdin_fd_ < 0) return UnavailableError("no stdin pipe to " + command_line_);
  const std::string text = line + "\n";
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t count = ::write(stdin_fd_, text.data() + written, text.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      return UnavailableError("write to the stdin of " + command_line_ + ": " +
                              std::strerror(errno));
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
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "wait status " + std::to_string(status);
}

}  // namespace hurray::bench
