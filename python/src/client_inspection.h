// What the daemon reports (client/include/hurray/inspection.h) as Python objects with the
// same attribute names, and hurray.Watch: an iterator over a watch's events.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "hurray/client.h"

namespace hurray::python {

// The events of one watch, from the client's thread to Python's. Thread-safe.
class WatchQueue {
 public:
  void Push(const WatchEvent& event);
  void End(const Status& status);
  // The next event; nullopt when `timeout` passed first, or when the stream ended
  // (ended() then says how). Waits without the GIL; call it with the GIL released.
  [[nodiscard]] std::optional<WatchEvent> Pop(std::chrono::milliseconds timeout);
  [[nodiscard]] std::optional<Status> ended();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<WatchEvent> events_;
  std::optional<Status> end_;
};

// A running watch: iterate it for events; close() (or leaving the with block) stops it.
class PyWatch {
 public:
  PyWatch(std::shared_ptr<WatchQueue> queue, std::unique_ptr<WatchHandle> handle)
      : queue_(std::move(queue)), handle_(std::move(handle)) {}
  // The next event, or None when `timeout_seconds` passed first (None: wait for ever).
  // StopIteration once the watch stopped; the stream's error raised. Checks signals.
  [[nodiscard]] pybind11::object Next(std::optional<double> timeout_seconds);
  void Close();

 private:
  std::shared_ptr<WatchQueue> queue_;
  std::unique_ptr<WatchHandle> handle_;
};

// Adds the inspection classes and Watch to `module`.
void BindInspection(pybind11::module_& module);

}  // namespace hurray::python
