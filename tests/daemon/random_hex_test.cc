// RandomHex: the digits it makes, and how it treats getrandom's failures.
#include "random_hex.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

// What the stand-in for getrandom does: fail `failures` times with `error`, then read at
// most `chunk` bytes (of 0xAB) per call.
struct FakeRandom {
  int failures = 0;
  int error = EINTR;
  std::size_t chunk = 1024;
  int calls = 0;
};
FakeRandom fake;

ssize_t ReadFake(void* buffer, std::size_t length, unsigned int /*flags*/) {
  ++fake.calls;
  if (fake.failures > 0) {
    --fake.failures;
    errno = fake.error;
    return -1;
  }
  const std::size_t read = std::min(length, fake.chunk);
  std::memset(buffer, 0xAB, read);
  return static_cast<ssize_t>(read);
}

TEST(RandomHexTest, MakesTwoLowerCaseDigitsPerByte) {
  auto first = RandomHex(16);
  ASSERT_OK(first);
  EXPECT_EQ(first->size(), 32u);
  EXPECT_EQ(first->find_first_not_of("0123456789abcdef"), std::string::npos);
  auto second = RandomHex(16);
  ASSERT_OK(second);
  EXPECT_NE(*first, *second);
}

TEST(RandomHexTest, RetriesInterruptionsAndShortReads) {
  fake = FakeRandom{.failures = kMaxRandomInterruptions, .error = EINTR, .chunk = 3};
  auto hex = RandomHex(8, ReadFake);
  ASSERT_OK(hex);
  EXPECT_EQ(*hex, "abababababababab");
  EXPECT_EQ(fake.calls, kMaxRandomInterruptions + 3);  // 3 + 3 + 2 bytes.
}

TEST(RandomHexTest, GivesUpWhenInterruptionsGoOn) {
  fake = FakeRandom{.failures = 1'000'000, .error = EINTR};
  EXPECT_ERROR(RandomHex(16, ReadFake), StatusCode::kInternal, {"getrandom"});
  EXPECT_EQ(fake.calls, kMaxRandomInterruptions + 1);
}

TEST(RandomHexTest, FailsAtOnceOnAnyOtherError) {
  fake = FakeRandom{.failures = 1, .error = ENOSYS};
  const std::string reason = std::error_code(ENOSYS, std::generic_category()).message();
  EXPECT_ERROR(RandomHex(16, ReadFake), StatusCode::kInternal, {"getrandom", reason});
  EXPECT_EQ(fake.calls, 1);
}

}  // namespace
}  // namespace hurray::daemon
