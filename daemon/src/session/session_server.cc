#include "session/session_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <utility>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/ipc/unix_socket.h"
#include "session/session_listener.h"

namespace hurray::daemon {
Result<std::unique_ptr<SessionServer>> SessionServer::Create(
    boost::asio::io_context& io_context, std::string socket_path, SessionHost& host,
    std::uint64_t daemon_epoch, std::uint32_t socket_mode, std::uint32_t directory_mode,
    SessionLimits limits, std::shared_ptr<const UniqueFd> epoch_hold) {
  auto address = UnixSocketAddress(socket_path);
  if (!address) return std::unexpected(address.error().WithContext("socket_path"));
  HURRAY_ASSIGN_OR_RETURN(const bool removed_stale, PrepareSocketPath(socket_path, directory_mode));
  if (removed_stale) spdlog::info("session server: removed the stale socket file {}", socket_path);
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener) return std::unexpected(ErrnoError("socket", "", errno));
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    return std::unexpected(ErrnoError("bind", socket_path, errno));
  }
  // From here on the socket file is ours: remove it if we fail.
  auto fail = [&socket_path](Error error) -> Result<std::unique_ptr<SessionServer>> {
    ::unlink(socket_path.c_str());
    return std::unexpected(std::move(error));
  };
  // Before listen(), so that no client connects through a socket of the umask's mode.
  if (::chmod(socket_path.c_str(), static_cast<mode_t>(socket_mode)) != 0) {
    return fail(ErrnoError("chmod", socket_path, errno));
  }
  struct stat info{};
  if (::lstat(socket_path.c_str(), &info) != 0) {
    return fail(ErrnoError("lstat", socket_path, errno));
  }
  if (::listen(listener.get(), SOMAXCONN) != 0) {
    return fail(ErrnoError("listen", socket_path, errno));
  }
  auto core = std::make_shared<Core>(
      io_context, socket_path, host, daemon_epoch, limits,
      Core::FileIdentity{.device = info.st_dev, .inode = info.st_ino}, std::move(epoch_hold));
  if (auto listening = core->Listen(std::move(listener)); !listening) {
    return fail(std::move(listening).error());
  }
  spdlog::debug("session server: listening on {}", socket_path);
  return std::unique_ptr<SessionServer>(new SessionServer(std::move(core)));
}

SessionServer::SessionServer(std::shared_ptr<Core> core) : core_(std::move(core)) {}

// Stop() throws only where a mutex cannot be locked (std::system_error), which no recovery
// could follow.
SessionServer::~SessionServer() { Stop(); }  // NOLINT(bugprone-exception-escape)

void SessionServer::Stop() { core_->Stop(); }

std::size_t SessionServer::connection_count() const { return core_->connection_count(); }

std::uint64_t SessionServer::refused_connection_count() const {
  return core_->refused_connection_count();
}

const std::string& SessionServer::socket_path() const { return core_->socket_path(); }
}  // namespace hurray::daemon
