// MetricsServer: serves a Prometheus collectable over HTTP (GET /metrics) on a TCP address,
// with prometheus-cpp's pull Exposer (civetweb, kMetricsThreads threads of its own, each
// serving one connection at a time). A connection that sends nothing for
// kMetricsRequestTimeoutMs is closed, so that a few slow or idle connections cannot keep
// scrapes out for long.
//
// Thread-safe: the exposer's threads call the collectable concurrently with the daemon;
// destroying the server stops them (and no scrape runs after the destructor returns).
#pragma once

#include <prometheus/collectable.h>

#include <cstdint>
#include <memory>

#include "hurray/error.h"
#include "metrics/metrics_address.h"

namespace prometheus {
class Exposer;
}

namespace hurray::daemon {

inline constexpr int kMetricsThreads = 8;
inline constexpr int kMetricsRequestTimeoutMs = 2000;

class MetricsServer {
 public:
  // Listens on `address` and serves `collectable` at /metrics. FAILED_PRECONDITION naming
  // the address when it cannot listen (in use, not an address of this host).
  [[nodiscard]] static Result<std::unique_ptr<MetricsServer>> Start(
      const MetricsAddress& address, std::shared_ptr<prometheus::Collectable> collectable);

  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The port it listens on (the one chosen, for port 0).
  [[nodiscard]] std::uint16_t port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                std::shared_ptr<prometheus::Collectable> collectable, std::uint16_t port);

  // Declared first, destroyed last: the exposer holds only a weak reference to it.
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::uint16_t port_;
};

}  // namespace hurray::daemon
