#include "metrics/daemon_collector.h"

#include <limits>
#include <string>
#include <utility>

namespace hurray::daemon {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  return MetricFamily{.name = std::move(name), .help = std::move(help), .type = type, .metric = {}};
}

ClientMetric Value(MetricType type, double value, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric metric;
  metric.label = std::move(labels);
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return metric;
}

// A family of one unlabelled value.
MetricFamily Single(std::string name, std::string help, MetricType type, double value) {
  MetricFamily family = Family(std::move(name), std::move(help), type);
  family.metric.push_back(Value(type, value));
  return family;
}

// A per-pool gauge.
struct PoolGauge {
  const char* name;
  const char* help;
  double (*read)(const v1::PoolStats& pool);
};

constexpr PoolGauge kPoolGauges[] = {
    {"hurray_pool_capacity_bytes", "Bytes the pool may hold.",
     [](const v1::PoolStats& pool) { return static_cast<double>(pool.capacity_bytes()); }},
    {"hurray_pool_reserved_bytes",
     "Bytes of the pool reserved so far (the capacity once the background reservation is "
     "done); only reserved bytes are handed out.",
     [](const v1::PoolStats& pool) { return static_cast<double>(pool.reserved_bytes()); }},
    {"hurray_pool_used_bytes",
     "Bytes of the pool in allocations (pending, published or awaiting reclamation).",
     [](const v1::PoolStats& pool) { return static_cast<double>(pool.used_bytes()); }},
    {"hurray_pool_largest_free_bytes",
     "Bytes of the pool's largest free range: the biggest buffer that fits now.",
     [](const v1::PoolStats& pool) { return static_cast<double>(pool.largest_free_bytes()); }},
    {"hurray_pool_fragmentation_ratio",
     "1 - largest free range / free bytes: 0 when all free space is one range.",
     [](const v1::PoolStats& pool) { return pool.fragmentation(); }},
    {"hurray_pool_allocations", "Buffers currently allocated in the pool.",
     [](const v1::PoolStats& pool) { return static_cast<double>(pool.allocation_count()); }},
    {"hurray_pool_segments", "Segments (CPU) or slabs (CUDA) of the pool.",
     [](const v1::PoolStats& pool) { return static_cast<double>(pool.segment_count()); }},
    {"hurray_pool_quarantined_bytes",
     "Bytes of the pool that ended sessions could still write, kept out of use until their "
     "processes have exited (counted in hurray_pool_used_bytes too).",
     [](const v1::PoolStats& pool) { return static_cast<double>(pool.quarantined_bytes()); }},
};

// A per-uid gauge (StatsResponse.uids).
struct UidGauge {
  const char* name;
  const char* help;
  double (*read)(const v1::UidUsage& usage);
};

constexpr UidGauge kUidGauges[] = {
    {"hurray_uid_pending_bytes", "Bytes of the uid's unpublished allocations.",
     [](const v1::UidUsage& usage) { return static_cast<double>(usage.pending_bytes()); }},
    {"hurray_uid_published_bytes", "Bytes of the versions the uid published that hold memory.",
     [](const v1::UidUsage& usage) { return static_cast<double>(usage.published_bytes()); }},
    {"hurray_uid_leases", "Leases the uid's sessions hold.",
     [](const v1::UidUsage& usage) { return static_cast<double>(usage.leases()); }},
    {"hurray_uid_sessions", "Open sessions of the uid.",
     [](const v1::UidUsage& usage) { return static_cast<double>(usage.sessions()); }},
};

// A daemon-wide value of StatsResponse.
struct DaemonFigure {
  const char* name;
  const char* help;
  MetricType type;
  std::uint64_t (*read)(const v1::StatsResponse& stats);
};

constexpr DaemonFigure kDaemonFigures[] = {
    {"hurray_sessions", "Open sessions.", MetricType::Gauge,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.session_count(); }},
    {"hurray_leases", "Leases held.", MetricType::Gauge,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.lease_count(); }},
    {"hurray_tensors", "Published tensor names.", MetricType::Gauge,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.tensor_count(); }},
    {"hurray_versions", "Live versions across the names (leased old ones included).",
     MetricType::Gauge,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.version_count(); }},
    {"hurray_pending_allocations", "Allocations not yet published.", MetricType::Gauge,
     [](const v1::StatsResponse& stats) -> std::uint64_t {
       return stats.pending_allocation_count();
     }},
    {"hurray_uptime_seconds", "Seconds since the daemon started.", MetricType::Gauge,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.uptime_seconds(); }},
    {"hurray_published_bytes_total", "Bytes of every version published.", MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.published_bytes_total(); }},
    {"hurray_reclaimed_bytes_total",
     "Bytes of versions returned to their pool (superseded or deleted, "
     "after their last lease).",
     MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.reclaimed_bytes_total(); }},
    {"hurray_closed_sessions_total",
     "Sessions ended: their connection closed (exit, crash, disconnect).", MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.closed_session_count(); }},
    {"hurray_refused_connections_total",
     "Session-socket connections refused for exceeding max_sessions or "
     "max_sessions_per_uid.",
     MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t {
       return stats.refused_connection_count();
     }},
    {"hurray_closed_session_leases_total",
     "Leases that sessions still held when they ended, released then.", MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t {
       return stats.closed_session_lease_count();
     }},
    {"hurray_closed_session_allocations_total",
     "Unpublished allocations of ended sessions, freed then.", MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t {
       return stats.closed_session_allocation_count();
     }},
    {"hurray_closed_session_allocation_bytes_total",
     "Bytes of the unpublished allocations of ended sessions.", MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t {
       return stats.closed_session_allocation_bytes();
     }},
    {"hurray_evicted_tensors_total",
     "Evictable versions evicted to make room for an allocation in their "
     "pool.",
     MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.evicted_tensor_count(); }},
    {"hurray_evicted_bytes_total", "Bytes of the versions evicted.", MetricType::Counter,
     [](const v1::StatsResponse& stats) -> std::uint64_t { return stats.evicted_bytes_total(); }},
    {"hurray_earlier_epoch_held_bytes",
     "Bytes of retired versions kept out of use while clients of an earlier daemon may still "
     "map them.",
     MetricType::Gauge,
     [](const v1::StatsResponse& stats) -> std::uint64_t {
       return stats.earlier_epoch_held_bytes();
     }},
};

