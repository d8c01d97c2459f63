// PoolSet: the daemon's pools by name. Filled at start-up, read-only afterwards, so
// thread-safe for lookups once built.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "pool/pool.h"

namespace hurray::daemon {

class PoolSet {
 public:
  void Add(std::unique_ptr<Pool> pool) {
    std::string name(pool->name());
    pools_.insert_or_assign(std::move(name), std::move(pool));
  }

  // The pool named `name`, or nullptr.
  [[nodiscard]] Pool* Find(std::string_view name) const {
    auto found = pools_.find(name);
    return found == pools_.end() ? nullptr : found->second.get();
  }

  // The pool that holds segment `segment_id`, or nullptr.
  [[nodiscard]] Pool* FindBySegment(std::uint64_t segment_id) const {
    for (const auto& [name, pool] : pools_) {
      if (pool->SegmentSize(segment_id)) return pool.get();
    }
    return nullptr;
  }

  [[nodiscard]] const std::map<std::string, std::unique_ptr<Pool>, std::less<>>& pools() const {
    return pools_;
  }

 private:
  std::map<std::string, std::unique_ptr<Pool>, std::less<>> pools_;
};

}  // namespace hurray::daemon
