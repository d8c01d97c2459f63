// Error values and the Result type used by every fallible call in hurray.
//
// Codes are the gRPC canonical status codes, so a service maps them one to one. Messages
// name the field and the value that was wrong ("buffer 1: alignment 32 is below the
// minimum 64").
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

#include "hurray/export.h"

namespace hurray {

// The gRPC canonical status codes, with their gRPC numeric values.
enum class StatusCode : std::uint8_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// The canonical upper-case name of a code ("INVALID_ARGUMENT").
[[nodiscard]] HURRAY_CXX_EXPORT std::string_view StatusCodeName(StatusCode code);

// A failed call: a canonical code and a message for humans. Immutable value; thread-safe.
class HURRAY_CXX_EXPORT Error {
 public:
  Error(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  [[nodiscard]] StatusCode code() const { return code_; }
  [[nodiscard]] const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: buffer 1: alignment 32 is below the minimum 64".
  [[nodiscard]] std::string ToString() const;

  // The same error with "context: " put in front of the message.
  [[nodiscard]] Error WithContext(std::string_view context) const;

  friend bool operator==(const Error&, const Error&) = default;

 private:
  StatusCode code_;
  std::string message_;
};

// The value of a fallible call, or why it failed.
template <typename T>
using Result = std::expected<T, Error>;

// The outcome of a fallible call with no value.
using Status = std::expected<void, Error>;

// Shorthands that build an unexpected Error of the given code, one for each code a hurray
// call returns: `return NotFoundError(fmt::format("no tensor {}", name));`.
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> MakeError(StatusCode code,
                                                                 std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> CancelledError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> UnknownError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> InvalidArgumentError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> DeadlineExceededError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> NotFoundError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> AlreadyExistsError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> PermissionDeniedError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> ResourceExhaustedError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> FailedPreconditionError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> AbortedError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> OutOfRangeError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> UnimplementedError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> InternalError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> UnavailableError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> DataLossError(std::string message);
[[nodiscard]] HURRAY_CXX_EXPORT std::unexpected<Error> UnauthenticatedError(std::string message);

}  // namespace hurray

// Propagation, as Arrow's ARROW_RETURN_NOT_OK and ARROW_ASSIGN_OR_RAISE. Each evaluates its
// expression once; the enclosing function must return a Result<U> or a Status.
//
//   HURRAY_RETURN_IF_ERROR(Validate(request));            // a Status, or a Result<T>
//   HURRAY_ASSIGN_OR_RETURN(auto pool, pools.Find(name)); // declares or assigns `pool`
//
// The error is returned unchanged; to add context, test the result by hand and use
// Error::WithContext.
#define HURRAY_RETURN_IF_ERROR(expression)                       \
  do {                                                           \
    if (auto&& hurray_status_ = (expression); !hurray_status_) { \
      return std::unexpected(std::move(hurray_status_).error()); \
    }                                                            \
  } while (false)

#define HURRAY_ASSIGN_OR_RETURN(lhs, expression) \
  HURRAY_ASSIGN_OR_RETURN_IMPL_(HURRAY_CONCAT_(hurray_result_, __LINE__), lhs, expression)

#define HURRAY_CONCAT_INNER_(a, b) a##b
#define HURRAY_CONCAT_(a, b) HURRAY_CONCAT_INNER_(a, b)
// `result` is a name and `lhs` may be a declaration ("auto x"): neither can be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define HURRAY_ASSIGN_OR_RETURN_IMPL_(result, lhs, expression)    \
  auto result = (expression);                                     \
  if (!result) return std::unexpected(std::move(result).error()); \
  lhs = std::move(result).value()
// NOLINTEND(bugprone-macro-parentheses)
