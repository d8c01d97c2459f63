// The one translation from C++ error codes to C ABI statuses, and the last error that both C
// libraries report through.
#include "hurray/c_abi_internal.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>

#include "hurray/c_abi_private.h"

namespace hurray::internal {
namespace {

TEST(CStatusTest, CodesWithACTwinMapToIt) {
  EXPECT_EQ(ToCStatus(StatusCode::kOk), HURRAY_OK);
  EXPECT_EQ(ToCStatus(StatusCode::kInvalidArgument), HURRAY_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToCStatus(StatusCode::kOutOfRange), HURRAY_ERR_OUT_OF_RANGE);
  EXPECT_EQ(ToCStatus(StatusCode::kResourceExhausted), HURRAY_ERR_RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToCStatus(StatusCode::kNotFound), HURRAY_ERR_NOT_FOUND);
  EXPECT_EQ(ToCStatus(StatusCode::kDeadlineExceeded), HURRAY_ERR_TIMEOUT);
  EXPECT_EQ(ToCStatus(StatusCode::kUnavailable), HURRAY_ERR_UNAVAILABLE);
  EXPECT_EQ(ToCStatus(StatusCode::kPermissionDenied), HURRAY_ERR_PERMISSION_DENIED);
  EXPECT_EQ(ToCStatus(StatusCode::kFailedPrecondition), HURRAY_ERR_FAILED_PRECONDITION);
}

TEST(CStatusTest, RelatedCodesShareATwin) {
  EXPECT_EQ(ToCStatus(StatusCode::kUnauthenticated), HURRAY_ERR_PERMISSION_DENIED);
  EXPECT_EQ(ToCStatus(StatusCode::kCancelled), HURRAY_ERR_UNAVAILABLE);
  EXPECT_EQ(ToCStatus(StatusCode::kAlreadyExists), HURRAY_ERR_FAILED_PRECONDITION);
}

TEST(CStatusTest, DaemonFailuresAreDaemonInternal) {
  for (StatusCode code : {StatusCode::kUnknown, StatusCode::kAborted, StatusCode::kUnimplemented,
                          StatusCode::kInternal}) {
    EXPECT_EQ(ToCStatus(code), HURRAY_ERR_DAEMON_INTERNAL) << StatusCodeName(code);
  }
}

// Every canonical code, in enumeration order, with its C status: a code added to StatusCode
// must be added here, and none may come out as HURRAY_ERR_INTERNAL, which means a misused
// handle and is never the translation of an error.
TEST(CStatusTest, EveryCodeHasItsStatus) {
  const std::pair<StatusCode, HurrayStatus> kExpected[] = {
      {StatusCode::kOk, HURRAY_OK},
      {StatusCode::kCancelled, HURRAY_ERR_UNAVAILABLE},
      {StatusCode::kUnknown, HURRAY_ERR_DAEMON_INTERNAL},
      {StatusCode::kInvalidArgument, HURRAY_ERR_INVALID_ARGUMENT},
      {StatusCode::kDeadlineExceeded, HURRAY_ERR_TIMEOUT},
      {StatusCode::kNotFound, HURRAY_ERR_NOT_FOUND},
      {StatusCode::kAlreadyExists, HURRAY_ERR_FAILED_PRECONDITION},
      {StatusCode::kPermissionDenied, HURRAY_ERR_PERMISSION_DENIED},
      {StatusCode::kResourceExhausted, HURRAY_ERR_RESOURCE_EXHAUSTED},
      {StatusCode::kFailedPrecondition, HURRAY_ERR_FAILED_PRECONDITION},
      {StatusCode::kAborted, HURRAY_ERR_DAEMON_INTERNAL},
      {StatusCode::kOutOfRange, HURRAY_ERR_OUT_OF_RANGE},
      {StatusCode::kUnimplemented, HURRAY_ERR_DAEMON_INTERNAL},
      {StatusCode::kInternal, HURRAY_ERR_DAEMON_INTERNAL},
      {StatusCode::kUnavailable, HURRAY_ERR_UNAVAILABLE},
      {StatusCode::kDataLoss, HURRAY_ERR_DATA_LOSS},
      {StatusCode::kUnauthenticated, HURRAY_ERR_PERMISSION_DENIED},
  };
  int index = 0;
  for (const auto& [code, status] : kExpected) {
    EXPECT_EQ(static_cast<int>(code), index++) << "the table skips a code";
    EXPECT_EQ(ToCStatus(code), status) << StatusCodeName(code);
    EXPECT_NE(ToCStatus(code), HURRAY_ERR_INTERNAL) << StatusCodeName(code);
    EXPECT_STRNE(hurray_status_name(ToCStatus(code)), "HURRAY_ERR_UNKNOWN") << StatusCodeName(code);
  }
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(index)), "UNKNOWN")
      << "StatusCode has a code after UNAUTHENTICATED that the table lacks";
}

TEST(CStatusTest, LastErrorIsPerThreadAndClearable) {
  EXPECT_EQ(SetLastError(Error(StatusCode::kInvalidArgument, "buffer 1: bad")),
            HURRAY_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(hurray_last_error_message()), "buffer 1: bad");
  std::string seen_elsewhere = "unset";
  std::thread([&] { seen_elsewhere = hurray_last_error_message(); }).join();
  EXPECT_EQ(seen_elsewhere, "");
  ClearLastError();
  EXPECT_EQ(std::string(hurray_last_error_message()), "");
}

TEST(CStatusTest, SetLastErrorReportsThroughTheLibrarysChannel) {
  EXPECT_EQ(SetLastError(HURRAY_ERR_TIMEOUT, "model/w: wait ran out"), HURRAY_ERR_TIMEOUT);
  EXPECT_EQ(std::string(hurray_last_error_message()), "model/w: wait ran out");
  EXPECT_EQ(hurray_set_last_error(HURRAY_OK, nullptr), HURRAY_OK);
  EXPECT_EQ(std::string(hurray_last_error_message()), "");
}

TEST(CStatusTest, FailAfterCleanupKeepsTheFailuresMessage) {
  (void)SetLastError(HURRAY_ERR_OUT_OF_RANGE, "buffer 3: past the list");
  bool cleaned = false;
  const HurrayStatus status = FailAfterCleanup(HURRAY_ERR_OUT_OF_RANGE, [&] {
    ClearLastError();  // What a destroy that succeeds does.
    cleaned = true;
  });
  EXPECT_TRUE(cleaned);
  EXPECT_EQ(status, HURRAY_ERR_OUT_OF_RANGE);
  EXPECT_EQ(std::string(hurray_last_error_message()), "buffer 3: past the list");
}

}  // namespace
}  // namespace hurray::internal
