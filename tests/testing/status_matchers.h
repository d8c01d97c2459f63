// Test helpers for Result/Status values: ASSERT_OK, EXPECT_OK, ASSERT_ERROR and friends.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "hurray/error.h"

namespace hurray::testing {

template <typename T>
std::string Describe(const std::expected<T, Error>& result) {
  return result ? std::string("OK") : result.error().ToString();
}

// Whether `result` failed with `code` and a message containing every `fragment`.
template <typename T>
::testing::AssertionResult FailsWith(const std::expected<T, Error>& result, StatusCode code,
                                     std::initializer_list<std::string_view> fragments = {}) {
  if (result) {
    return ::testing::AssertionFailure() << "expected " << StatusCodeName(code) << ", got OK";
  }
  if (result.error().code() != code) {
    return ::testing::AssertionFailure()
           << "expected " << StatusCodeName(code) << ", got " << result.error().ToString();
  }
  for (std::string_view fragment : fragments) {
    if (result.error().message().find(fragment) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << result.error().message() << "\" lacks \"" << fragment << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace hurray::testing

#define ASSERT_OK(expr)                                                  \
  do {                                                                   \
    const auto& hurray_result_ = (expr);                                 \
    ASSERT_TRUE(hurray_result_.has_value())                              \
        << #expr << ": " << ::hurray::testing::Describe(hurray_result_); \
  } while (false)

#define EXPECT_OK(expr)                                                  \
  do {                                                                   \
    const auto& hurray_result_ = (expr);                                 \
    EXPECT_TRUE(hurray_result_.has_value())                              \
        << #expr << ": " << ::hurray::testing::Describe(hurray_result_); \
  } while (false)

// EXPECT_ERROR(result, StatusCode::kInvalidArgument, {"buffers[1]", "alignment 32"})
#define EXPECT_ERROR(expr, code, ...) \
  EXPECT_TRUE(::hurray::testing::FailsWith((expr), (code), ##__VA_ARGS__))
#define ASSERT_ERROR(expr, code, ...) \
  ASSERT_TRUE(::hurray::testing::FailsWith((expr), (code), ##__VA_ARGS__))

// ASSERT_OK_AND_ASSIGN(auto client, Client::Connect(options)): asserts that the Result is
// OK, then declares or assigns `lhs` from its value (moved). Evaluates `expr` once; as any
// ASSERT_*, only in a function that returns void.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  HURRAY_TESTING_ASSERT_OK_AND_ASSIGN_IMPL_(HURRAY_CONCAT_(hurray_result_, __LINE__), lhs, expr)

// `result` is a name and `lhs` may be a declaration: neither can be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define HURRAY_TESTING_ASSERT_OK_AND_ASSIGN_IMPL_(result, lhs, expr)                       \
  auto result = (expr);                                                                    \
  ASSERT_TRUE(result.has_value()) << #expr << ": " << ::hurray::testing::Describe(result); \
  lhs = std::move(result).value()
// NOLINTEND(bugprone-macro-parentheses)
