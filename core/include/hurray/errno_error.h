// The one wrapping of errno for the whole tree: a failed system call becomes an Error named
// after the call and its object, with the code of the table below. Thread-safe (the text
// comes from strerror_r).
//
// errno → StatusCode:
//   UNAVAILABLE         EPIPE ECONNRESET ECONNREFUSED ECONNABORTED ENOTCONN ESHUTDOWN
//                       ETIMEDOUT: the peer or the connection is gone
//   RESOURCE_EXHAUSTED  EMFILE ENFILE ENOBUFS ENOMEM ETOOMANYREFS ENOSPC EDQUOT EFBIG
//   PERMISSION_DENIED   EACCES EPERM EROFS
//   ALREADY_EXISTS      EEXIST EADDRINUSE
//   NOT_FOUND           ENOENT ENOTDIR
//   INVALID_ARGUMENT    EBADF ENOTSOCK ENAMETOOLONG EISDIR
//   INTERNAL            any other value
//
// A call site that knows more than the errno value says so itself: connecting to a socket
// path where no file is (ENOENT) means "no daemon listens there", which ConnectUnixSocket
// reports as UNAVAILABLE in its own words.
#pragma once

#include <expected>
#include <string_view>

#include "hurray/error.h"

namespace hurray {

// The canonical code for `error_number`, from the table above.
[[nodiscard]] StatusCode CodeForErrno(int error_number);

// "<call> <path>: <text of error_number>", or "<call>: <text>" when `path` is empty, with
// the code CodeForErrno gives: ErrnoError("open", "/tmp/x", ENOENT) is NOT_FOUND
// "open /tmp/x: No such file or directory". `call` may carry its arguments
// ("open(O_RDONLY)"); `path` names the file, socket or object the call was about.
[[nodiscard]] Error ErrnoError(std::string_view call, std::string_view path, int error_number);

// ErrnoError as a Result's failure: `return ErrnoFailure("open", path, errno);`.
[[nodiscard]] inline std::unexpected<Error> ErrnoFailure(std::string_view call,
                                                         std::string_view path, int error_number) {
  return std::unexpected(ErrnoError(call, path, error_number));
}

}  // namespace hurray