double Count(std::uint64_t value) { return static_cast<double>(value); }

}  // namespace

std::vector<MetricFamily> StatsFamilies(const v1::StatsResponse& stats) {
  std::vector<MetricFamily> families;
  for (const PoolGauge& gauge : kPoolGauges) {
    MetricFamily family = Family(gauge.name, gauge.help, MetricType::Gauge);
    for (const v1::PoolStats& pool : stats.pools()) {
      family.metric.push_back(
          Value(MetricType::Gauge, gauge.read(pool),
                {{.name = "kind", .value = pool.kind()}, {.name = "pool", .value = pool.name()}}));
    }
    families.push_back(std::move(family));
  }
  for (const UidGauge& uid_gauge : kUidGauges) {
    MetricFamily family = Family(uid_gauge.name, uid_gauge.help, MetricType::Gauge);
    for (const v1::UidUsage& usage : stats.uids()) {
      family.metric.push_back(Value(MetricType::Gauge, uid_gauge.read(usage),
                                    {{.name = "uid", .value = std::to_string(usage.uid())}}));
    }
    families.push_back(std::move(family));
  }
  for (const DaemonFigure& figure : kDaemonFigures) {
    families.push_back(
        Single(figure.name, figure.help, figure.type, static_cast<double>(figure.read(stats))));
  }
  return families;
}

std::vector<MetricFamily> RequestFamilies(const RequestMetrics& metrics) {
  MetricFamily requests = Family("hurray_requests_total",
                                 "Requests answered, by channel (grpc, session), method and "
                                 "status code.",
                                 MetricType::Counter);
  MetricFamily durations = Family("hurray_request_duration_seconds",
                                  "Time from a request's arrival to its answer, by channel and "
                                  "method (Watch: until its stream starts).",
                                  MetricType::Histogram);
  for (std::size_t c = 0; c < kRequestChannelCount; ++c) {
    for (std::size_t m = 0; m < kRequestMethodCount; ++m) {
      const auto channel = static_cast<RequestChannel>(c);
      const auto method = static_cast<RequestMethod>(m);
      if (!ServedOn(channel, method)) continue;
      const RequestMetrics::Counts counts = metrics.Snapshot(channel, method);
      const std::vector<ClientMetric::Label> labels = {
          {.name = "channel", .value = std::string(RequestChannelName(channel))},
          {.name = "method", .value = std::string(RequestMethodName(method))}};
      for (std::size_t code = 0; code < kStatusCodeCount; ++code) {
        if (code != 0 && counts.by_code[code] == 0) continue;
        std::vector<ClientMetric::Label> coded = labels;
        coded.push_back(
            {.name = "code", .value = std::string(StatusCodeName(static_cast<StatusCode>(code)))});
        requests.metric.push_back(
            Value(MetricType::Counter, Count(counts.by_code[code]), std::move(coded)));
      }
      ClientMetric histogram;
      histogram.label = labels;
      std::uint64_t cumulative = 0;
      for (std::size_t b = 0; b < counts.by_bucket.size(); ++b) {
        cumulative += counts.by_bucket[b];
        const double bound = b < kLatencyBucketBoundsNs.size()
                                 ? static_cast<double>(kLatencyBucketBoundsNs[b]) / 1e9
                                 : std::numeric_limits<double>::infinity();
        histogram.histogram.bucket.push_back(
            {.cumulative_count = cumulative, .upper_bound = bound});
      }
      histogram.histogram.sample_count = cumulative;
      histogram.histogram.sample_sum = static_cast<double>(counts.duration_sum_ns) / 1e9;
      durations.metric.push_back(std::move(histogram));
    }
  }
  std::vector<MetricFamily> families;
  families.push_back(std::move(requests));
  families.push_back(std::move(durations));
  return families;
}

std::vector<MetricFamily> GrpcFamilies(const GrpcFigures& figures) {
  std::vector<MetricFamily> families;
  families.push_back(Single("hurray_grpc_connections",
                            "gRPC connections open (unix socket and tcp_address).",
                            MetricType::Gauge, Count(figures.connections)));
  families.push_back(Single("hurray_refused_grpc_connections_total",
                            "gRPC connections closed as they arrived, for exceeding "
                            "max_grpc_connections, max_grpc_connections_per_uid or "
                            "reserved_descriptors.",
                            MetricType::Counter, Count(figures.refused_connections)));
  families.push_back(
      Single("hurray_watchers", "Watch streams open.", MetricType::Gauge, Count(figures.watchers)));
  return families;
}

std::vector<MetricFamily> DaemonCollector::Collect() const {
  std::vector<MetricFamily> families = StatsFamilies(stats_());
  if (grpc_) {
    for (MetricFamily& family : GrpcFamilies(grpc_())) families.push_back(std::move(family));
  }
  for (MetricFamily& family : RequestFamilies(metrics_)) families.push_back(std::move(family));
  return families;
}

}  // namespace hurray::daemon
