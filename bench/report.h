// The benchmark's report: figures (summaries of samples, per placement), ratios between
// figures of the same run, the peer's reference figures beside ours, and notes. Printed as a
// table, and written as JSON with stable keys (docs/performance.md describes them).
//
// Not thread-safe; the harness fills it from its main thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "hurray/error.h"
#include "placement.h"
#include "stats.h"

namespace hurray::bench {

// What a figure is. `key` is stable across runs and versions ("size.consumer_steady.4KiB"):
// scripts compare runs by it.
struct FigureSpec {
  std::string key;
  int section = 0;
  std::string label;  // "consumer acquire+release, steady state, 4 KiB"
  std::string unit;   // "us", "ms", "pairs/s", "tensors/s", "B", "B/tensor"
};

// A bound a ratio is held to (a target of docs/performance.md): the ratio must be at most, or
// at least, `value`.
struct Target {
  enum class Kind : std::uint8_t { kAtMost, kAtLeast } kind = Kind::kAtMost;
  double value = 0;

  [[nodiscard]] bool Met(double ratio) const {
    return kind == Kind::kAtMost ? ratio <= value : ratio >= value;
  }
  [[nodiscard]] std::string ToString() const;
};

// The median of `numerator` over the median of `denominator`, in the same placement.
struct RatioSpec {
  std::string key;
  int section = 0;
  std::string label;
  std::string numerator;    // Figure key.
  std::string denominator;  // Figure key.
  std::optional<Target> target;
};

// A figure of the closest peer (Apache Arrow's Plasma store) measured elsewhere (`source` says
// where, and on what machine): a constant, NOT measured here. Compared with the median
// of our figure `ours` in the same placement.
struct PeerReferenceSpec {
  std::string key;
  std::string label;
  std::string unit;
  std::string ours;  // Figure key.
  // The peer's value in each placement; a range (placement unspecified, or "42-55k") is
  // compared at its better end, and the whole range is shown in `source`.
  std::optional<double> pinned;
  std::optional<double> unpinned;
  bool higher_is_better = false;
  std::string source;  // "Plasma get+release: 30.0 us pinned, 20.0 us unpinned (side-by-side ...)".
};

class Report {
 public:
  void SetSectionTitle(int section, std::string title);
  // Run-level facts (machine, date, transport): printed first, and under "run" in the JSON.
  void SetRunFact(const std::string& key, const std::string& value);

  // Adds (or replaces) the figure's summary in `placement`.
  void AddFigure(const FigureSpec& spec, Placement placement, const Summary& summary);
  // Adds a ratio for every placement in which both figures exist.
  void AddRatio(const RatioSpec& spec);
  void AddPeerReference(const PeerReferenceSpec& spec);
  // A line printed under the section's table (a skipped part, a scaled-down size, a fault).
  void AddNote(int section, std::string note);

  // The median of a figure in `placement`; nullopt when it was not measured.
  [[nodiscard]] std::optional<double> Median(const std::string& key, Placement placement) const;

  // The whole report as aligned text tables, section by section.
  void Print(std::ostream& out) const;
  // The same as JSON. INTERNAL when the file cannot be written.
  [[nodiscard]] Status WriteJson(const std::string& path) const;

 private:
  struct Figure {
    FigureSpec spec;
    std::map<Placement, Summary> by_placement;
  };
  struct Ratio {
    RatioSpec spec;
    std::map<Placement, double> by_placement;
  };
  struct PeerReference {
    PeerReferenceSpec spec;
    std::map<Placement, double> ours;
  };

  std::map<int, std::string> section_titles_;
  std::vector<std::pair<std::string, std::string>> run_facts_;
  std::vector<Figure> figures_;  // In the order added.
  std::vector<Ratio> ratios_;
  std::vector<PeerReference> peer_references_;
  std::map<int, std::vector<std::string>> notes_;
};

}  // namespace hurray::bench
