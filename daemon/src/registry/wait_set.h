// WaitSet: the acquires waiting for a tensor to be published, by name, session and deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hurray/error.h"

namespace hurray::daemon {

// Work to run once Registry::mutex_ is released: the callbacks of completed requests.
using Deferred = std::vector<std::function<void()>>;

// An acquire (or batch acquire) waiting for the names it lacks.
struct Wait {
  using Clock = std::chrono::steady_clock;

  // When a wait is offered a publish of one of its names.
  enum class WakeOn : std::uint8_t {
    // At every publish of a name (an acquire waiting for a name, or for one version of it).
    kEveryPublish,
    // Once all its names are published (a batch): each name counts once, however often the
    // request listed it, and a publish that leaves a name still missing costs O(1).
    kAllPublished,
  };

  std::uint64_t session_id = 0;
  std::uint32_t uid = 0;  // The session's peer uid: waits are counted per uid.
  // The names whose publishing may complete it (none for a batch of a prefix alone). Add
  // keeps each once.
  std::vector<std::string> names;
  WakeOn wake_on = WakeOn::kEveryPublish;
  Clock::time_point deadline;
  // Called under Registry::mutex_ when one of `names` is published: completes the wait
  // (queuing its callback into the Deferred) and returns true, or returns false to keep
  // waiting.
  std::function<bool(Deferred&)> try_complete;
  // Ends the wait with an error (its timeout, its session's end); called without the mutex.
  std::function<void(Error)> fail;

  // kAllPublished: how many of `names` have no version that may be acquired (set by Add,
  // kept by SetPublished).
  std::size_t missing = 0;
};

// Waits by id, indexed by the names they wait for, by session and by deadline. Pure
// bookkeeping: the registry arms one timer for NextDeadline() and calls TakeExpired when it
// fires.
//
// Not thread-safe: guarded by Registry::mutex_.
class WaitSet {
 public:
  // Tells whether a name has a version that may be acquired now.
  using IsPublished = std::function<bool(std::string_view)>;

  // Adds `wait` under `id` (not in use), its names kept once each; `published` counts what a
  // kAllPublished wait misses. True when its deadline is now the earliest, so that the
  // caller's timer must be rearmed.
  bool Add(std::uint64_t id, Wait wait, const IsPublished& published);
  // Takes the wait `id` out of every index; nullopt when there is none.
  std::optional<Wait> Remove(std::uint64_t id);

  // Records that `name` now has (or no longer has) a version that may be acquired: the
  // kAllPublished waits for it count one name fewer (or more) missing. O(waits for it).
  void SetPublished(std::string_view name, bool published);
  // Offers the publishing of `name` to each wait for it that may complete (kEveryPublish,
  // or kAllPublished missing nothing), in the order they were added; those whose
  // try_complete returns true are removed.
  void Wake(std::string_view name, Deferred& deferred);
  // Takes out the waits of a session, by id.
  std::vector<Wait> TakeSession(std::uint64_t session_id);
  // Takes out the waits whose deadline is at or before `now`, earliest first.
  std::vector<Wait> TakeExpired(Wait::Clock::time_point now);

  // The earliest deadline of a wait; nullopt when none waits.
  [[nodiscard]] std::optional<Wait::Clock::time_point> NextDeadline() const;
  [[nodiscard]] std::size_t size() const { return waits_.size(); }
  // Waits of the sessions of `uid`.
  [[nodiscard]] std::size_t UidWaits(std::uint32_t uid) const;

 private:
  // Takes the wait at `found` (an entry of waits_) out of every index.
  Wait TakeOut(std::unordered_map<std::uint64_t, Wait>::iterator found);

  std::unordered_map<std::uint64_t, Wait> waits_;
  // Ids only grow, so each set lists its waits in the order they were added.
  std::map<std::string, std::set<std::uint64_t>, std::less<>> by_name_;
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_session_;             // (session, id)
  std::set<std::pair<Wait::Clock::time_point, std::uint64_t>> by_deadline_;  // (deadline, id)
  std::unordered_map<std::uint32_t, std::size_t> per_uid_;  // Uids with waits only.
};

}  // namespace hurray::daemon
