#include "journal/state_directory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon {
namespace {

std::string Environment(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read at start-up.
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

StateDirectoryEnvironment ReadStateDirectoryEnvironment() {
  return {.state_directory = Environment("STATE_DIRECTORY"),
          .xdg_state_home = Environment("XDG_STATE_HOME"),
          .home = Environment("HOME")};
}

std::string DefaultStateDirectory(const StateDirectoryEnvironment& environment) {
  const std::string_view systemd = std::string_view(environment.state_directory)
                                       .substr(0, environment.state_directory.find(':'));
  if (systemd.starts_with('/')) return std::string(systemd);
  if (environment.xdg_state_home.starts_with('/')) return environment.xdg_state_home + "/hurray";
  if (environment.home.starts_with('/')) return environment.home + "/.local/state/hurray";
  return "/var/lib/hurray";
}

Result<StateDirectory> StateDirectory::Open(const std::string& path) {
  if (!path.starts_with('/')) {
    return InvalidArgumentError(
        fmt::format("state_directory \"{}\": must be an absolute path", path));
  }
  std::error_code error;
  const std::filesystem::path directory(path);
  std::filesystem::create_directories(directory.parent_path(), error);
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return std::unexpected(ErrnoError("mkdir", path, errno));
  }
  const std::string lock_path = path + "/lock";
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock) return std::unexpected(ErrnoError("open(O_CREAT)", lock_path, errno));
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return FailedPreconditionError(fmt::format(
          "state directory {} is in use by another hurrayd (it holds {}); give each daemon a "
          "state_directory of its own",
          path, lock_path));
    }
    return std::unexpected(ErrnoError("flock", lock_path, errno));
  }
  return StateDirectory(path, std::move(lock));
}

}  // namespace hurray::daemon
