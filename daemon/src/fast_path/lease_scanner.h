// LeaseScanner: the live sessions' lease pages, and the scan the daemon runs over them
// before it frees a retired version.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "fast_path/lease_page.h"

namespace hurray::daemon::fast_path {

// At most one page per session, each of its session's peer uid. A slot pins a version only
// for the uids the daemon granted that version (acquire replies carried its identity to a
// session of that uid): an identity copied from the directory, or guessed, pins nothing.
//
// Names() reads the slots of the granted uids' pages only. Between BeginRescan and
// EndRescan, each page is read once (its first Names) and its values kept, sorted: a rescan
// of P pinned versions over pages of S slots costs O(S + P log S), not O(P S).
//
// Not thread-safe: guarded by Registry::mutex_.
class LeaseScanner {
 public:
  // Adds the page of `session_id` (of peer `uid`), which has none.
  void Add(std::uint64_t session_id, uid_t uid, LeasePage page);
  // Whether `session_id` has a page.
  [[nodiscard]] bool Has(std::uint64_t session_id) const { return pages_.contains(session_id); }
  // Drops the page of `session_id`; returns its slot count (0 when it had none).
  std::uint32_t Remove(std::uint64_t session_id);

  // The uid of a page that names `version_id` (not 0) among the pages of `granted` uids;
  // nullopt when none does. Counted in scans().
  [[nodiscard]] std::optional<uid_t> Names(std::uint64_t version_id,
                                           std::span<const std::uint32_t> granted);

  // Within a rescan, each page is read once; EndRescan forgets what was read.
  void BeginRescan();
  void EndRescan();

  [[nodiscard]] std::uint64_t page_count() const { return pages_.size(); }
  [[nodiscard]] std::uint64_t slot_count() const { return slots_; }
  [[nodiscard]] std::uint64_t scans() const { return scans_; }

 private:
  struct Page {
    LeasePage page;
    uid_t uid = 0;
    // Its slots' values, sorted, once read within a rescan (never empty then: a page has a
    // slot at least); empty otherwise.
    std::vector<std::uint64_t> read;
  };

  [[nodiscard]] bool PageNames(Page& page, std::uint64_t version_id);

  std::unordered_map<std::uint64_t, Page> pages_;
  std::unordered_map<uid_t, std::vector<std::uint64_t>> sessions_of_uid_;  // With a page.
  std::vector<Page*> read_;  // The pages read in this rescan.
  bool rescanning_ = false;
  std::uint64_t slots_ = 0;  // Over all pages.
  std::uint64_t scans_ = 0;
};

}  // namespace hurray::daemon::fast_path
