#include "hurray/ipc/socket_path.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

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
  return fmt::format("/tmp/hurray-{}/{}", ::getuid(), kSocketName);
}

}  // namespace

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
