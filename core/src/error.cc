#include "hurray/error.h"

#include <fmt/format.h>

#include <array>

namespace hurray {

std::string_view StatusCodeName(StatusCode code) {
  static constexpr std::array<std::string_view, 17> kNames = {"OK",
                                                              "CANCELLED",
                                                              "UNKNOWN",
                                                              "INVALID_ARGUMENT",
                                                              "DEADLINE_EXCEEDED",
                                                              "NOT_FOUND",
                                                              "ALREADY_EXISTS",
                                                              "PERMISSION_DENIED",
                                                              "RESOURCE_EXHAUSTED",
                                                              "FAILED_PRECONDITION",
                                                              "ABORTED",
                                                              "OUT_OF_RANGE",
                                                              "UNIMPLEMENTED",
                                                              "INTERNAL",
                                                              "UNAVAILABLE",
                                                              "DATA_LOSS",
                                                              "UNAUTHENTICATED"};
  const auto index = static_cast<std::size_t>(code);
  return index < kNames.size() ? kNames[index] : "UNKNOWN";
}

std::string Error::ToString() const {
  return fmt::format("{}: {}", StatusCodeName(code_), message_);
}

Error Error::WithContext(std::string_view context) const {
  return {code_, fmt::format("{}: {}", context, message_)};
}

std::unexpected<Error> MakeError(StatusCode code, std::string message) {
  return std::unexpected(Error(code, std::move(message)));
}
std::unexpected<Error> CancelledError(std::string message) {
  return MakeError(StatusCode::kCancelled, std::move(message));
}
std::unexpected<Error> UnknownError(std::string message) {
  return MakeError(StatusCode::kUnknown, std::move(message));
}
std::unexpected<Error> InvalidArgumentError(std::string message) {
  return MakeError(StatusCode::kInvalidArgument, std::move(message));
}
std::unexpected<Error> DeadlineExceededError(std::string message) {
  return MakeError(StatusCode::kDeadlineExceeded, std::move(message));
}
std::unexpected<Error> NotFoundError(std::string message) {
  return MakeError(StatusCode::kNotFound, std::move(message));
}
std::unexpected<Error> AlreadyExistsError(std::string message) {
  return MakeError(StatusCode::kAlreadyExists, std::move(message));
}
std::unexpected<Error> PermissionDeniedError(std::string message) {
  return MakeError(StatusCode::kPermissionDenied, std::move(message));
}
std::unexpected<Error> ResourceExhaustedError(std::string message) {
  return MakeError(StatusCode::kResourceExhausted, std::move(message));
}
std::unexpected<Error> FailedPreconditionError(std::string message) {
  return MakeError(StatusCode::kFailedPrecondition, std::move(message));
}
std::unexpected<Error> AbortedError(std::string message) {
  return MakeError(StatusCode::kAborted, std::move(message));
}
std::unexpected<Error> OutOfRangeError(std::string message) {
  return MakeError(StatusCode::kOutOfRange, std::move(message));
}
std::unexpected<Error> UnimplementedError(std::string message) {
  return MakeError(StatusCode::kUnimplemented, std::move(message));
}
std::unexpected<Error> InternalError(std::string message) {
  return MakeError(StatusCode::kInternal, std::move(message));
}
std::unexpected<Error> UnavailableError(std::string message) {
  return MakeError(StatusCode::kUnavailable, std::move(message));
}
std::unexpected<Error> DataLossError(std::string message) {
  return MakeError(StatusCode::kDataLoss, std::move(message));
}
std::unexpected<Error> UnauthenticatedError(std::string message) {
  return MakeError(StatusCode::kUnauthenticated, std::move(message));
}

}  // namespace hurray
