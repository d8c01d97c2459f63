// For the C entry points of libhurray and libhurray-client only (never installed): the one
// place that turns C++ errors into C ABI status codes, the thread's last error (reported
// through hurray_set_last_error, so both libraries share the one message that
// hurray_last_error_message returns), and Guard, which keeps exceptions from crossing the
// boundary. Both libraries compile this translation unit in; its state is per thread.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "hurray.h"
#include "hurray/error.h"

namespace hurray::internal {

// The C status for an error code: each code with a HURRAY_ERR_* twin maps to it
// (DEADLINE_EXCEEDED to TIMEOUT; UNAUTHENTICATED to PERMISSION_DENIED; CANCELLED to
// UNAVAILABLE; ALREADY_EXISTS to FAILED_PRECONDITION; DATA_LOSS, bytes that cannot be used,
// to DATA_LOSS); UNKNOWN, ABORTED, UNIMPLEMENTED and INTERNAL, which the format never
// reports and the client reports for a failed daemon exchange, to DAEMON_INTERNAL.
// HURRAY_ERR_INTERNAL (a misused handle) is never the translation of an error code.
[[nodiscard]] HurrayStatus ToCStatus(StatusCode code);

// Records `message` as this thread's last error and returns `status`.
HurrayStatus SetLastError(HurrayStatus status, std::string_view message);

// Records the error and returns its C status.
HurrayStatus SetLastError(const Error& error);

// Clears this thread's last error (a call succeeded).
void ClearLastError();

// Runs `cleanup` after a failure and returns `status` with the message the failure left:
// the hurray_ calls a cleanup makes (destroys) clear the thread's last error when they
// succeed.
template <typename Cleanup>
HurrayStatus FailAfterCleanup(HurrayStatus status, Cleanup&& cleanup) {
  std::string message = hurray_last_error_message();
  cleanup();
  return SetLastError(status, message);
}

// The C entry point running on this thread (set by Guard), for error messages.
[[nodiscard]] const char* CurrentFunction();
void SetCurrentFunction(const char* function);

// Runs a C entry point's body with the thread's last error cleared, converting any escaping
// exception into a status: bad_alloc to HURRAY_ERR_OUT_OF_MEMORY, anything else to
// HURRAY_ERR_INTERNAL_PANIC.
template <typename Body>
HurrayStatus Guard(const char* function, Body&& body) noexcept {
  try {
    SetCurrentFunction(function);
    ClearLastError();
    return body();
  } catch (const std::bad_alloc&) {
    return SetLastError(HURRAY_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& exception) {
    return SetLastError(HURRAY_ERR_INTERNAL_PANIC, exception.what());
  } catch (...) {
    return SetLastError(HURRAY_ERR_INTERNAL_PANIC, "unknown exception");
  }
}

// HURRAY_ERR_NULL_POINTER naming the running entry point and the argument.
HurrayStatus NullArgument(std::string_view argument);

}  // namespace hurray::internal

// Returns HURRAY_ERR_NULL_POINTER from the enclosing entry point when `argument` is null.
#define HURRAY_REQUIRE(argument)                                                   \
  do {                                                                             \
    if ((argument) == nullptr) return ::hurray::internal::NullArgument(#argument); \
  } while (false)
