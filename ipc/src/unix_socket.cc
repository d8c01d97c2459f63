#include "hurray/ipc/unix_socket.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "hurray/ipc/errno_error.h"

namespace hurray {
namespace {

// mkdir with `mode` (whatever the umask), or nothing when it exists.
Status MakeDirectory(const std::string& directory, mode_t mode) {
  if (::mkdir(directory.c_str(), mode) == 0) {
    if (::chmod(directory.c_str(), mode) != 0) {
      return std::unexpected(ErrnoError("chmod", directory, errno));
    }
    return {};
  }
  if (errno == EEXIST) return {};
  return std::unexpected(ErrnoError("mkdir", directory, errno));
}

// Creates `directory` and any missing parent, each with `mode`.
Status CreateDirectories(const std::string& directory, mode_t mode) {
  struct stat info{};
  if (::stat(directory.c_str(), &info) == 0) return {};
  for (std::size_t slash = directory.find('/', 1); slash != std::string::npos;
       slash = directory.find('/', slash + 1)) {
    HURRAY_RETURN_IF_ERROR(MakeDirectory(directory.substr(0, slash), mode));
  }
  return MakeDirectory(directory, mode);
}

// Refuses a directory that another user (not root) owns, unless we are root.
Status CheckDirectoryOwner(const std::string& directory) {
  struct stat info{};
  if (::stat(directory.c_str(), &info) != 0) {
    return std::unexpected(ErrnoError("stat", directory, errno));
  }
  const uid_t self = ::geteuid();
  if (self == 0 || info.st_uid == self || info.st_uid == 0) return {};
  return FailedPreconditionError(fmt::format(
      "socket directory {} belongs to uid {}, not to this user", directory, info.st_uid));
}

// Removes a socket file nobody listens on; refuses a live socket or a file of another kind.
// true when it removed one.
Result<bool> RemoveStaleSocket(const std::string& path, const sockaddr_un& address) {
  struct stat info{};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return false;
    return std::unexpected(ErrnoError("lstat", path, errno));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return FailedPreconditionError(fmt::format("{} exists and is not a socket", path));
  }
  // Non-blocking, so that a live listener with a full backlog reads as live, not as a hang.
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe) return std::unexpected(ErrnoError("socket", "", errno));
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 ||
      errno == EAGAIN || errno == EINPROGRESS) {
    return AlreadyExistsError(fmt::format("{} is in use: a process listens on it", path));
  }
  if (errno != ECONNREFUSED && errno != ENOENT) {
    return std::unexpected(ErrnoError("connect", path, errno));
  }
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return false;
    return std::unexpected(ErrnoError("unlink", path, errno));
  }
  return true;
}

}  // namespace

Result<sockaddr_un> UnixSocketAddress(std::string_view path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty()) return InvalidArgumentError("socket path is empty");
  if (const std::size_t nul = path.find('\0'); nul != std::string_view::npos) {
    return InvalidArgumentError(
        fmt::format("socket path '{}...' contains a NUL byte", path.substr(0, nul)));
  }
  if (path.size() >= sizeof(address.sun_path)) {
    return InvalidArgumentError(
        fmt::format("socket path '{}' is {} bytes; a unix socket path holds at most {}", path,
                    path.size(), sizeof(address.sun_path) - 1));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

Result<UniqueFd> ConnectUnixSocket(const std::string& path) {
  HURRAY_ASSIGN_OR_RETURN(const sockaddr_un address, UnixSocketAddress(path));
  UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket) return std::unexpected(ErrnoError("socket", "", errno));
  while (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address),
                   sizeof(sockaddr_un)) != 0) {
    const int error_number = errno;
    if (error_number == EINTR) continue;
    const Error error = ErrnoError("connect", path, error_number);
    if (error_number == ENOENT || error_number == ENOTDIR || error_number == ECONNREFUSED) {
      // No file, or one that nobody listens on: the daemon is not running, which a caller
      // may retry; not a file that is missing for good.
      return UnavailableError(fmt::format("{}: no daemon listens there", error.message()));
    }
    return std::unexpected(error);
  }
  return socket;
}

Result<bool> PrepareSocketPath(const std::string& path, std::uint32_t directory_mode) {
  HURRAY_ASSIGN_OR_RETURN(const sockaddr_un address, UnixSocketAddress(path));
  const std::string directory = std::filesystem::path(path).parent_path().string();
  if (!directory.empty()) {
    HURRAY_RETURN_IF_ERROR(CreateDirectories(directory, static_cast<mode_t>(directory_mode)));
    HURRAY_RETURN_IF_ERROR(CheckDirectoryOwner(directory));
  }
  return RemoveStaleSocket(path, address);
}

}  // namespace hurray
