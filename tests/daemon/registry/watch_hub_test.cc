// WatchHub: who gets which events, in which order, and the caller's lock. WatchQueue: a
// slow watcher's events bounded in number and in bytes.
#include "registry/watch_hub.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace hurray::daemon {
namespace {

v1::WatchEvent Published(const std::string& name, std::uint64_t version) {
  v1::WatchEvent event;
  event.set_kind(v1::WatchEvent::KIND_PUBLISHED);
  event.set_name(name);
  event.set_version(version);
  return event;
}

TEST(WatchHubTest, DeliversEventsOfMatchingNamesInOrder) {
  WatchHub hub;
  std::vector<std::string> models;
  std::vector<std::string> everything;
  auto record = [](std::vector<std::string>& seen) {
    return [&seen](const v1::WatchEvent& event) {
      seen.push_back(event.name() + "@" + std::to_string(event.version()));
    };
  };
  const std::uint64_t model_watch = hub.Watch("model/", record(models));
  const std::uint64_t all_watch = hub.Watch("", record(everything));
  EXPECT_NE(model_watch, all_watch);

  std::mutex outer;
  std::unique_lock lock(outer);
  hub.Deliver(lock, {Published("model/a", 1), Published("data/b", 1), Published("model/a", 2)});
  EXPECT_FALSE(lock.owns_lock());
  EXPECT_EQ(models, (std::vector<std::string>{"model/a@1", "model/a@2"}));
  EXPECT_EQ(everything, (std::vector<std::string>{"model/a@1", "data/b@1", "model/a@2"}));

  hub.Unwatch(model_watch);
  hub.Unwatch(12345);  // Unknown: ignored.
  lock.lock();
  hub.Deliver(lock, {Published("model/c", 1)});
  EXPECT_EQ(models.size(), 2u);
  EXPECT_EQ(everything.back(), "model/c@1");
}

TEST(WatchQueueTest, RefusesTheEventBeyondTheLengthNamingTheSetting) {
  WatchQueue queue({.max_events = 2, .max_bytes = 1 << 20});
  EXPECT_FALSE(queue.Push(Published("a/x", 1)));
  EXPECT_FALSE(queue.Push(Published("a/x", 2)));
  const std::optional<Error> overflow = queue.Push(Published("a/x", 3));
  ASSERT_TRUE(overflow);
  EXPECT_EQ(overflow->code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(overflow->message(),
            "watcher fell 2 events behind and was dropped (watch_queue_length 2)");
  EXPECT_EQ(queue.size(), 2u);
  // Written events make room again.
  EXPECT_EQ(queue.front().version(), 1u);
  queue.PopFront();
  EXPECT_FALSE(queue.Push(Published("a/x", 3)));
  EXPECT_EQ(queue.front().version(), 2u);
}

TEST(WatchQueueTest, LongNamesFillTheByteBoundBeforeTheLength) {
  const v1::WatchEvent long_name = Published("a/" + std::string(470, 'n'), 1);
  const std::size_t cost = WatchQueue::CostOf(long_name);
  EXPECT_GT(cost, 470u);
  WatchQueue queue({.max_events = 65'536, .max_bytes = 10 * cost});
  for (int i = 0; i < 10; ++i) ASSERT_FALSE(queue.Push(long_name)) << i;
  EXPECT_EQ(queue.bytes(), 10 * cost);
  const std::optional<Error> overflow = queue.Push(long_name);
  ASSERT_TRUE(overflow);
  EXPECT_EQ(overflow->message(),
            fmt::format("watcher fell {} bytes behind and was dropped (watch_queue_bytes {})",
                        10 * cost, 10 * cost));
  queue.DropAllButFront();  // As a dropped watcher does: only the event being written stays.
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.bytes(), cost);
  queue.PopFront();
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.bytes(), 0u);
}

TEST(WatchQueueTest, TheFirstEventFitsWhateverItsSize) {
  WatchQueue queue({.max_events = 8, .max_bytes = 1});
  EXPECT_FALSE(queue.Push(Published("a/" + std::string(100, 'n'), 1)));
  EXPECT_TRUE(queue.Push(Published("a/y", 1)));
}

}  // namespace
}  // namespace hurray::daemon
