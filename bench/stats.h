// Summaries of repeated measurements: median and 99th percentile first, since timings on a
// shared machine have long tails that a mean hides.
#pragma once

#include <cstddef>
#include <vector>

namespace hurray::bench {

// What is reported of a set of samples. All values are in the samples' unit; with no
// samples every value is NaN and count is 0.
struct Summary {
  std::size_t count = 0;
  double median = 0;
  // Nearest-rank 99th percentile: the smallest sample not below 99% of them. With fewer
  // than 100 samples this is the maximum.
  double p99 = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
};

// Summarizes `samples` (any order).
[[nodiscard]] Summary Summarize(std::vector<double> samples);

// The same summary with every value multiplied by `factor` (a unit change).
[[nodiscard]] Summary Scaled(const Summary& summary, double factor);

}  // namespace hurray::bench
