// WatchHub: the watchers of publishes and deletes, by name prefix.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hurray/v1/exchange.pb.h"

namespace hurray::daemon {

// Watchers, each with the name prefix it watches and the callback that receives the
// events of matching names.
//
// Thread-safe: its own mutex guards the watchers, and is held while events are delivered,
// so that every watcher sees every event in the order Deliver was called, and Unwatch
// returns only once no callback of the watcher runs (a callback must therefore not block,
// nor call Watch or Unwatch). Lock order: the caller's mutex (Registry::mutex_), then this
// one.
class WatchHub {
 public:
  using Callback = std::function<void(const v1::WatchEvent&)>;

  // Adds a watcher of the names that start with `prefix`; returns its id (never 0).
  std::uint64_t Watch(std::string prefix, Callback callback);
  // Removes a watcher; unknown ids are ignored.
  void Unwatch(std::uint64_t watch_id);

  // Calls every watcher whose prefix `event.name()` starts with, for each event in turn.
  // `outer`, the lock under which the events happened, is released once this hub's mutex
  // is taken: events of concurrent callers reach watchers in the order of `outer`.
  void Deliver(std::unique_lock<std::mutex>& outer, const std::vector<v1::WatchEvent>& events);

 private:
  struct Watcher {
    std::string prefix;
    Callback callback;
  };

  std::mutex mutex_;
  std::map<std::uint64_t, Watcher> watchers_;  // Guarded by mutex_.
  std::uint64_t next_id_ = 1;                  // Guarded by mutex_.
};

}  // namespace hurray::daemon
