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

#include <cstdint>
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

// What the gRPC side holds, beside Stats: its connections (GrpcListener) and Watch streams.
struct GrpcFigures {
  std::uint64_t connections = 0;          // Open now.
  std::uint64_t refused_connections = 0;  // Since the start.
  std::uint64_t watchers = 0;             // Open now.
};

// hurray_grpc_connections, hurray_refused_grpc_connections_total, hurray_watchers.
[[nodiscard]] std::vector<prometheus::MetricFamily> GrpcFamilies(const GrpcFigures& figures);

class DaemonCollector final : public prometheus::Collectable {
 public:
  using StatsSource = std::function<v1::StatsResponse()>;
  using GrpcSource = std::function<GrpcFigures()>;

  // `grpc` may be null: no GrpcFamilies.
  DaemonCollector(StatsSource stats, const RequestMetrics& metrics, GrpcSource grpc = nullptr)
      : stats_(std::move(stats)), metrics_(metrics), grpc_(std::move(grpc)) {}

  // StatsFamilies of a fresh Stats, then GrpcFamilies, then RequestFamilies.
  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const StatsSource stats_;
  const RequestMetrics& metrics_;
  const GrpcSource grpc_;
};

}  // namespace hurray::daemon
