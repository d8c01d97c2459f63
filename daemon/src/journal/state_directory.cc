#include "journal/state_directory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>

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
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  HURRAY_ASSIGN_OR_RETURN(OwnedDirectory directory,
                          OwnedDirectory::Create(path, 0700, "state directory"));
  HURRAY_ASSIGN_OR_RETURN(UniqueFd lock, directory.OpenFile("lock", O_RDWR | O_CREAT, 0600));
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    const int flock_error = errno;
    const std::string lock_path = directory.PathOf("lock");
    if (flock_error == EWOULDBLOCK) {
      return FailedPreconditionError(fmt::format(
          "state directory {} is in use by another hurrayd (it holds {}); give each daemon a "
          "state_directory of its own",
          directory.path(), lock_path));
    }
    return ErrnoFailure("flock", lock_path, flock_error);
  }
  return StateDirectory(std::move(directory), std::move(lock));
}

}  // namespace hurray::daemon
