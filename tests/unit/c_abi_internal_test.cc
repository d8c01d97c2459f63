// The one translation from C++ error codes to C ABI statuses.
#include "hurray/c_abi_internal.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

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

TEST(CStatusTest, EveryOtherCodeIsInternal) {
  for (StatusCode code : {StatusCode::kUnknown, StatusCode::kAborted, StatusCode::kUnimplemented,
                          StatusCode::kInternal, StatusCode::kDataLoss}) {
    EXPECT_EQ(ToCStatus(code), HURRAY_ERR_INTERNAL) << StatusCodeName(code);
  }
}

TEST(CStatusTest, LastErrorIsPerThreadAndClearable) {
  EXPECT_EQ(SetLastError(Error(StatusCode::kInvalidArgument, "buffer 1: bad")),
            HURRAY_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(LastErrorMessage()), "buffer 1: bad");
  std::string seen_elsewhere = "unset";
  std::thread([&] { seen_elsewhere = LastErrorMessage(); }).join();
  EXPECT_EQ(seen_elsewhere, "");
  ClearLastError();
  EXPECT_EQ(std::string(LastErrorMessage()), "");
}

}  // namespace
}  // namespace hurray::internal
