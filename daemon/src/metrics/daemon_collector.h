// DaemonCollector: the daemon's Prometheus metrics, built at scrape time.
//
// Each scrape reads the registry's Stats (pools, tensors, sessions, the counters of bytes
// and closed sessions) and a snapshot of RequestMetrics, and turns them into metric
// families; nothing is updated on the request path but RequestMetrics' atomics. Names
// follow Prometheus conventions: the `hurray_` prefix, base units (`_bytes`, `_seconds`),
// `_total` on counters. docs/operations.md lists them all.
//
// Thread-safe: Collect may run on any thread (the exposer's), as `stats` must allow;
// `metrics` must outlive the collector.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <vector>

#include "hurray/v1/exchange.pb.h"
#include "metrics/request_metrics.h"

namespace hurray::daemon {

// The families of a Stats reply: per pool (labels pool and kind) and daemon-wide.
[[nodiscard]] std::vector<prometheus::MetricFamily> StatsFamilies(const v1::StatsResponse& stats);

// hurray_requests_total{channel,method,code} and the histogram
// hurray_request_duration_seconds{channel,method}, for every (channel, method) pair that
// ServedOn allows. requests_total shows code "OK" always and other codes once seen.
[[nodiscard]] std::vector<prometheus::MetricFamily> RequestFamilies(const RequestMetrics& metrics);

class DaemonCollector final : public prometheus::Collectable {
 public:
  using StatsSource = std::function<v1::StatsResponse()>;

  DaemonCollector(StatsSource stats, const RequestMetrics& metrics)
      : stats_(std::move(stats)), metrics_(metrics) {}

  // StatsFamilies of a fresh Stats, then RequestFamilies.
  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const StatsSource stats_;
  const RequestMetrics& metrics_;
};

}  // namespace hurray::daemon
