// SoakLedger: what the soak's producers said they did ("publishing NAME V", "published
// NAME V", "deleting NAME", "deleted NAME": soak_worker.cc), and so what the daemon must
// hold. A name whose operation was in flight when its producer (or the daemon) was killed
// may hold either outcome; every other name must be exactly as acknowledged.
//
// Not thread-safe: one supervisor thread feeds it and checks with it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/inspection.h"

namespace hurray::soak {

class SoakLedger {
 public:
  // Records one line of a producer's stdout; INVALID_ARGUMENT-style text (non-empty) for a
  // line it cannot read, empty otherwise.
  [[nodiscard]] std::string Record(std::string_view line);

  // Problems of `listed` (every published name under the soak prefix, with its latest
  // version) against the ledger: an acknowledged publish missing or at another version, a
  // deleted name still there, a name no producer published. Empty when all is as recorded.
  [[nodiscard]] std::vector<std::string> Check(const std::vector<TensorSummary>& listed) const;

  [[nodiscard]] std::uint64_t publish_count() const { return publish_count_; }
  [[nodiscard]] std::uint64_t delete_count() const { return delete_count_; }

 private:
  struct Entry {
    std::uint64_t acknowledged = 0;  // Latest acknowledged version; 0: none, or deleted.
    std::uint64_t in_flight = 0;     // Version being published; 0: none.
    bool deleting = false;           // A delete was sent, not yet acknowledged.
    bool deleted = false;            // A delete was acknowledged.
  };
  [[nodiscard]] static std::string CheckEntry(const std::string& name, const Entry& entry,
                                              std::uint64_t latest);

  std::map<std::string, Entry, std::less<>> entries_;
  std::uint64_t publish_count_ = 0;
  std::uint64_t delete_count_ = 0;
};

}  // namespace hurray::soak
