// The one place that turns C++ errors into C ABI status codes, and the per-thread message
// that hurray_last_error_message reports.
#pragma once

#include <string_view>

#include "hurray.h"
#include "hurray/error.h"

namespace hurray::internal {

// The C status for an error code: each code with a HURRAY_ERR_* twin maps to it
// (DEADLINE_EXCEEDED to TIMEOUT; UNAUTHENTICATED to PERMISSION_DENIED; CANCELLED to
// UNAVAILABLE; ALREADY_EXISTS to FAILED_PRECONDITION); the rest are HURRAY_ERR_INTERNAL.
[[nodiscard]] HurrayStatus ToCStatus(StatusCode code);

// Records `message` as this thread's last error and returns `status`.
HurrayStatus SetLastError(HurrayStatus status, std::string_view message);

// Records the error and returns its C status.
HurrayStatus SetLastError(const Error& error);

// Clears this thread's last error (a call succeeded).
void ClearLastError();

// This thread's last error message; "" when none.
[[nodiscard]] const char* LastErrorMessage();

}  // namespace hurray::internal
