// ServingProbe: proof that hurrayd still serves, for the systemd watchdog (watchdog.h).
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <memory>

#include "hurray/error.h"

namespace hurray::daemon {

class Registry;

// Answers whether the daemon serves. Implementations say which threads may call Probe.
class ServingProbe {
 public:
  virtual ~ServingProbe() = default;

  // OK when the daemon answered before `deadline`; otherwise DEADLINE_EXCEEDED saying which
  // part did not. Returns by about `deadline` whatever state the daemon is in.
  [[nodiscard]] virtual Status Probe(std::chrono::steady_clock::time_point deadline) = 0;
};

// The daemon's probe: a task posted to the io_context (the event loop of the session socket,
// of acquire waits and of signals) that calls Registry::Stats, which takes the registry's
// mutex. Answered when the task has run to its end. At most one task is in flight: while an
// earlier one has not run, a probe waits for it rather than posting another, so a stuck loop
// does not pile up tasks. Not thread-safe: one thread (the watchdog's) calls Probe. `io` and
// `registry` must outlive the probe; a task left unrun when the io_context stops is dropped.
class EventLoopRegistryProbe final : public ServingProbe {
 public:
  EventLoopRegistryProbe(boost::asio::io_context& io, const Registry& registry);

  [[nodiscard]] Status Probe(std::chrono::steady_clock::time_point deadline) override;

 private:
  // One posted task: whether it started (the loop ran it) and its end (the registry answered).
  struct Round {
    std::chrono::steady_clock::time_point posted;
    std::atomic<bool> started{false};
    std::promise<void> answered;
  };

  boost::asio::io_context& io_;
  const Registry& registry_;
  std::shared_ptr<Round> round_;  // The task in flight, if any.
  std::future<void> answered_;    // Of round_.
};

}  // namespace hurray::daemon
