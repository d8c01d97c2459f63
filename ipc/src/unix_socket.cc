#include "hurray/ipc/unix_socket.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <utility>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/owned_directory.h"
#include "hurray/ipc/socket_path.h"

namespace hurray {
namespace {

// mkdir with `mode` (whatever the umask), or nothing when it exists.
Status MakeDirectory(const std::string& directory, mode_t mode) {
  if (::mkdir(directory.c_str(), mode) == 0) {
    if (::chmod(directory.c_str(), mode) != 0) {
      return ErrnoFailure("chmod", directory, errno);
    }
    return {};
  }
  if (errno == EEXIST) return {};
  return ErrnoFailure("mkdir", directory, errno);
}

// Creates the missing parents of `directory`, each with `mode`.
Status CreateParents(const std::string& directory, mode_t mode) {
  const std::string parent = std::filesystem::path(directory).parent_path().string();
  struct stat info{};
  if (parent.empty() || ::stat(parent.c_str(), &info) == 0) return {};
  for (std::size_t slash = parent.find('/', 1); slash != std::string::npos;
       slash = parent.find('/', slash + 1)) {
    HURRAY_RETURN_IF_ERROR(MakeDirectory(parent.substr(0, slash), mode));
  }
  return MakeDirectory(parent, mode);
}

// Removes the socket file `name` of `directory` that nobody listens on; refuses a live
// socket or a file of another kind. true when it removed one.
Result<bool> RemoveStaleSocket(const OwnedDirectory& directory, const std::string& name,
                               const sockaddr_un& address) {
  const std::string path = directory.PathOf(name);
  HURRAY_ASSIGN_OR_RETURN(const std::optional<struct stat> info, directory.StatFile(name));
  if (!info) return false;
  if (!S_ISSOCK(info->st_mode)) {
    return FailedPreconditionError(
        fmt::format("{} exists and is not a socket (a {})", path, FileKindName(info->st_mode)));
  }
  // Non-blocking, so that a live listener with a full backlog reads as live, not as a hang.
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe) return ErrnoFailure("socket", "", errno);
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 ||
      errno == EAGAIN || errno == EINPROGRESS) {
    return AlreadyExistsError(fmt::format("{} is in use: a process listens on it", path));
  }
  if (errno != ECONNREFUSED && errno != ENOENT) {
    return ErrnoFailure("connect", path, errno);
  }
  HURRAY_RETURN_IF_ERROR(directory.RemoveFile(name));
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
  HURRAY_RETURN_IF_ERROR(CheckFallbackSocketDirectory(path));
  UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket) return ErrnoFailure("socket", "", errno);
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
  const std::filesystem::path file(path);
  const std::string name = file.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return InvalidArgumentError(fmt::format("socket path '{}' names no file", path));
  }
  std::string directory = file.parent_path().string();
  if (directory.empty()) directory = ".";
  const auto mode = static_cast<mode_t>(directory_mode);
  HURRAY_RETURN_IF_ERROR(CreateParents(directory, mode));
  HURRAY_ASSIGN_OR_RETURN(const OwnedDirectory held,
                          OwnedDirectory::Create(directory, mode, "socket directory"));
  return RemoveStaleSocket(held, name, address);
}

Result<BoundSocketFile> BoundSocketFile::Bind(int socket, const std::string& path,
                                              std::uint32_t mode) {
  HURRAY_ASSIGN_OR_RETURN(const sockaddr_un address, UnixSocketAddress(path));
  if (::bind(socket, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return ErrnoFailure("bind", path, errno);
  }
  // From here on the file is ours: removed again if what follows fails.
  const auto fail = [&path](std::string_view call, int error) {
    ::unlink(path.c_str());
    return ErrnoFailure(call, path, error);
  };
  if (::chmod(path.c_str(), static_cast<mode_t>(mode & 0777U)) != 0) {
    const int error = errno;
    return fail(fmt::format("chmod {:04o}", mode & 0777U), error);
  }
  struct stat info{};
  if (::lstat(path.c_str(), &info) != 0) return fail("lstat", errno);
  return BoundSocketFile(path, info.st_dev, info.st_ino);
}

BoundSocketFile::BoundSocketFile(BoundSocketFile&& other) noexcept
    : path_(std::move(other.path_)),
      device_(other.device_),
      inode_(other.inode_),
      bound_(std::exchange(other.bound_, false)) {}

BoundSocketFile& BoundSocketFile::operator=(BoundSocketFile&& other) noexcept {
  if (this != &other) {
    (void)Remove();
    path_ = std::move(other.path_);
    device_ = other.device_;
    inode_ = other.inode_;
    bound_ = std::exchange(other.bound_, false);
  }
  return *this;
}

BoundSocketFile::~BoundSocketFile() { (void)Remove(); }

Status BoundSocketFile::Remove() {
  if (!std::exchange(bound_, false)) return {};
  struct stat info{};
  if (::lstat(path_.c_str(), &info) != 0) {
    if (errno == ENOENT) return {};
    return ErrnoFailure("lstat", path_, errno);
  }
  if (info.st_dev != device_ || info.st_ino != inode_) {
    return FailedPreconditionError(
        fmt::format("{} is no longer our socket file (another process's?); left in place", path_));
  }
  // A file put there between the check and the unlink would be removed instead: only a
  // process that may write the directory can, which PrepareSocketPath allows its owner alone.
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoFailure("unlink", path_, errno);
  }
  return {};
}

}  // namespace hurray
