#include "registry/watch_hub.h"

#include <fmt/format.h>

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

std::optional<Error> WatchQueue::Push(v1::WatchEvent event) {
  const std::size_t cost = CostOf(event);
  if (events_.size() >= limits_.max_events) {
    return ResourceExhaustedError(
               fmt::format("watcher fell {} events behind and was dropped (watch_queue_length {})",
                           events_.size(), limits_.max_events))
        .error();
  }
  if (!events_.empty() && bytes_ + cost > limits_.max_bytes) {
    return ResourceExhaustedError(
               fmt::format("watcher fell {} bytes behind and was dropped (watch_queue_bytes {})",
                           bytes_, limits_.max_bytes))
        .error();
  }
  bytes_ += cost;
  events_.push_back(std::move(event));
  return std::nullopt;
}

void WatchQueue::PopFront() {
  bytes_ -= CostOf(events_.front());
  events_.pop_front();
}

void WatchQueue::DropAllButFront() {
  while (events_.size() > 1) {
    bytes_ -= CostOf(events_.back());
    events_.pop_back();
  }
}

std::size_t WatchQueue::CostOf(const v1::WatchEvent& event) {
  return sizeof(v1::WatchEvent) + event.ByteSizeLong();
}

}  // namespace hurray::daemon
