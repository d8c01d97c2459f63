#include "registry/wait_set.h"

#include <algorithm>

namespace hurray::daemon {

bool WaitSet::Add(std::uint64_t id, Wait wait, const IsPublished& published) {
  std::ranges::sort(wait.names);
  const auto repeated = std::ranges::unique(wait.names);
  wait.names.erase(repeated.begin(), repeated.end());
  wait.missing = 0;
  for (const std::string& name : wait.names) {
    by_name_[name].insert(id);
    if (wait.wake_on == Wait::WakeOn::kAllPublished && !published(name)) ++wait.missing;
  }
  by_session_.emplace(wait.session_id, id);
  ++per_uid_[wait.uid];
  const auto deadline = by_deadline_.emplace(wait.deadline, id).first;
  waits_.emplace(id, std::move(wait));
  return deadline == by_deadline_.begin();
}

std::optional<Wait> WaitSet::Remove(std::uint64_t id) {
  auto found = waits_.find(id);
  if (found == waits_.end()) return std::nullopt;
  return TakeOut(found);
}

Wait WaitSet::TakeOut(std::unordered_map<std::uint64_t, Wait>::iterator found) {
  const std::uint64_t id = found->first;
  Wait wait = std::move(found->second);
  waits_.erase(found);
  for (const std::string& name : wait.names) {
    auto waiting = by_name_.find(name);
    waiting->second.erase(id);
    if (waiting->second.empty()) by_name_.erase(waiting);
  }
  by_session_.erase({wait.session_id, id});
  by_deadline_.erase({wait.deadline, id});
  if (auto uid = per_uid_.find(wait.uid); --uid->second == 0) per_uid_.erase(uid);
  return wait;
}

void WaitSet::SetPublished(std::string_view name, bool published) {
  auto waiting = by_name_.find(name);
  if (waiting == by_name_.end()) return;
  for (std::uint64_t id : waiting->second) {
    Wait& wait = waits_.find(id)->second;
    if (wait.wake_on != Wait::WakeOn::kAllPublished) continue;
    if (!published) {
      ++wait.missing;
    } else if (wait.missing != 0) {
      --wait.missing;
    }
  }
}

void WaitSet::Wake(std::string_view name, Deferred& deferred) {
  auto waiting = by_name_.find(name);
  if (waiting == by_name_.end()) return;
  std::vector<std::uint64_t> candidates;
  for (std::uint64_t id : waiting->second) {
    const Wait& wait = waits_.find(id)->second;
    if (wait.wake_on == Wait::WakeOn::kEveryPublish || wait.missing == 0) {
      candidates.push_back(id);
    }
  }
  // Copied first: each wait that completes is taken out of by_name_ as it goes.
  for (std::uint64_t id : candidates) {
    auto found = waits_.find(id);
    if (found == waits_.end() || !found->second.try_complete(deferred)) continue;
    TakeOut(found);
  }
}

std::vector<Wait> WaitSet::TakeSession(std::uint64_t session_id) {
  std::vector<std::uint64_t> ids;
  for (auto it = by_session_.lower_bound({session_id, 0});
       it != by_session_.end() && it->first == session_id; ++it) {
    ids.push_back(it->second);
  }
  std::vector<Wait> taken;
  taken.reserve(ids.size());
  for (std::uint64_t id : ids) taken.push_back(TakeOut(waits_.find(id)));
  return taken;
}

std::vector<Wait> WaitSet::TakeExpired(Wait::Clock::time_point now) {
  std::vector<Wait> expired;
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    expired.push_back(TakeOut(waits_.find(by_deadline_.begin()->second)));
  }
  return expired;
}

std::optional<Wait::Clock::time_point> WaitSet::NextDeadline() const {
  if (by_deadline_.empty()) return std::nullopt;
  return by_deadline_.begin()->first;
}

std::size_t WaitSet::UidWaits(std::uint32_t uid) const {
  auto found = per_uid_.find(uid);
  return found == per_uid_.end() ? 0 : found->second;
}

}  // namespace hurray::daemon
