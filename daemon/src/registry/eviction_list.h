// EvictionList: the evictable published versions of each pool, least recently used first.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <unordered_map>

#include "pool/pool.h"

namespace hurray::daemon {

struct TensorVersion;

// The versions published with `evictable` that are still the latest of their name and not
// deleted, in the order they were last used (published or acquired), per pool. The registry
// evicts from the front when an allocation in that pool would otherwise fail; a version
// leaves the list when it is superseded, deleted or evicted (VersionStore keeps it in step).
//
// Holds raw pointers: a version is removed before its record can be reclaimed. Not
// thread-safe: guarded by Registry::mutex_.
class EvictionList {
 public:
  // Adds `version` (of `version->pool`) as the most recently used. Adding it twice is a bug.
  void Add(TensorVersion* version);
  // Moves `version` to the most recently used end; ignores a version not in the list.
  void Touch(TensorVersion* version);
  // Drops `version`; ignores a version not in the list.
  void Remove(TensorVersion* version);
  // The least recently used version of `pool` that has no lease and that `held` (when set)
  // does not say is held otherwise, or null.
  [[nodiscard]] TensorVersion* Oldest(
      const Pool* pool, const std::function<bool(const TensorVersion&)>& held = {}) const;

  [[nodiscard]] std::size_t size() const { return positions_.size(); }

 private:
  using Order = std::list<TensorVersion*>;
  std::map<const Pool*, Order> by_pool_;
  std::unordered_map<const TensorVersion*, Order::iterator> positions_;
};

}  // namespace hurray::daemon
