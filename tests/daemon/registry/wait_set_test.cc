// WaitSet: its indexes by name, session and deadline.
#include "registry/wait_set.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

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

  // A batch's wait (WakeOn::kAllPublished) on `names`, which completes when offered.
  Wait MakeBatchWait(std::uint64_t session, std::uint32_t uid, std::vector<std::string> names,
                     std::uint64_t id) {
    Wait wait = MakeWait(session, std::move(names), milliseconds(10), true, id);
    wait.uid = uid;
    wait.wake_on = Wait::WakeOn::kAllPublished;
    wait.try_complete = [this, id](Deferred&) {
      ++offers_;
      woken_.push_back(id);
      return true;
    };
    return wait;
  }

  // Adds `wait` to waits_, the names in published_ counted as published.
  bool Add(std::uint64_t id, Wait wait) {
    return waits_.Add(id, std::move(wait),
                      [this](std::string_view name) { return published_.contains(name); });
  }

  // Publishes `name`: tells waits_ it is present (when it was not) and wakes its waits.
  void Publish(const std::string& name) {
    if (published_.insert(name).second) waits_.SetPublished(name, true);
    Deferred deferred;
    waits_.Wake(name, deferred);
  }
  void Unpublish(const std::string& name) {
    if (published_.erase(name) != 0) waits_.SetPublished(name, false);
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
  std::set<std::string, std::less<>> published_;
  int offers_ = 0;  // try_complete calls of batch waits.
};

TEST_F(WaitSetTest, ExpiresInDeadlineOrder) {
  EXPECT_FALSE(waits_.NextDeadline());
  EXPECT_TRUE(Add(1, MakeWait(30, {"a/x"}, milliseconds(30))));
  EXPECT_TRUE(Add(2, MakeWait(10, {"a/x"}, milliseconds(10))));
  EXPECT_FALSE(Add(3, MakeWait(20, {"a/y"}, milliseconds(20))));
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
  Add(1, MakeWait(7, {"a/x", "a/y"}, milliseconds(10), true, 1));
  Add(2, MakeWait(7, {"a/x"}, milliseconds(10), false, 2));
  Add(3, MakeWait(7, {"a/z"}, milliseconds(10), true, 3));
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
  Add(1, MakeWait(7, {"a/x"}, milliseconds(10), true, 1));
  Add(2, MakeWait(8, {"a/x"}, milliseconds(20), true, 2));
  Add(3, MakeWait(7, {"a/y"}, milliseconds(30), true, 3));
  EXPECT_EQ(Sessions(waits_.TakeSession(7)), (std::vector<std::uint64_t>{7, 7}));
  EXPECT_TRUE(waits_.TakeSession(7).empty());
  EXPECT_EQ(waits_.NextDeadline(), start_ + milliseconds(20));
  Deferred deferred;
  waits_.Wake("a/x", deferred);
  waits_.Wake("a/y", deferred);
  EXPECT_EQ(woken_, (std::vector<std::uint64_t>{2}));
}

TEST_F(WaitSetTest, RemoveTakesAWaitOnce) {
  Add(1, MakeWait(7, {"a/x"}, milliseconds(10)));
  auto removed = waits_.Remove(1);
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed.value().names, (std::vector<std::string>{"a/x"}));
  EXPECT_FALSE(waits_.Remove(1));
  EXPECT_FALSE(waits_.NextDeadline());
  EXPECT_TRUE(waits_.TakeSession(7).empty());
}

TEST_F(WaitSetTest, BatchIsOfferedOnlyOnceItsLastMissingNameIsPublished) {
  // Listed many times over, each name counts once.
  std::vector<std::string> names(1000, "a/x");
  names.insert(names.end(), {"a/y", "a/y", "a/z"});
  Publish("a/z");
  Add(1, MakeBatchWait(7, 100, names, 1));
  ASSERT_TRUE(waits_.Remove(1));
  EXPECT_TRUE(Add(1, MakeBatchWait(7, 100, names, 1)));
  for (int i = 0; i < 50; ++i) Publish("a/x");  // a/y still missing: never offered.
  EXPECT_EQ(offers_, 0);
  Unpublish("a/x");  // Deleted again: a/x and a/y missing.
  Publish("a/y");
  EXPECT_EQ(offers_, 0);
  Publish("a/x");
  EXPECT_EQ(offers_, 1);
  EXPECT_EQ(woken_, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(waits_.size(), 0u);
  Publish("a/x");  // Gone from every index.
  EXPECT_EQ(offers_, 1);
}

TEST_F(WaitSetTest, KeepsEachListedNameOnce) {
  Add(1, MakeWait(7, {"a/y", "a/x", "a/y", "a/x"}, milliseconds(10)));
  auto removed = waits_.Remove(1);
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->names, (std::vector<std::string>{"a/x", "a/y"}));
}

TEST_F(WaitSetTest, CountsWaitsPerUid) {
  Add(1, MakeBatchWait(7, 100, {"a/x"}, 1));
  Add(2, MakeBatchWait(8, 100, {"a/y"}, 2));
  Add(3, MakeBatchWait(9, 200, {"a/x"}, 3));
  EXPECT_EQ(waits_.UidWaits(100), 2u);
  EXPECT_EQ(waits_.UidWaits(200), 1u);
  EXPECT_EQ(waits_.UidWaits(300), 0u);
  Publish("a/x");  // Completes 1 and 3.
  EXPECT_EQ(waits_.UidWaits(100), 1u);
  EXPECT_EQ(waits_.UidWaits(200), 0u);
  waits_.TakeSession(8);
  EXPECT_EQ(waits_.UidWaits(100), 0u);
}

}  // namespace
}  // namespace hurray::daemon
