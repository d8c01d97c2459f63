#include "registry/wait_set.h"

namespace hurray::daemon {

bool WaitSet::Add(std::uint64_t id, Wait wait) {
  for (const std::string& name : wait.names) by_name_.emplace(name, id);
  by_session_.emplace(wait.session_id, id);
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
    auto [begin, end] = by_name_.equal_range(name);
    for (auto it = begin; it != end; ++it) {
      if (it->second == id) {
        by_name_.erase(it);
        break;
      }
    }
  }
  by_session_.erase({wait.session_id, id});
  by_deadline_.erase({wait.deadline, id});
  return wait;
}

void WaitSet::Wake(std::string_view name, Deferred& deferred) {
  std::vector<std::uint64_t> candidates;
  auto [begin, end] = by_name_.equal_range(name);
  for (auto it = begin; it != end; ++it) candidates.push_back(it->second);
  for (std::uint64_t id : candidates) {
    auto found = waits_.find(id);
    if (found == waits_.end() || !found->second.try_complete(deferred)) continue;
    Remove(id);
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

}  // namespace hurray::daemon
