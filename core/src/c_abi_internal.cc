#include "hurray/c_abi_internal.h"

#include <string>

namespace hurray::internal {
namespace {

thread_local std::string last_error_message;
thread_local const char* current_function = "";

}  // namespace

HurrayStatus ToCStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return HURRAY_OK;
    case StatusCode::kInvalidArgument:
      return HURRAY_ERR_INVALID_ARGUMENT;
    case StatusCode::kOutOfRange:
      return HURRAY_ERR_OUT_OF_RANGE;
    case StatusCode::kResourceExhausted:
      return HURRAY_ERR_RESOURCE_EXHAUSTED;
    case StatusCode::kNotFound:
      return HURRAY_ERR_NOT_FOUND;
    case StatusCode::kDeadlineExceeded:
      return HURRAY_ERR_TIMEOUT;
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      return HURRAY_ERR_UNAVAILABLE;
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated:
      return HURRAY_ERR_PERMISSION_DENIED;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
      return HURRAY_ERR_FAILED_PRECONDITION;
    default:
      return HURRAY_ERR_INTERNAL;
  }
}

HurrayStatus SetLastError(HurrayStatus status, std::string_view message) {
  // Assigning may allocate; if even that fails, keep the status and lose the message.
  try {
    last_error_message.assign(message);
  } catch (...) {
    last_error_message.clear();
  }
  return status;
}

HurrayStatus SetLastError(const Error& error) {
  return SetLastError(ToCStatus(error.code()), error.message());
}

void ClearLastError() { last_error_message.clear(); }

const char* LastErrorMessage() { return last_error_message.c_str(); }

const char* CurrentFunction() { return current_function; }

void SetCurrentFunction(const char* function) { current_function = function; }

HurrayStatus NullArgument(std::string_view argument) {
  std::string message = current_function;
  message += ": ";
  message += argument;
  message += " is null";
  return SetLastError(HURRAY_ERR_NULL_POINTER, message);
}

}  // namespace hurray::internal
