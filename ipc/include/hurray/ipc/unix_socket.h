// Unix stream sockets by path: their address, connecting to one, readying a path for a
// listener and the socket file it binds there. Thread-safe (each call works on its own
// arguments and the file system), except BoundSocketFile, as it says.
#pragma once

#include <sys/types.h>
#include <sys/un.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray {

// The address of a unix socket at `path`. INVALID_ARGUMENT for an empty path, one with a
// NUL byte, or one longer than sockaddr_un holds (107 bytes).
[[nodiscard]] Result<sockaddr_un> UnixSocketAddress(std::string_view path);

// A new blocking unix stream socket (O_CLOEXEC) connected to `path`. A path in the fallback
// socket directory (/tmp/hurray-$UID) is connected only when CheckFallbackSocketDirectory
// (hurray/ipc/socket_path.h) passes: FAILED_PRECONDITION otherwise, before any connect.
// UNAVAILABLE "connect <path>: <strerror>: no daemon listens there" when nothing listens
// there (no file, or a stale one); PERMISSION_DENIED when the socket file's mode refuses us;
// INVALID_ARGUMENT as UnixSocketAddress; other failures as hurray/ipc/errno_error.h.
[[nodiscard]] Result<UniqueFd> ConnectUnixSocket(const std::string& path);

// Readies `path` for a socket to be bound there. The one policy of every listener:
//   - `directory_mode` may not let group or others write (INVALID_ARGUMENT): whoever may
//     write the directory may replace the socket; group and others need only search (x)
//     permission to connect;
//   - any missing parent of the directory of `path` is created with `directory_mode`, and
//     the directory itself, when missing, with exactly `directory_mode` (whatever the umask);
//     existing ones keep their mode;
//   - the directory must be a directory (not a link to one) owned by this process's
//     effective uid or by root that only its owner may write, checked through a descriptor
//     held from then on (OwnedDirectory, hurray/ipc/owned_directory.h): FAILED_PRECONDITION
//     naming the directory, the owner and mode found and what is required otherwise; root
//     is no exception, and a sticky, world-writable directory such as /tmp never passes;
//   - a file that is not a socket is left alone (FAILED_PRECONDITION "<path> exists and is
//     not a socket");
//   - a socket that a process listens on is left alone (ALREADY_EXISTS "<path> is in use");
//   - a socket nobody listens on (left by a process that died) is removed (unlinkat in the
//     held directory).
// Returns true when it removed such a stale socket file. INVALID_ARGUMENT as
// UnixSocketAddress, and for a path that names no file; a failed mkdir, chmod, fstatat,
// connect or unlinkat as hurray/ipc/errno_error.h.
[[nodiscard]] Result<bool> PrepareSocketPath(const std::string& path,
                                             std::uint32_t directory_mode = 0755);

// The socket file a listener bound at a path PrepareSocketPath readied: made with the mode
// it was given, and removed only while the path still names it. Move-only;
// thread-compatible.
class BoundSocketFile {
 public:
  // Binds `socket` (a unix stream socket, not listening yet) to `path` and sets the file's
  // mode to `mode` (at most 0777) before the caller listens, whatever the umask: until then
  // connect() is refused, so no client connects through a file of another mode. Remembers
  // which file it made. INVALID_ARGUMENT as UnixSocketAddress; a failed bind, chmod or lstat
  // as hurray/ipc/errno_error.h (a file that bind made is removed again).
  [[nodiscard]] static Result<BoundSocketFile> Bind(int socket, const std::string& path,
                                                    std::uint32_t mode);

  BoundSocketFile(BoundSocketFile&& other) noexcept;
  BoundSocketFile& operator=(BoundSocketFile&& other) noexcept;
  BoundSocketFile(const BoundSocketFile&) = delete;
  BoundSocketFile& operator=(const BoundSocketFile&) = delete;
  // Remove(), its outcome dropped.
  ~BoundSocketFile();

  // Removes the file when the path still names the one Bind made. OK too when there is
  // nothing to remove (removed before, moved from, or the path names no file). A file that
  // replaced it (another daemon's?) is left in place: FAILED_PRECONDITION naming the path.
  // Idempotent. A failed lstat or unlink as hurray/ipc/errno_error.h.
  Status Remove();

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  BoundSocketFile(std::string path, dev_t device, ino_t inode)
      : path_(std::move(path)), device_(device), inode_(inode), bound_(true) {}

  std::string path_;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  bool bound_ = false;  // False once removed, or moved from.
};

}  // namespace hurray
