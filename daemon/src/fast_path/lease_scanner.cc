#include "fast_path/lease_scanner.h"

#include <algorithm>
#include <utility>

namespace hurray::daemon::fast_path {

void LeaseScanner::Add(std::uint64_t session_id, LeasePage page) {
  slots_ += page.slot_count();
  pages_.emplace(session_id, std::move(page));
}

std::uint32_t LeaseScanner::Remove(std::uint64_t session_id) {
  auto found = pages_.find(session_id);
  if (found == pages_.end()) return 0;
  const std::uint32_t slots = found->second.slot_count();
  slots_ -= slots;
  pages_.erase(found);
  return slots;
}

bool LeaseScanner::Names(std::uint64_t version_id) {
  ++scans_;
  return std::ranges::any_of(
      pages_, [version_id](const auto& page) { return page.second.Names(version_id); });
}

}  // namespace hurray::daemon::fast_path
