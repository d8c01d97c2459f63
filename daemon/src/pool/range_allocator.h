// RangeAllocator: the bookkeeping of one segment's byte space. No OS calls, no memory of the
// segment itself is touched: it only decides which offsets are free.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace hurray::daemon {

// Hands out granule-aligned byte ranges of a space of `total_bytes` bytes, best fit first,
// and coalesces freed ranges with their free neighbours.
//
// Every range starts at a multiple of the granule and its size is rounded up to a multiple
// of the granule. Allocate picks the smallest free range that fits (ties: the lowest offset)
// and carves the allocation from its start. Allocate and Free cost O(log n) in the number of
// free ranges and live allocations.
//
// The allocator keeps every live allocation, so Free can refuse a range that was never
// allocated (or was already freed) instead of corrupting its free list: a client-facing
// daemon must survive a buggy caller.
//
// Not thread-safe: the owner (a pool) serializes every call.
class RangeAllocator {
 public:
  // `granule` must be a power of two and `total_bytes` a multiple of it (the pool checks
  // both); a total of 0 gives an allocator where nothing fits. All of the space is usable.
  RangeAllocator(std::uint64_t total_bytes, std::uint64_t granule);
  // Only the first `usable_bytes` (a multiple of the granule, at most total_bytes) are free;
  // Extend makes more of the space usable, from the end of what is.
  RangeAllocator(std::uint64_t total_bytes, std::uint64_t granule, std::uint64_t usable_bytes);

  // Copyable and movable: plain bookkeeping.
  RangeAllocator(const RangeAllocator&) = default;
  RangeAllocator& operator=(const RangeAllocator&) = default;
  RangeAllocator(RangeAllocator&&) noexcept = default;
  RangeAllocator& operator=(RangeAllocator&&) noexcept = default;
  ~RangeAllocator() = default;

  // The offset of a new range of `size` bytes rounded up to the granule, or nullopt when
  // `size` is 0 or no free range is large enough.
  [[nodiscard]] std::optional<std::uint64_t> Allocate(std::uint64_t size);

  // Takes the range of `size` bytes (rounded up to the granule) at `offset` as Allocate would
  // have given it: for allocations made by an earlier instance of the space's owner. False,
  // changing nothing, when `size` is 0, `offset` is not a multiple of the granule, or the
  // range is not wholly inside one free range.
  [[nodiscard]] bool Claim(std::uint64_t offset, std::uint64_t size);

  // Returns the range at `offset` that Allocate gave for `size` (the size asked for or the
  // rounded size; both round to the same value). Returns false, changing nothing, when no
  // live allocation of that rounded size starts at `offset`: a double free or a foreign
  // range. The caller logs it.
  [[nodiscard]] bool Free(std::uint64_t offset, std::uint64_t size);

  // Makes bytes [usable_bytes(), usable_end) free, merged with a free range that ends where
  // they begin. `usable_end` must be a multiple of the granule in usable_bytes()..
  // total_bytes() (the pool checks it).
  void Extend(std::uint64_t usable_end);

  // `size` rounded up to a multiple of the granule; nullopt on overflow.
  [[nodiscard]] std::optional<std::uint64_t> RoundUp(std::uint64_t size) const;

  [[nodiscard]] std::uint64_t total_bytes() const { return total_bytes_; }
  [[nodiscard]] std::uint64_t granule() const { return granule_; }
  // The start of the space that is not usable yet; total_bytes() once all of it is.
  [[nodiscard]] std::uint64_t usable_bytes() const { return usable_bytes_; }
  // Sum of the sizes of all free ranges.
  [[nodiscard]] std::uint64_t free_bytes() const { return free_bytes_; }
  // Size of the largest free range (0 when full).
  [[nodiscard]] std::uint64_t largest_free_range() const;
  // Number of maximal free ranges (adjacent free ranges are always merged).
  [[nodiscard]] std::uint64_t free_range_count() const { return free_by_offset_.size(); }
  // The free ranges (offset to size), by offset.
  [[nodiscard]] const std::map<std::uint64_t, std::uint64_t>& free_ranges() const {
    return free_by_offset_;
  }
  // Sum of the rounded sizes of all live allocations.
  [[nodiscard]] std::uint64_t allocated_bytes() const { return allocated_bytes_; }
  [[nodiscard]] std::uint64_t allocation_count() const { return allocations_.size(); }

 private:
  void InsertFree(std::uint64_t offset, std::uint64_t size);
  void EraseFree(std::map<std::uint64_t, std::uint64_t>::iterator range);

  std::uint64_t total_bytes_;
  std::uint64_t granule_;
  std::uint64_t usable_bytes_ = 0;
  std::uint64_t free_bytes_ = 0;
  std::uint64_t allocated_bytes_ = 0;
  // Free ranges, offset -> size: finds the neighbours to coalesce with.
  std::map<std::uint64_t, std::uint64_t> free_by_offset_;
  // The same free ranges as (size, offset): the best fit is a lower_bound.
  std::set<std::pair<std::uint64_t, std::uint64_t>> free_by_size_;
  // Live allocations, offset -> rounded size: lets Free verify what it is given.
  std::map<std::uint64_t, std::uint64_t> allocations_;
};

}  // namespace hurray::daemon
