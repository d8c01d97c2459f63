// OwnedDirectory: a directory this process may trust because nobody but its own user (or
// root) can change what is in it, held open so that every file made, read, replaced or
// removed there is reached through the directory that was checked (openat on its
// descriptor, never following a link), not through a path that someone could swap.
//
// The rule, for the daemon's state and socket directories and the client's fallback socket
// directory alike (as ssh-agent and tmux check theirs): a directory, not a link to one,
// owned by this process's effective uid or by root, that neither its group nor others may
// write. Root is held to it like everyone else: a root daemon in a directory that another
// user owns or may write would follow the links, read the files and serve on the sockets
// that user puts there.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray {

// The decision, on facts the caller gathered (fstat of a held descriptor, or lstat): OK when
// `info` is a directory owned by `euid` or by root whose mode lets neither group nor others
// write. Otherwise FAILED_PRECONDITION naming `what`, `path`, what was found and what is
// required:
//   "state directory /x is owned by uid 65534 with mode 0755; it must be owned by uid 0
//    (this process's user) or root and writable only by its owner"
//   "socket directory /x is a symbolic link (owned by uid 65534), not a directory"
// Pure; thread-safe.
[[nodiscard]] Status CheckOwnedDirectory(std::string_view what, std::string_view path,
                                         const struct stat& info, uid_t euid);

// "symbolic link", "directory", "regular file", "socket", ... for the type bits of `mode`.
[[nodiscard]] std::string_view FileKindName(mode_t mode);

// An open directory that passed CheckOwnedDirectory when it was opened. Move-only. The
// const methods are thread-safe (each is one or a few calls on the held descriptor); names
// of files in it are one path component: not empty, no '/', not "." or ".." (else
// INVALID_ARGUMENT).
class OwnedDirectory {
 public:
  // Opens `path` (O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) and checks it through the
  // descriptor (fstat). `what` names it in errors ("state directory"). INVALID_ARGUMENT for
  // an empty path; FAILED_PRECONDITION as CheckOwnedDirectory, and for a path that is a
  // symbolic link or no directory; a failed open (a missing directory: NOT_FOUND) as
  // hurray/ipc/errno_error.h.
  [[nodiscard]] static Result<OwnedDirectory> Open(std::string path, std::string_view what);

  // Open, after making `path` with exactly `mode` (whatever the umask: fchmod on the held
  // descriptor) when it is missing; its parent must exist. A directory that exists keeps its
  // mode and must pass the check as it is. INVALID_ARGUMENT for a `mode` that lets group or
  // others write (the check would refuse what this made), naming `what` and the mode.
  [[nodiscard]] static Result<OwnedDirectory> Create(std::string path, mode_t mode,
                                                     std::string_view what);

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] int fd() const { return fd_.get(); }
  // "<path>/<name>", for messages and for calls that take only a path (bind, connect).
  [[nodiscard]] std::string PathOf(std::string_view name) const;

  // openat(name, flags | O_NOFOLLOW | O_CLOEXEC, mode): a link at `name` is never followed
  // (ELOOP). Errors as hurray/ipc/errno_error.h, naming PathOf(name).
  [[nodiscard]] Result<UniqueFd> OpenFile(std::string_view name, int flags,
                                          mode_t mode = 0600) const;

  // What is at `name` (fstatat, not following a link); nullopt when nothing is.
  [[nodiscard]] Result<std::optional<struct stat>> StatFile(std::string_view name) const;

  // The first `max_bytes` bytes of the regular file `name`; nullopt when there is none.
  // FAILED_PRECONDITION when `name` is something else (a link, a FIFO, a directory), which
  // is left alone; other errors name the failed call.
  [[nodiscard]] Result<std::optional<std::string>> ReadFile(std::string_view name,
                                                            std::size_t max_bytes) const;

  // Replaces `name` by a file holding `text` (mode 0600), atomically: the text goes to
  // "<name>.new", made with O_CREAT | O_EXCL | O_NOFOLLOW (a regular file left there by a
  // process that died is removed first; anything else there, a link above all, is refused
  // with FAILED_PRECONDITION and left alone), which is then renamed over `name` (renameat: a
  // link at `name` is replaced, not followed). Nothing is fsynced: the file outlives the
  // process, not the operating system. Errors name the failed call; the temporary file is
  // removed on failure.
  [[nodiscard]] Status ReplaceFile(std::string_view name, std::string_view text) const;

  // Removes `name` (unlinkat, which never follows a link); nothing there is fine.
  [[nodiscard]] Status RemoveFile(std::string_view name) const;

  // The names in the directory that start with `prefix` ("." and ".." never), in no
  // particular order. Errors name the failed call.
  [[nodiscard]] Result<std::vector<std::string>> ListNames(std::string_view prefix) const;

 private:
  OwnedDirectory(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}

  std::string path_;
  UniqueFd fd_;
};

}  // namespace hurray
