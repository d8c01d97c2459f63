// WaitSet: its indexes by name, session and deadline.
#include "registry/wait_set.h"

#include <gtest/gtest.h>

namespace hurray::daemon {
namespace {

using std::chrono::milliseconds;

class WaitSetTest : public ::testing::Test {
 protected:
  // A wait of `session` for `names` until start_ + `after`; it completes when
  // `completes` is true at a publish, recording its id in woken_.
  Wait MakeWait(std::uint64_t session, std::vector<std::string> names, milliseconds after,
                bool completes = true, std::uint64_t id = 0) {
    return Wait{.session_id = session,
                .names = std::move(names),
                .deadline = start_ + after,
                .try_complete =
                    [this, completes, id](Deferred&) {
                      if (completes) woken_.push_back(id);
                      return completes;
                    },
                .fail = [](const Error&) {}};
  }

  static std::vector<std::uint64_t> Sessions(const std::vector<Wait>& waits) {
    std::vector<std::uint64_t> sessions;
    sessions.reserve(waits.size());
    for (const Wait& wait : waits) sessions.push_back(wait.session_id);
    return sessions;
  }

  const Wait::Clock::time_point start_ = Wait::Clock::now();
  WaitSet waits_;
  std::vector<std::uint64_t> woken_;
};

TEST_F(WaitSetTest, ExpiresInDeadlineOrder) {
  EXPECT_FALSE(waits_.NextDeadline());
  EXPECT_TRUE(waits_.Add(1, MakeWait(30, {"a/x"}, milliseconds(30))));
  EXPECT_TRUE(waits_.Add(2, MakeWait(10, {"a/x"}, milliseconds(10))));
  EXPECT_FALSE(waits_.Add(3, MakeWait(20, {"a/y"}, milliseconds(20))));
  EXPECT_EQ(waits_.NextDeadline(), start_ + milliseconds(10));

  EXPECT_TRUE(waits_.TakeExpired(start_ + milliseconds(5)).empty());
  EXPECT_EQ(Sessions(waits_.TakeExpired(start_ + milliseconds(25))),
            (std::vector<std::uint64_t>{10, 20}));
  EXPECT_EQ(waits_.NextDeadline(), start_ + milliseconds(30));
  EXPECT_EQ(waits_.size(), 1u);
  EXPECT_EQ(Sessions(waits_.TakeExpired(start_ + milliseconds(30))),
            (std::vector<std::uint64_t>{30}));
  EXPECT_FALSE(waits_.NextDeadline());
}

TEST_F(WaitSetTest, WakeRemovesOnlyTheWaitsThatComplete) {
  waits_.Add(1, MakeWait(7, {"a/x", "a/y"}, milliseconds(10), true, 1));
  waits_.Add(2, MakeWait(7, {"a/x"}, milliseconds(10), false, 2));
  waits_.Add(3, MakeWait(7, {"a/z"}, milliseconds(10), true, 3));
  Deferred deferred;
  waits_.Wake("a/x", deferred);
  EXPECT_EQ(woken_, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(waits_.size(), 2u);
  waits_.Wake("a/y", deferred);  // Wait 1 is gone from every name it waited for.
  EXPECT_EQ(woken_, (std::vector<std::uint64_t>{1}));
  waits_.Wake("a/z", deferred);
  EXPECT_EQ(woken_, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(waits_.size(), 1u);
}

TEST_F(WaitSetTest, TakeSessionRemovesItsWaitsFromEveryIndex) {
  waits_.Add(1, MakeWait(7, {"a/x"}, milliseconds(10), true, 1));
  waits_.Add(2, MakeWait(8, {"a/x"}, milliseconds(20), true, 2));
  waits_.Add(3, MakeWait(7, {"a/y"}, milliseconds(30), true, 3));
  EXPECT_EQ(Sessions(waits_.TakeSession(7)), (std::vector<std::uint64_t>{7, 7}));
  EXPECT_TRUE(waits_.TakeSession(7).empty());
  EXPECT_EQ(waits_.NextDeadline(), start_ + milliseconds(20));
  Deferred deferred;
  waits_.Wake("a/x", deferred);
  waits_.Wake("a/y", deferred);
  EXPECT_EQ(woken_, (std::vector<std::uint64_t>{2}));
}

TEST_F(WaitSetTest, RemoveTakesAWaitOnce) {
  waits_.Add(1, MakeWait(7, {"a/x"}, milliseconds(10)));
  auto removed = waits_.Remove(1);
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed.value().names, (std::vector<std::string>{"a/x"}));
  EXPECT_FALSE(waits_.Remove(1));
  EXPECT_FALSE(waits_.NextDeadline());
  EXPECT_TRUE(waits_.TakeSession(7).empty());
}

}  // namespace
}  // namespace hurray::daemon
