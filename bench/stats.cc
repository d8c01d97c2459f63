#include "stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace hurray::bench {

Summary Summarize(std::vector<double> samples) {
  Summary summary;
  summary.count = samples.size();
  if (samples.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    summary.median = summary.p99 = summary.min = summary.max = summary.mean = nan;
    return summary;
  }
  std::ranges::sort(samples);
  const std::size_t n = samples.size();
  summary.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  const auto rank = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(n)));
  summary.p99 = samples[std::max<std::size_t>(rank, 1) - 1];
  summary.min = samples.front();
  summary.max = samples.back();
  summary.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  return summary;
}

Summary Scaled(const Summary& summary, double factor) {
  Summary scaled = summary;
  scaled.median *= factor;
  scaled.p99 *= factor;
  scaled.min *= factor;
  scaled.max *= factor;
  scaled.mean *= factor;
  return scaled;
}

}  // namespace hurray::bench
