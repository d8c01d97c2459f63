#include "registry/range_quarantine.h"

#include <utility>

namespace hurray::daemon {

void RangeQuarantine::Open(std::uint64_t hold_id) { holds_.try_emplace(hold_id); }

bool RangeQuarantine::Add(std::uint64_t hold_id, Pool& pool, std::span<const PoolRange> ranges,
                          Charge charge) {
  auto hold = holds_.find(hold_id);
  if (hold == holds_.end()) return false;
  for (const PoolRange& range : ranges) {
    if (range.segment_id == 0) continue;
    hold->second.ranges.push_back(HeldRange{.pool = &pool, .range = range});
    PoolTotals& totals = totals_[&pool];
    totals.bytes += range.size;
    ++totals.ranges;
  }
  hold->second.charges.push_back(charge);
  return true;
}

RangeQuarantine::Released RangeQuarantine::Release(std::uint64_t hold_id) {
  auto hold = holds_.find(hold_id);
  if (hold == holds_.end()) return {};
  Released released{.ranges = std::move(hold->second.ranges),
                    .charges = std::move(hold->second.charges)};
  holds_.erase(hold);
  for (const HeldRange& held : released.ranges) {
    auto totals = totals_.find(held.pool);
    totals->second.bytes -= held.range.size;
    if (--totals->second.ranges == 0) totals_.erase(totals);
  }
  return released;
}

std::vector<std::uint64_t> RangeQuarantine::hold_ids() const {
  std::vector<std::uint64_t> ids;
  ids.reserve(holds_.size());
  for (const auto& [id, hold] : holds_) ids.push_back(id);
  return ids;
}

RangeQuarantine::PoolTotals RangeQuarantine::Totals(const Pool* pool) const {
  auto found = totals_.find(pool);
  return found == totals_.end() ? PoolTotals{} : found->second;
}

}  // namespace hurray::daemon
