// PoolSet: the daemon's pools by name, and why it has no CUDA pools when it has none. Filled
// at start-up, read-only afterwards, so thread-safe for lookups once built.
#pragma once

#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "pool/pool.h"

namespace hurray::daemon {

class PoolSet {
 public:
  void Add(std::unique_ptr<Pool> pool) {
    std::string name(pool->name());
    pools_.insert_or_assign(std::move(name), std::move(pool));
  }

  // Why the daemon has no CUDA pools ("the NVIDIA driver is not installed (dlopen
  // libcuda.so.1: ...)"); empty when it has them, or has not looked.
  void SetCudaUnavailableReason(std::string reason) {
    cuda_unavailable_reason_ = std::move(reason);
  }
  [[nodiscard]] const std::string& cuda_unavailable_reason() const {
    return cuda_unavailable_reason_;
  }

  // The pool named `name`, or nullptr.
  [[nodiscard]] Pool* Find(std::string_view name) const {
    auto found = pools_.find(name);
    return found == pools_.end() ? nullptr : found->second.get();
  }

  // The pool named `name` for a request that names it. FAILED_PRECONDITION "pool cuda:0: no
  // CUDA pools: <reason>" for a CUDA pool name ("cuda", "cuda:N") when the daemon has none
  // and said why; otherwise NOT_FOUND for a name no pool has.
  [[nodiscard]] Result<Pool*> Resolve(std::string_view name) const {
    if (Pool* pool = Find(name)) return pool;
    const std::string_view shown = name.substr(0, 64);
    if (!cuda_unavailable_reason_.empty() && (name == "cuda" || name.starts_with("cuda:"))) {
      return FailedPreconditionError(
          fmt::format("pool {}: no CUDA pools: {}", shown, cuda_unavailable_reason_));
    }
    return NotFoundError(fmt::format("pool \"{}\" does not exist", shown));
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
  std::string cuda_unavailable_reason_;
};

}  // namespace hurray::daemon
