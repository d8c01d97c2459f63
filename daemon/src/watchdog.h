// Watchdog: systemd's watchdog (WatchdogSec=), fed only while the daemon proves it serves.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "serving_probe.h"

namespace hurray::daemon {

// The interval systemd asks WATCHDOG=1 within (sd_watchdog_enabled: $WATCHDOG_USEC, when
// $WATCHDOG_PID is this process or unset); nullopt when it asks for none. Thread-safe.
[[nodiscard]] std::optional<std::chrono::microseconds> SystemdWatchdogInterval();

// Sends WATCHDOG=1 to $NOTIFY_SOCKET (sd_notify). Thread-safe.
void SendSystemdWatchdogPing();

// A thread that every interval/2 runs the probe with a deadline of interval/4 and calls `ping`
// only when it answered OK in time. When it does not, it pings nothing (systemd then
// restarts the daemon once the interval has passed since the last ping) and logs the
// probe's error once, as a warning; when the probe answers again, it logs that once.
// Thread-safe: Stop() (and the destructor) may be called from any thread but the watchdog's.
class Watchdog {
 public:
  struct Options {
    std::chrono::microseconds interval;  // Above 0: systemd's WatchdogSec.
    std::function<void()> ping;          // Sends WATCHDOG=1; called on the watchdog's thread.
  };

  // Starts the thread; its first probe runs at once. `probe` must outlive the Watchdog.
  [[nodiscard]] static std::unique_ptr<Watchdog> Start(ServingProbe& probe, Options options);

  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Ends the thread promptly (it waits for a probe in progress, which returns by its
  // deadline) and joins it; no ping follows. Idempotent.
  void Stop();

 private:
  Watchdog(ServingProbe& probe, Options options);
  void Run();
  // One probe; a ping when it answered. Logs the change when the answer differs from the last.
  void ProbeOnce();

  ServingProbe& probe_;
  const Options options_;
  bool answering_ = true;  // Whether the last probe answered; the watchdog's thread only.
  std::mutex mutex_;
  std::condition_variable stop_changed_;
  bool stopping_ = false;  // Guarded by mutex_.
  std::thread thread_;
};

}  // namespace hurray::daemon
