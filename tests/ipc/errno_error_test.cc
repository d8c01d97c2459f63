// The one errno → StatusCode mapping of the tree, and the message of ErrnoError.
#include "hurray/ipc/errno_error.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <initializer_list>

namespace hurray {
namespace {

void ExpectCode(std::initializer_list<int> error_numbers, StatusCode code) {
  for (const int error_number : error_numbers) {
    EXPECT_EQ(CodeForErrno(error_number), code)
        << "errno " << error_number << ": expected " << StatusCodeName(code) << ", got "
        << StatusCodeName(CodeForErrno(error_number));
  }
}

TEST(ErrnoErrorTest, GoneConnectionIsUnavailable) {
  ExpectCode({EPIPE, ECONNRESET, ECONNREFUSED, ECONNABORTED, ENOTCONN, ESHUTDOWN, ETIMEDOUT},
             StatusCode::kUnavailable);
}

TEST(ErrnoErrorTest, LackOfDescriptorsMemoryOrSpaceIsResourceExhausted) {
  ExpectCode({EMFILE, ENFILE, ENOBUFS, ENOMEM, ETOOMANYREFS, ENOSPC, EDQUOT, EFBIG},
             StatusCode::kResourceExhausted);
}

TEST(ErrnoErrorTest, RefusalIsPermissionDenied) {
  ExpectCode({EACCES, EPERM, EROFS}, StatusCode::kPermissionDenied);
}

TEST(ErrnoErrorTest, TakenNameIsAlreadyExists) {
  ExpectCode({EEXIST, EADDRINUSE}, StatusCode::kAlreadyExists);
}

TEST(ErrnoErrorTest, MissingFileIsNotFound) {
  ExpectCode({ENOENT, ENOTDIR}, StatusCode::kNotFound);
}

TEST(ErrnoErrorTest, WrongDescriptorOrPathIsInvalidArgument) {
  ExpectCode({EBADF, ENOTSOCK, ENAMETOOLONG, EISDIR}, StatusCode::kInvalidArgument);
}

TEST(ErrnoErrorTest, AnythingElseIsInternal) {
  ExpectCode({EINVAL, EIO, ENOSYS, 0, -1, 100000}, StatusCode::kInternal);
}

TEST(ErrnoErrorTest, MessageNamesCallPathAndText) {
  const Error error = ErrnoError("open(O_RDONLY)", "/tmp/absent", ENOENT);
  EXPECT_EQ(error.code(), StatusCode::kNotFound);
  EXPECT_EQ(error.message(), "open(O_RDONLY) /tmp/absent: No such file or directory");
}

TEST(ErrnoErrorTest, MessageWithoutPathNamesCallAndText) {
  const Error error = ErrnoError("sendmsg", "", EPIPE);
  EXPECT_EQ(error.code(), StatusCode::kUnavailable);
  EXPECT_EQ(error.message(), "sendmsg: Broken pipe");
}

TEST(ErrnoErrorTest, UnknownErrorNumberStillHasAText) {
  const Error error = ErrnoError("ioctl", "", 100000);
  EXPECT_EQ(error.code(), StatusCode::kInternal);
  EXPECT_EQ(error.message(), "ioctl: Unknown error 100000");
}

TEST(ErrnoErrorTest, LeavesErrnoAlone) {
  errno = EAGAIN;
  (void)ErrnoError("read", "/dev/null", ENOENT);
  EXPECT_EQ(errno, EAGAIN);
}

}  // namespace
}  // namespace hurray
