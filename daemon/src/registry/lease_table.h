// LeaseTable: the leases sessions hold on published versions.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "registry/version_store.h"

namespace hurray::daemon {

// A session's hold on a version: while it lasts the version's buffers stay allocated.
struct Lease {
  std::uint64_t session_id = 0;
  TensorVersion* version = nullptr;  // Alive while leased (its lease_count counts this).
};

// Leases by id. The table only records them: the registry keeps each version's
// lease_count and each session's lease ids in step with it.
//
// Not thread-safe: guarded by Registry::mutex_.
class LeaseTable {
 public:
  void Add(std::uint64_t id, Lease lease) { leases_.emplace(id, lease); }
  // The lease `id`, or null.
  [[nodiscard]] const Lease* Find(std::uint64_t id) const {
    auto found = leases_.find(id);
    return found == leases_.end() ? nullptr : &found->second;
  }
  void Remove(std::uint64_t id) { leases_.erase(id); }
  [[nodiscard]] std::size_t size() const { return leases_.size(); }

 private:
  std::unordered_map<std::uint64_t, Lease> leases_;
};

}  // namespace hurray::daemon
