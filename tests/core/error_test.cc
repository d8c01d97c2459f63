#include "hurray/error.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "testing/status_matchers.h"

namespace hurray {
namespace {

Result<int> Half(int value) {
  if (value % 2 != 0) return InvalidArgumentError("odd value " + std::to_string(value));
  return value / 2;
}

Status CheckEven(int value) {
  HURRAY_RETURN_IF_ERROR(Half(value));
  return {};
}

Result<int> Quarter(int value) {
  HURRAY_ASSIGN_OR_RETURN(const int half, Half(value));
  HURRAY_ASSIGN_OR_RETURN(const int quarter, Half(half));
  return quarter;
}

Result<std::string> Assigned(int value) {
  int half = -1;
  HURRAY_ASSIGN_OR_RETURN(half, Half(value));
  return std::to_string(half);
}

TEST(ErrorTest, EveryShorthandCarriesItsCode) {
  EXPECT_EQ(CancelledError("m").error().code(), StatusCode::kCancelled);
  EXPECT_EQ(UnknownError("m").error().code(), StatusCode::kUnknown);
  EXPECT_EQ(DeadlineExceededError("m").error().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(AlreadyExistsError("m").error().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(PermissionDeniedError("m").error().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(AbortedError("m").error().code(), StatusCode::kAborted);
  EXPECT_EQ(UnimplementedError("m").error().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(DataLossError("m").error().code(), StatusCode::kDataLoss);
  EXPECT_EQ(UnauthenticatedError("m").error().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(MakeError(StatusCode::kAborted, "why").error(), Error(StatusCode::kAborted, "why"));
  EXPECT_EQ(PermissionDeniedError("no").error().ToString(), "PERMISSION_DENIED: no");
}

TEST(ErrorTest, ReturnIfErrorPassesTheErrorThroughUnchanged) {
  EXPECT_OK(CheckEven(4));
  EXPECT_ERROR(CheckEven(3), StatusCode::kInvalidArgument, {"odd value 3"});
}

TEST(ErrorTest, AssignOrReturnDeclaresOrAssignsAndStopsAtTheFirstError) {
  ASSERT_OK(Quarter(8));
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_ERROR(Quarter(6), StatusCode::kInvalidArgument, {"odd value 3"});
  EXPECT_ERROR(Quarter(5), StatusCode::kInvalidArgument, {"odd value 5"});
  EXPECT_EQ(*Assigned(10), "5");
  EXPECT_ERROR(Assigned(1), StatusCode::kInvalidArgument);
}

TEST(ErrorTest, WithContextPutsTheContextFirst) {
  const Error error = NotFoundError("no tensor a/b").error().WithContext("acquire");
  EXPECT_EQ(error.code(), StatusCode::kNotFound);
  EXPECT_EQ(error.message(), "acquire: no tensor a/b");
}

}  // namespace
}  // namespace hurray
