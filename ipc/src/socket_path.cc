#include "hurray/ipc/socket_path.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/owned_directory.h"

namespace hurray {
namespace {

constexpr std::string_view kSocketName = "hurrayd.sock";
constexpr std::string_view kSystemSocket = "/run/hurray/hurrayd.sock";

std::string Environment(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read-only use.
  return value == nullptr ? std::string() : std::string(value);
}

std::string UserSocketPath() {
  if (std::string runtime = Environment("XDG_RUNTIME_DIR"); !runtime.empty()) {
    return fmt::format("{}/hurray/{}", runtime, kSocketName);
  }
  return fmt::format("{}/{}", FallbackSocketDirectory(), kSocketName);
}

}  // namespace

std::string FallbackSocketDirectory() { return fmt::format("/tmp/hurray-{}", ::getuid()); }

Status CheckFallbackSocketDirectory(std::string_view socket_path) {
  const std::string directory = FallbackSocketDirectory();
  std::error_code unused;
  const std::filesystem::path absolute =
      std::filesystem::absolute(std::filesystem::path(socket_path), unused).lexically_normal();
  if (absolute.parent_path() != std::filesystem::path(directory)) return {};
  struct stat info{};
  if (::lstat(directory.c_str(), &info) != 0) {
    if (errno == ENOENT) return {};  // Nothing there: connecting says that no daemon listens.
    return ErrnoFailure("lstat", directory, errno);
  }
  if (Status checked = CheckOwnedDirectory("socket directory", directory, info, ::geteuid());
      !checked) {
    return FailedPreconditionError(fmt::format(
        "{}; not connecting: another user may have made it to pose as hurrayd (remove it, or "
        "name the daemon's socket with HURRAY_SOCKET)",
        checked.error().message()));
  }
  return {};
}

std::string DefaultDaemonSocketPath() {
  if (std::string systemd = Environment("RUNTIME_DIRECTORY"); !systemd.empty()) {
    // RuntimeDirectory= may list several directories, separated by ':'; the first is ours.
    return fmt::format("{}/{}", std::string_view(systemd).substr(0, systemd.find(':')),
                       kSocketName);
  }
  return UserSocketPath();
}

std::string DefaultClientSocketPath() {
  if (std::string explicit_path = Environment("HURRAY_SOCKET"); !explicit_path.empty()) {
    return explicit_path;
  }
  struct stat status{};
  if (::stat(std::string(kSystemSocket).c_str(), &status) == 0 && S_ISSOCK(status.st_mode)) {
    return std::string(kSystemSocket);
  }
  return UserSocketPath();
}

std::string SessionSocketPath(std::string_view grpc_socket_path) {
  return fmt::format("{}.session", grpc_socket_path);
}

}  // namespace hurray
