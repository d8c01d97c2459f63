// What `hurrayctl top` shows: one screenful rendered from the daemon's stats and its tensors
// (hurray/inspection.h). A pure function; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "hurray/inspection.h"

namespace hurray::ctl {

// The terminal's size in character cells.
struct ScreenSize {
  std::uint32_t rows = 24;
  std::uint32_t columns = 80;
};

// The screen: a summary line (uptime, sessions, leases, pending allocations, tensors and
// versions, the refresh interval and "q quits"), the pool table, then the tensors newest
// first (TensorColumns, ages at `now_nanos`) as many as fit, ending with "... N more" when some
// do not. At most size.rows lines, each cut to size.columns characters, each ending in '\n'.
[[nodiscard]] std::string RenderTopScreen(const DaemonStats& stats,
                                          std::span<const TensorSummary> tensors,
                                          std::int64_t now_nanos, double interval_seconds,
                                          ScreenSize size);

}  // namespace hurray::ctl
