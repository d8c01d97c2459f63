#include "hurray/c_abi_internal.h"

#include <fmt/format.h>

#include <string>

#include "hurray/c_abi_private.h"

namespace hurray::internal {
namespace {

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
    case StatusCode::kUnknown:
    case StatusCode::kAborted:
    case StatusCode::kUnimplemented:
    case StatusCode::kInternal:
      return HURRAY_ERR_DAEMON_INTERNAL;
    case StatusCode::kDataLoss:
      return HURRAY_ERR_DATA_LOSS;
  }
  return HURRAY_ERR_DAEMON_INTERNAL;  // A value outside the enumeration.
}

HurrayStatus SetLastError(HurrayStatus status, std::string_view message) {
  // The message crosses as a C string; building it may throw, and then only the status stays.
  try {
    return hurray_set_last_error(status, std::string(message).c_str());
  } catch (...) {
    return hurray_set_last_error(status, nullptr);
  }
}

HurrayStatus SetLastError(const Error& error) {
  return hurray_set_last_error(ToCStatus(error.code()), error.message().c_str());
}

void ClearLastError() { (void)hurray_set_last_error(HURRAY_OK, nullptr); }

const char* CurrentFunction() { return current_function; }

void SetCurrentFunction(const char* function) { current_function = function; }

HurrayStatus NullArgument(std::string_view argument) {
  return SetLastError(HURRAY_ERR_NULL_POINTER,
                      fmt::format("{}: {} is null", current_function, argument));
}

}  // namespace hurray::internal
