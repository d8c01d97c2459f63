// Where the daemon, the baseline servers and the measuring clients run during a figure.
//
// On a small machine waking a process on another core dominates a small round trip, so
// every latency figure is taken twice: with the daemon (or the baseline server) and its
// clients pinned to one CPU, and unpinned (the scheduler decides).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace hurray::bench {

enum class Placement : std::uint8_t {
  kPinned,    // Everything on one CPU.
  kUnpinned,  // Every CPU the harness may use.
  kAny,       // A figure that does not depend on placement (memory, counts).
};

// The two placements every latency figure is taken in, in report order.
inline constexpr Placement kBothPlacements[] = {Placement::kPinned, Placement::kUnpinned};

// "pinned", "unpinned", "any": the JSON keys.
[[nodiscard]] constexpr std::string_view PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kPinned:
      return "pinned";
    case Placement::kUnpinned:
      return "unpinned";
    case Placement::kAny:
      break;
  }
  return "any";
}

// The CPU sets of the placements on this machine. Immutable.
struct PlacementCpus {
  std::vector<int> pinned;    // One CPU.
  std::vector<int> unpinned;  // All the harness may use.

  [[nodiscard]] const std::vector<int>& For(Placement placement) const {
    return placement == Placement::kPinned ? pinned : unpinned;
  }
};

}  // namespace hurray::bench
