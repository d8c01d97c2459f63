#include "hurray/errno_error.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace hurray {
namespace {

// The C library's text for `error_number` ("No such file or directory").
std::string ErrnoText(int error_number) {
  std::array<char, 256> buffer{};
  // GNU strerror_r: returns a pointer to the text, which may or may not be `buffer`.
  return ::strerror_r(error_number, buffer.data(), buffer.size());
}

}  // namespace

StatusCode CodeForErrno(int error_number) {
  switch (error_number) {
    case EPIPE:
    case ECONNRESET:
    case ECONNREFUSED:
    case ECONNABORTED:
    case ENOTCONN:
    case ESHUTDOWN:
    case ETIMEDOUT:
      return StatusCode::kUnavailable;
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
    case ETOOMANYREFS:
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return StatusCode::kResourceExhausted;
    case EACCES:
    case EPERM:
    case EROFS:
      return StatusCode::kPermissionDenied;
    case EEXIST:
    case EADDRINUSE:
      return StatusCode::kAlreadyExists;
    case ENOENT:
    case ENOTDIR:
      return StatusCode::kNotFound;
    case EBADF:
    case ENOTSOCK:
    case ENAMETOOLONG:
    case EISDIR:
      return StatusCode::kInvalidArgument;
    default:
      return StatusCode::kInternal;
  }
}

Error ErrnoError(std::string_view call, std::string_view path, int error_number) {
  std::string message = path.empty()
                            ? fmt::format("{}: {}", call, ErrnoText(error_number))
                            : fmt::format("{} {}: {}", call, path, ErrnoText(error_number));
  return {CodeForErrno(error_number), std::move(message)};
}

}  // namespace hurray
