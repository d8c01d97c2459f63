#include "registry/watch_hub.h"

#include <utility>

#include "registry/tensor_name.h"

namespace hurray::daemon {

std::uint64_t WatchHub::Watch(std::string prefix, Callback callback) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  watchers_.emplace(id, Watcher{.prefix = std::move(prefix), .callback = std::move(callback)});
  return id;
}

void WatchHub::Unwatch(std::uint64_t watch_id) {
  std::lock_guard lock(mutex_);
  watchers_.erase(watch_id);
}

void WatchHub::Deliver(std::unique_lock<std::mutex>& outer,
                       const std::vector<v1::WatchEvent>& events) {
  std::lock_guard lock(mutex_);
  outer.unlock();
  for (const auto& event : events) {
    for (const auto& [id, watcher] : watchers_) {
      if (HasPrefix(event.name(), watcher.prefix)) watcher.callback(event);
    }
  }
}

}  // namespace hurray::daemon
