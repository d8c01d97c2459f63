// AllocationTable: the pending (allocated, not yet published) tensors of every session.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "hurray/error.h"
#include "hurray/tensor_descriptor.h"
#include "hurray/v1/exchange.pb.h"
#include "pool/pool.h"
#include "registry/fence_table.h"

namespace hurray::daemon {

// Memory a session reserved for a tensor it has not published yet.
struct Allocation {
  std::uint64_t session_id = 0;
  Pool* pool = nullptr;
  v1::TensorDescriptor descriptor;          // As the request sent it.
  std::vector<v1::BufferLocation> buffers;  // One per descriptor buffer, in table order.
  std::uint64_t byte_size = 0;              // Sum of the buffers' sizes.
  std::uint64_t charged_bytes = 0;          // What quotas count (ChargedBytes).
  // Event mode in a CUDA pool: the fence its producer signals; becomes the version's.
  ReservedFence fence;
};

// What the byte quotas (session_quota, [uid_quota] pending_bytes and published_bytes) count
// for a tensor of `byte_size` buffer bytes whose descriptor encodes in `descriptor_bytes`:
// both, and at least kMinChargedBytes, so that neither a zero-byte tensor nor one that
// carries its weight in metadata is free.
inline constexpr std::uint64_t kMinChargedBytes = 4096;
[[nodiscard]] constexpr std::uint64_t ChargedBytes(std::uint64_t byte_size,
                                                   std::uint64_t descriptor_bytes) {
  const std::uint64_t sum = byte_size + descriptor_bytes;  // Both below 2^62: no overflow.
  return sum < kMinChargedBytes ? kMinChargedBytes : sum;
}

// A range of `pool` for every non-empty buffer of `descriptor` (an empty buffer gets a
// location without a segment), in table order. On failure, the pool's error, and every
// range taken is returned.
[[nodiscard]] Result<std::vector<v1::BufferLocation>> PlaceBuffers(
    Pool& pool, const TensorDescriptor& descriptor);
// Returns every range of `buffers` (from PlaceBuffers) to `pool`.
void FreeBuffers(Pool& pool, const std::vector<v1::BufferLocation>& buffers);

// Seals every non-empty buffer of `allocation` in its pool (Pool::Seal), first to last;
// the first refusal, as "buffer I: ...". Buffers sealed before it stay sealed.
[[nodiscard]] Status SealBuffers(const Allocation& allocation);

// Pending allocations by id. The table only records them: the registry keeps each
// session's allocation ids and pending bytes in step with it, and frees their memory.
//
// Not thread-safe: guarded by Registry::mutex_.
class AllocationTable {
 public:
  void Add(std::uint64_t id, Allocation allocation);
  // The allocation `id` when it belongs to `session_id`; null otherwise.
  [[nodiscard]] Allocation* FindOfSession(std::uint64_t id, std::uint64_t session_id);
  // The allocation `id`, which must exist.
  [[nodiscard]] const Allocation& Get(std::uint64_t id) const { return allocations_.at(id); }
  // Removes the allocation `id` and returns it; nullopt when there is none.
  std::optional<Allocation> Take(std::uint64_t id);
  // Removes the allocation `id`, if there is one.
  void Remove(std::uint64_t id) { allocations_.erase(id); }

  [[nodiscard]] std::size_t size() const { return allocations_.size(); }

 private:
  std::unordered_map<std::uint64_t, Allocation> allocations_;
};

}  // namespace hurray::daemon
