#include "session/session_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>
#include <utility>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/ipc/unix_socket.h"
#include "session/session_listener.h"

namespace hurray::daemon {
Result<std::unique_ptr<SessionServer>> SessionServer::Create(
    boost::asio::io_context& io_context, std::string socket_path, SessionHost& host,
    std::uint64_t daemon_epoch, std::uint32_t socket_mode, SessionLimits limits,
    std::shared_ptr<const UniqueFd> epoch_hold) {
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener) return ErrnoFailure("socket", "", errno);
  // Removed again (its destructor) if what follows fails.
  Result<BoundSocketFile> bound = BoundSocketFile::Bind(listener.get(), socket_path, socket_mode);
  if (!bound) return std::unexpected(bound.error().WithContext("socket_path"));
  BoundSocketFile socket_file = std::move(*bound);
  if (::listen(listener.get(), SOMAXCONN) != 0) {
    return ErrnoFailure("listen", socket_path, errno);
  }
  auto core = std::make_shared<Core>(io_context, socket_path, host, daemon_epoch, limits,
                                     std::move(socket_file), std::move(epoch_hold));
  HURRAY_RETURN_IF_ERROR(core->Listen(std::move(listener)));
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
