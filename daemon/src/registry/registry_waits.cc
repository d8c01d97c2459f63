#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "registry/registry.h"
#include "registry/registry_errors.h"

namespace hurray::daemon {

std::uint64_t Registry::StartWaitLocked(std::unique_lock<std::mutex>& lock,
                                        std::uint64_t session_id, std::vector<std::string> names,
                                        Wait::WakeOn wake_on, std::uint32_t timeout_ms,
                                        std::function<bool(Deferred&)> try_complete,
                                        std::function<void(Error)> fail) {
  const Session* session = sessions_.Find(session_id);
  const std::uint32_t uid = session != nullptr ? session->peer.uid : 0;
  if (const std::size_t waiting = waits_.UidWaits(uid);
      options_.max_waits_per_uid != 0 && waiting >= options_.max_waits_per_uid) {
    lock.unlock();
    fail(ResourceExhaustedError(
             fmt::format("uid {}: max_waits_per_uid {} reached ({} acquires of its sessions are "
                         "already waiting)",
                         uid, options_.max_waits_per_uid, waiting))
             .error());
    return 0;
  }
  const std::uint64_t id = next_id_++;
  const bool earliest =
      waits_.Add(id,
                 Wait{.session_id = session_id,
                      .uid = uid,
                      .names = std::move(names),
                      .wake_on = wake_on,
                      .deadline = Wait::Clock::now() + std::chrono::milliseconds(timeout_ms),
                      .try_complete = std::move(try_complete),
                      .fail = std::move(fail)},
                 [this](std::string_view name) { return versions_.Find(name, 0) != nullptr; });
  if (earliest) ArmWaitTimerLocked();
  return id;
}

void Registry::ArmWaitTimerLocked() {
  const std::optional<Wait::Clock::time_point> next = waits_.NextDeadline();
  if (!next) return;  // A wait still armed finds nothing expired when it fires.
  // A timer armed for this deadline or an earlier one stays: when it fires it fails what has
  // expired and arms for the next deadline. Re-arming it for every new wait (a consumer that
  // waits for each next version, its earlier wait answered) cost the daemon a wake-up of the
  // io_context's thread and a timerfd_settime per wait.
  if (wait_timer_armed_ && *wait_timer_armed_ <= *next) return;
  wait_timer_armed_ = *next;
  // Cancels the wait armed before (its handler sees operation_aborted).
  wait_timer_.expires_at(*next);
  wait_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) OnWaitTimer();
  });
}

void Registry::OnWaitTimer() {
  // Each expired wait with its message, which names what was still missing (a bounded
  // excerpt: a batch may list 100,000 names).
  std::vector<std::pair<Wait, std::string>> expired;
  {
    std::lock_guard lock(mutex_);
    wait_timer_armed_.reset();
    for (Wait& wait : waits_.TakeExpired(Wait::Clock::now())) {
      constexpr std::size_t kShownNames = 8;
      std::string names;
      std::size_t missing = 0;
      for (const std::string& name : wait.names) {
        // A kEveryPublish wait may want a version of a published name: name it regardless.
        if (wait.wake_on == Wait::WakeOn::kAllPublished && versions_.Find(name, 0) != nullptr) {
          continue;
        }
        if (++missing > kShownNames) continue;
        if (!names.empty()) names += ", ";
        names += ShownName(name);
      }
      if (missing > kShownNames) names += fmt::format(" and {} more", missing - kShownNames);
      expired.emplace_back(std::move(wait), names.empty() ? "prefix" : std::move(names));
    }
    ArmWaitTimerLocked();
  }
  for (auto& [wait, names] : expired) {
    wait.fail(
        DeadlineExceededError(fmt::format("not published before the wait timed out: {}", names))
            .error());
  }
}

bool Registry::CancelWait(std::uint64_t wait_id) {
  std::lock_guard lock(mutex_);
  return waits_.Remove(wait_id).has_value();
}

}  // namespace hurray::daemon
