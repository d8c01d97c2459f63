// TensorView::MapPrivate: a private, copy-on-write mapping of a published host buffer. It
// reads the tensor's own pages, takes writes into this process alone, and leaves the
// published bytes, the view and every other reader as they were; in the CPU pool and in
// the sealed pool (whose memfd the client asks the daemon for again).
#include <cstring>
#include <string>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

constexpr std::uint64_t kSeed = 31;
constexpr std::uint64_t kBytes = 3 * 4096 + 100;  // Not a whole number of pages.

class PrivateMappingTest : public IntegrationTest {
 protected:
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = IntegrationTest::daemon_options();
    options.settings.emplace_back("sealed_pool.capacity = 1048576");
    return options;
  }

  // Publishes kBytes filled with kSeed as `name` in `pool`, after a small tensor that puts
  // it at an offset inside a page, in pools that pack tensors.
  void PublishInside(const std::string& name, const std::string& pool) {
    ASSERT_OK_AND_ASSIGN(WritableTensor small, client().Allocate(MakeByteTensor(100), pool));
    ASSERT_OK(small.Publish(name + "-small"));
    ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client().Allocate(MakeByteTensor(kBytes), pool));
    FillBuffer(tensor.buffer(0), kSeed, 0);
    ASSERT_OK(tensor.Publish(name));
  }

  // Writes through private mappings of `name`'s buffer and checks that nothing else saw it.
  void ExpectWritesStayPrivate(const std::string& name) {
    ASSERT_OK_AND_ASSIGN(TensorView view, client().Acquire(name));
    ASSERT_OK_AND_ASSIGN(PrivateMapping first, view.MapPrivate(0));
    ASSERT_OK_AND_ASSIGN(PrivateMapping second, view.MapPrivate(0));
    ASSERT_EQ(first.bytes().size(), kBytes);
    EXPECT_NE(first.bytes().data(), view.buffer(0).data());
    EXPECT_EQ(CheckBuffer(first.bytes(), kSeed, 0), "") << "a private mapping reads the tensor";

    std::memset(first.bytes().data(), 0x5a, 10);                // The first page.
    std::memset(first.bytes().data() + kBytes - 10, 0xa5, 10);  // The last one.
    EXPECT_EQ(std::to_integer<int>(first.bytes()[0]), 0x5a);
    EXPECT_EQ(std::to_integer<int>(first.bytes()[kBytes - 1]), 0xa5);
    EXPECT_EQ(CheckBuffer(view.buffer(0), kSeed, 0), "") << "the view is unchanged";
    EXPECT_EQ(CheckBuffer(second.bytes(), kSeed, 0), "") << "another private mapping too";

    auto other = Connect("other-reader");
    ASSERT_NE(other, nullptr);
    ASSERT_OK_AND_ASSIGN(TensorView fresh, other->Acquire(name));
    EXPECT_EQ(CheckBuffer(fresh.buffer(0), kSeed, 0), "") << "another reader sees the published";

    PrivateMapping moved = std::move(first);
    EXPECT_EQ(std::to_integer<int>(moved.bytes()[0]), 0x5a);
    EXPECT_TRUE(first.bytes().empty());  // NOLINT(bugprone-use-after-move): moved-from is empty.
  }
};

TEST_F(PrivateMappingTest, WritesToAPrivateMappingOfTheCpuPoolStayInIt) {
  PublishInside("private/cpu", "");
  ExpectWritesStayPrivate("private/cpu");
}

TEST_F(PrivateMappingTest, WritesToAPrivateMappingOfTheSealedPoolStayInIt) {
  PublishInside("private/sealed", "sealed");
  ExpectWritesStayPrivate("private/sealed");
}

TEST_F(PrivateMappingTest, RefusesAnIndexPastTheBuffersAndAnEmptyView) {
  PublishInside("private/refused", "");
  ASSERT_OK_AND_ASSIGN(TensorView view, client().Acquire("private/refused"));
  EXPECT_ERROR(view.MapPrivate(1), StatusCode::kOutOfRange,
               {"buffer index 1 is out of range", "private/refused has 1"});
  ASSERT_OK(view.Release());
  EXPECT_ERROR(view.MapPrivate(0), StatusCode::kFailedPrecondition, {"holds no lease"});
}

}  // namespace
}  // namespace hurray::integration
