#include "fast_path/lease_scanner.h"

#include <algorithm>
#include <utility>

namespace hurray::daemon::fast_path {

void LeaseScanner::Add(std::uint64_t session_id, uid_t uid, LeasePage page) {
  slots_ += page.slot_count();
  pages_.emplace(session_id, Page{.page = std::move(page), .uid = uid});
  sessions_of_uid_[uid].push_back(session_id);
}

std::uint32_t LeaseScanner::Remove(std::uint64_t session_id) {
  auto found = pages_.find(session_id);
  if (found == pages_.end()) return 0;
  const std::uint32_t slots = found->second.page.slot_count();
  slots_ -= slots;
  if (!found->second.read.empty()) std::erase(read_, &found->second);
  auto sessions = sessions_of_uid_.find(found->second.uid);
  std::erase(sessions->second, session_id);
  if (sessions->second.empty()) sessions_of_uid_.erase(sessions);
  pages_.erase(found);
  return slots;
}

bool LeaseScanner::PageNames(Page& page, std::uint64_t version_id) {
  if (!rescanning_) return page.page.Names(version_id);
  if (page.read.empty()) {
    page.read = page.page.Values();
    std::ranges::sort(page.read);
    read_.push_back(&page);
  }
  return std::ranges::binary_search(page.read, version_id);
}

std::optional<uid_t> LeaseScanner::Names(std::uint64_t version_id,
                                         std::span<const std::uint32_t> granted) {
  ++scans_;
  for (const std::uint32_t uid : granted) {
    auto sessions = sessions_of_uid_.find(uid);
    if (sessions == sessions_of_uid_.end()) continue;
    for (const std::uint64_t session_id : sessions->second) {
      if (PageNames(pages_.at(session_id), version_id)) return uid;
    }
  }
  return std::nullopt;
}

void LeaseScanner::BeginRescan() { rescanning_ = true; }

void LeaseScanner::EndRescan() {
  for (Page* page : read_) page->read = {};
  read_.clear();
  rescanning_ = false;
}

}  // namespace hurray::daemon::fast_path
