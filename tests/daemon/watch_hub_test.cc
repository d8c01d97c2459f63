// WatchHub: who gets which events, in which order, and the caller's lock.
#include "registry/watch_hub.h"

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

}  // namespace
}  // namespace hurray::daemon
