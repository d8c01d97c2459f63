#include "watchdog.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

namespace hurray::daemon {

std::optional<std::chrono::microseconds> SystemdWatchdogInterval() {
  std::uint64_t microseconds = 0;
  if (sd_watchdog_enabled(0, &microseconds) <= 0 || microseconds == 0) return std::nullopt;
  return std::chrono::microseconds(microseconds);
}

void SendSystemdWatchdogPing() { sd_notify(0, "WATCHDOG=1"); }

std::unique_ptr<Watchdog> Watchdog::Start(ServingProbe& probe, Options options) {
  std::unique_ptr<Watchdog> watchdog(new Watchdog(probe, std::move(options)));
  watchdog->thread_ = std::thread([raw = watchdog.get()] { raw->Run(); });
  return watchdog;
}

Watchdog::Watchdog(ServingProbe& probe, Options options)
    : probe_(probe), options_(std::move(options)) {}

// Stop() throws only where a mutex or thread cannot be handled (std::system_error), which no
// recovery could follow.
Watchdog::~Watchdog() { Stop(); }  // NOLINT(bugprone-exception-escape)

void Watchdog::Stop() {
  {
    const std::scoped_lock lock(mutex_);
    stopping_ = true;
  }
  stop_changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::Run() {
  const auto period = options_.interval / 2;
  auto next = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    ProbeOnce();
    next += period;
    lock.lock();
    stop_changed_.wait_until(lock, next, [this] { return stopping_; });
  }
}

void Watchdog::ProbeOnce() {
  const Status answered = probe_.Probe(std::chrono::steady_clock::now() + options_.interval / 4);
  if (answered) {
    if (!answering_) spdlog::info("watchdog: hurrayd answers again; WATCHDOG=1 resumes");
    answering_ = true;
    options_.ping();
    return;
  }
  if (answering_) {
    spdlog::warn("watchdog: no WATCHDOG=1 for systemd: {}", answered.error().message());
  }
  answering_ = false;
}

}  // namespace hurray::daemon
