#include "registry/process_exit_watch.h"

#include <fmt/format.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <mutex>
#include <utility>

namespace hurray::daemon {

class ProcessExitWatch::State : public std::enable_shared_from_this<State> {
 public:
  State(boost::asio::io_context& io, std::chrono::milliseconds delay, std::function<void()> exited)
      : delay_(delay), exited_(std::move(exited)), process_(io), delay_timer_(io) {}

  Status Assign(UniqueFd pidfd) {
    std::lock_guard lock(mutex_);
    boost::system::error_code error;
    (void)process_.assign(pidfd.get(), error);  // Returns `error`.
    if (error) return InternalError(fmt::format("watch a pidfd: {}", error.message()));
    (void)pidfd.Release();  // process_ owns it now.
    // A pidfd is readable once its process has exited (a zombie or reaped: either will do).
    process_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                        [self = shared_from_this()](const boost::system::error_code& failed) {
                          self->OnExited(failed);
                        });
    return {};
  }

  void Stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    exited_ = nullptr;
    boost::system::error_code ignored;
    (void)process_.close(ignored);  // Returns `ignored`; the wait sees operation_aborted.
    (void)delay_timer_.cancel();    // The count of handlers it cancelled.
  }

 private:
  void OnExited(const boost::system::error_code& error) {
    std::function<void()> exited;
    {
      std::lock_guard lock(mutex_);
      if (stopped_ || error == boost::asio::error::operation_aborted) return;
      // Another error (none is expected of a pidfd): treated as an exit rather than holding
      // what the callback frees for ever.
      boost::system::error_code ignored;
      (void)process_.close(ignored);  // The descriptor is needed no more.
      if (delay_.count() > 0) {
        delay_timer_.expires_after(delay_);
        delay_timer_.async_wait(
            [self = shared_from_this()](const boost::system::error_code& failed) {
              self->OnDelayOver(failed);
            });
        return;
      }
      exited = std::exchange(exited_, nullptr);
    }
    if (exited) exited();
  }

  void OnDelayOver(const boost::system::error_code& error) {
    std::function<void()> exited;
    {
      std::lock_guard lock(mutex_);
      if (stopped_ || error) return;
      exited = std::exchange(exited_, nullptr);
    }
    if (exited) exited();
  }

  const std::chrono::milliseconds delay_;
  std::mutex mutex_;
  std::function<void()> exited_;                   // Guarded by mutex_; runs once.
  bool stopped_ = false;                           // Guarded by mutex_.
  boost::asio::posix::stream_descriptor process_;  // Guarded by mutex_.
  boost::asio::steady_timer delay_timer_;          // Guarded by mutex_.
};

Result<ProcessExitWatch> ProcessExitWatch::Start(boost::asio::io_context& io, UniqueFd pidfd,
                                                 std::chrono::milliseconds delay,
                                                 std::function<void()> exited) {
  auto state = std::make_shared<State>(io, delay, std::move(exited));
  HURRAY_RETURN_IF_ERROR(state->Assign(std::move(pidfd)));
  return ProcessExitWatch(std::move(state));
}

// NOLINTNEXTLINE(bugprone-exception-escape): a mutex that fails here is fatal anyway.
ProcessExitWatch& ProcessExitWatch::operator=(ProcessExitWatch&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->Stop();
    state_ = std::move(other.state_);
  }
  return *this;
}

// NOLINTNEXTLINE(bugprone-exception-escape): a mutex that fails here is fatal anyway.
ProcessExitWatch::~ProcessExitWatch() {
  if (state_ != nullptr) state_->Stop();
}

}  // namespace hurray::daemon
