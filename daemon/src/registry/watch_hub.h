// WatchHub: the watchers of publishes and deletes, by name prefix; WatchQueue: the events
// one watcher has yet to send, bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hurray/error.h"
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

// The events of one watcher not yet sent to its reader, bounded in number and in bytes: a
// reader that falls behind either bound is to be dropped (the stream ends with the error
// Push returns), never queued for without limit. Bytes count each event as its message
// object plus its encoding, so that long names weigh what they hold. Not thread-safe: its
// stream serializes calls.
class WatchQueue {
 public:
  struct Limits {
    std::size_t max_events = 65'536;               // watch_queue_length; at least 1.
    std::size_t max_bytes = std::size_t{1} << 20;  // watch_queue_bytes; at least 1.
  };

  explicit WatchQueue(Limits limits) : limits_(limits) {}

  // Appends `event`; or, when it would take the queue past a bound, queues nothing and
  // returns RESOURCE_EXHAUSTED naming the setting: "watcher fell 65536 events behind and
  // was dropped (watch_queue_length 65536)", "watcher fell 1048576 bytes behind and was
  // dropped (watch_queue_bytes 1048576)". The first event always fits.
  [[nodiscard]] std::optional<Error> Push(v1::WatchEvent event);

  // The oldest event (the one being written); the queue must not be empty.
  [[nodiscard]] const v1::WatchEvent& front() const { return events_.front(); }
  void PopFront();
  // Drops every event but the oldest (which may be being written): a dropped watcher's
  // stream keeps no more than that until it ends.
  void DropAllButFront();

  [[nodiscard]] bool empty() const { return events_.empty(); }
  [[nodiscard]] std::size_t size() const { return events_.size(); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

  // What one queued event counts for.
  [[nodiscard]] static std::size_t CostOf(const v1::WatchEvent& event);

 private:
  const Limits limits_;
  std::deque<v1::WatchEvent> events_;
  std::size_t bytes_ = 0;
};

}  // namespace hurray::daemon
