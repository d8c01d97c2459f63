// ProcessExitWatch: runs a callback on an io_context once a process has exited (its pidfd
// became readable, session/peer_process.h) and a delay more has passed.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::daemon {

// Watches one process. Move-only; destroying it stops the watch.
//
// Thread-safe: the callback runs on a thread of the io_context, never while the watch's own
// lock is held; the watch may be destroyed from any thread (from its own callback too). A
// callback that had already begun, or was about to, when the watch was destroyed may still
// run: it must check, under its owner's lock, that what it serves still exists.
class ProcessExitWatch {
 public:
  // Watches the process `pidfd` names: `exited` runs once, on `io`, `delay` after it has
  // exited (at once for a delay of 0; soon for a process gone already). INTERNAL when the
  // descriptor cannot be registered with `io` (then nothing runs). `io` must outlive the
  // watch's pending handlers.
  [[nodiscard]] static Result<ProcessExitWatch> Start(boost::asio::io_context& io, UniqueFd pidfd,
                                                      std::chrono::milliseconds delay,
                                                      std::function<void()> exited);

  ProcessExitWatch(ProcessExitWatch&&) noexcept = default;
  ProcessExitWatch& operator=(ProcessExitWatch&&) noexcept;
  ProcessExitWatch(const ProcessExitWatch&) = delete;
  ProcessExitWatch& operator=(const ProcessExitWatch&) = delete;
  // Stops the watch: closes the pidfd and cancels the delay.
  ~ProcessExitWatch();

 private:
  class State;
  explicit ProcessExitWatch(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // Shared with the pending handlers, which may run after this object is gone.
  std::shared_ptr<State> state_;
};

}  // namespace hurray::daemon
