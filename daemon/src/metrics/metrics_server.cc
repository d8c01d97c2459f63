#include "metrics/metrics_server.h"

#include <fmt/format.h>
#include <prometheus/exposer.h>

#include <exception>
#include <string>
#include <vector>

namespace hurray::daemon {
Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const MetricsAddress& address, std::shared_ptr<prometheus::Collectable> collectable) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", address.ToString(), "num_threads", std::to_string(kMetricsThreads),
        "request_timeout_ms", std::to_string(kMetricsRequestTimeoutMs)});
  } catch (const std::exception& error) {  // civetweb's CivetException: cannot listen.
    return FailedPreconditionError(
        fmt::format("metrics_address {}: cannot listen: {}", address.ToString(), error.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  const auto port = ports.empty() ? address.port : static_cast<std::uint16_t>(ports.front());
  exposer->RegisterCollectable(collectable);
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(exposer), std::move(collectable), port));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                             std::shared_ptr<prometheus::Collectable> collectable,
                             std::uint16_t port)
    : collectable_(std::move(collectable)), exposer_(std::move(exposer)), port_(port) {}

MetricsServer::~MetricsServer() = default;

}  // namespace hurray::daemon
