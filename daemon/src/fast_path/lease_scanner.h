// LeaseScanner: the live sessions' lease pages, and the scan the daemon runs over them
// before it frees a retired version.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "fast_path/lease_page.h"

namespace hurray::daemon::fast_path {

// At most one page per session. Names() reads every slot of every page once: a version a
// slot names is pinned, whatever else the pages hold.
//
// Not thread-safe: guarded by Registry::mutex_.
class LeaseScanner {
 public:
  // Adds the page of `session_id`, which has none.
  void Add(std::uint64_t session_id, LeasePage page);
  // Whether `session_id` has a page.
  [[nodiscard]] bool Has(std::uint64_t session_id) const { return pages_.contains(session_id); }
  // Drops the page of `session_id`; returns its slot count (0 when it had none).
  std::uint32_t Remove(std::uint64_t session_id);

  // Whether a slot of any page names `version_id` (not 0). Counted in scans().
  [[nodiscard]] bool Names(std::uint64_t version_id);

  [[nodiscard]] std::uint64_t page_count() const { return pages_.size(); }
  [[nodiscard]] std::uint64_t slot_count() const { return slots_; }
  [[nodiscard]] std::uint64_t scans() const { return scans_; }

 private:
  std::unordered_map<std::uint64_t, LeasePage> pages_;
  std::uint64_t slots_ = 0;  // Over all pages.
  std::uint64_t scans_ = 0;
};

}  // namespace hurray::daemon::fast_path
