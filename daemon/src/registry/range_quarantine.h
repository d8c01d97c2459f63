// RangeQuarantine: pool ranges that an ended session's process could still write, kept out
// of use until that process has exited: a dead producer's late GPU work, or a live process's
// CPU writes through a mapping it kept, must not land in a new allocation
// (docs/architecture.md, "Failure behaviour").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "pool/pool.h"

namespace hurray::daemon {

// The ranges held for each ended session whose process has not exited yet (a *hold*, by the
// session's id), and what they are charged to. Pure bookkeeping: it frees nothing and makes
// no system call; the registry returns what Release gives back to the pools and uncharges it.
//
// Not thread-safe: guarded by Registry::mutex_.
class RangeQuarantine {
 public:
  // What a range's bytes stay charged to until it is freed: its uid's pending bytes (an
  // unpublished allocation) or published bytes (a version deleted because its fence was never
  // reached).
  enum class ChargeKind : std::uint8_t { kPending, kPublished };
  struct Charge {
    uid_t uid = 0;
    std::uint64_t bytes = 0;
    ChargeKind kind = ChargeKind::kPending;
  };
  struct HeldRange {
    Pool* pool = nullptr;
    PoolRange range;
  };
  // What a hold held when it was released.
  struct Released {
    std::vector<HeldRange> ranges;
    std::vector<Charge> charges;
  };

  // Opens an empty hold `hold_id` (not open already).
  void Open(std::uint64_t hold_id);
  [[nodiscard]] bool IsOpen(std::uint64_t hold_id) const { return holds_.contains(hold_id); }
  // Takes the non-empty ranges of `ranges` (segment_id 0: an empty buffer, skipped), all of
  // `pool`, and `charge` into the open hold `hold_id`; false, taking nothing, when that hold
  // is not open (the caller frees them itself).
  bool Add(std::uint64_t hold_id, Pool& pool, std::span<const PoolRange> ranges, Charge charge);
  // Closes the hold and returns everything it held; empty for a hold that is not open.
  Released Release(std::uint64_t hold_id);
  // The open holds' ids, in order.
  [[nodiscard]] std::vector<std::uint64_t> hold_ids() const;

  // Bytes (as the ranges were asked for) and ranges held in `pool`, over all holds.
  struct PoolTotals {
    std::uint64_t bytes = 0;
    std::uint64_t ranges = 0;
  };
  [[nodiscard]] PoolTotals Totals(const Pool* pool) const;
  [[nodiscard]] std::size_t hold_count() const { return holds_.size(); }

 private:
  struct Hold {
    std::vector<HeldRange> ranges;
    std::vector<Charge> charges;
  };
  std::map<std::uint64_t, Hold> holds_;
  std::map<const Pool*, PoolTotals> totals_;  // Pools that hold something now.
};

}  // namespace hurray::daemon
