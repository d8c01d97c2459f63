#include "pool/range_allocator.h"

#include <bit>
#include <cassert>
#include <iterator>

#include "hurray/checked_math.h"

namespace hurray::daemon {

RangeAllocator::RangeAllocator(std::uint64_t total_bytes, std::uint64_t granule)
    : RangeAllocator(total_bytes, granule, total_bytes) {}

RangeAllocator::RangeAllocator(std::uint64_t total_bytes, std::uint64_t granule,
                               std::uint64_t usable_bytes)
    : total_bytes_(total_bytes), granule_(granule) {
  assert(std::has_single_bit(granule_));
  assert(total_bytes_ % granule_ == 0);
  Extend(usable_bytes);
}

void RangeAllocator::Extend(std::uint64_t usable_end) {
  assert(usable_end % granule_ == 0);
  assert(usable_end >= usable_bytes_ && usable_end <= total_bytes_);
  if (usable_end == usable_bytes_) return;
  std::uint64_t start = usable_bytes_;
  usable_bytes_ = usable_end;
  // The free range that reaches the old end, if any, is the last one.
  if (!free_by_offset_.empty()) {
    const auto last = std::prev(free_by_offset_.end());
    if (last->first + last->second == start) {
      start = last->first;
      EraseFree(last);
    }
  }
  InsertFree(start, usable_end - start);
}

std::optional<std::uint64_t> RangeAllocator::RoundUp(std::uint64_t size) const {
  return internal::CheckedRoundUp(size, granule_);
}

std::uint64_t RangeAllocator::largest_free_range() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

bool RangeAllocator::Claim(std::uint64_t offset, std::uint64_t size) {
  const std::optional<std::uint64_t> rounded = RoundUp(size);
  if (size == 0 || !rounded || offset % granule_ != 0) return false;
  // The free range that starts at or before `offset`.
  auto containing = free_by_offset_.upper_bound(offset);
  if (containing == free_by_offset_.begin()) return false;
  --containing;
  const auto [start, length] = *containing;
  if (offset - start > length || *rounded > length - (offset - start)) return false;
  EraseFree(containing);
  if (offset > start) InsertFree(start, offset - start);
  const std::uint64_t end = offset + *rounded;
  if (end < start + length) InsertFree(end, start + length - end);
  allocations_.emplace(offset, *rounded);
  allocated_bytes_ += *rounded;
  return true;
}

std::optional<std::uint64_t> RangeAllocator::Allocate(std::uint64_t size) {
  if (size == 0 || size > total_bytes_) return std::nullopt;
  const std::optional<std::uint64_t> rounded = RoundUp(size);
  if (!rounded) return std::nullopt;

  // Smallest free range of at least `rounded` bytes; among equals, the lowest offset.
  const auto best = free_by_size_.lower_bound({*rounded, 0});
  if (best == free_by_size_.end()) return std::nullopt;
  const auto [range_size, offset] = *best;

  EraseFree(free_by_offset_.find(offset));
  if (range_size > *rounded) InsertFree(offset + *rounded, range_size - *rounded);
  allocations_.emplace(offset, *rounded);
  allocated_bytes_ += *rounded;
  return offset;
}

bool RangeAllocator::Free(std::uint64_t offset, std::uint64_t size) {
  const std::optional<std::uint64_t> rounded = RoundUp(size);
  const auto allocation = allocations_.find(offset);
  if (!rounded || allocation == allocations_.end() || allocation->second != *rounded) {
    return false;
  }
  std::uint64_t start = offset;
  std::uint64_t end = offset + *rounded;

  // Live allocations never overlap free space; if the neighbours say otherwise the state is
  // already broken, and refusing keeps it from getting worse.
  auto right = free_by_offset_.lower_bound(offset);
  auto left = right == free_by_offset_.begin() ? free_by_offset_.end() : std::prev(right);
  if (right != free_by_offset_.end() && right->first < end) return false;
  if (left != free_by_offset_.end() && left->first + left->second > start) return false;

  allocations_.erase(allocation);
  allocated_bytes_ -= *rounded;
  if (right != free_by_offset_.end() && right->first == end) {
    end += right->second;
    EraseFree(right);
  }
  if (left != free_by_offset_.end() && left->first + left->second == start) {
    start = left->first;
    EraseFree(left);
  }
  InsertFree(start, end - start);
  return true;
}

void RangeAllocator::InsertFree(std::uint64_t offset, std::uint64_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
  free_bytes_ += size;
}

void RangeAllocator::EraseFree(std::map<std::uint64_t, std::uint64_t>::iterator range) {
  free_bytes_ -= range->second;
  free_by_size_.erase({range->second, range->first});
  free_by_offset_.erase(range);
}

}  // namespace hurray::daemon
