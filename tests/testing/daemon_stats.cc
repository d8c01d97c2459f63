#include "testing/daemon_stats.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "hurray/v1/exchange.grpc.pb.h"

namespace hurray::testing {

Result<v1::StatsResponse> FetchDaemonStats(const std::string& socket_path) {
  auto stub = v1::Exchange::NewStub(
      grpc::CreateChannel("unix:" + socket_path, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::StatsResponse response;
  const grpc::Status status = stub->Stats(&context, v1::StatsRequest(), &response);
  if (!status.ok()) {
    return MakeError(static_cast<StatusCode>(status.error_code()),
                     fmt::format("Stats on {}: {}", socket_path, status.error_message()));
  }
  return response;
}

Result<v1::PoolStats> FindPool(const v1::StatsResponse& stats, std::string_view pool) {
  std::string names;
  for (const v1::PoolStats& candidate : stats.pools()) {
    if (candidate.name() == pool) return candidate;
    names += names.empty() ? candidate.name() : ", " + candidate.name();
  }
  return NotFoundError(fmt::format("the daemon has no pool {} (its pools: {})", pool,
                                   names.empty() ? "none" : names));
}

}  // namespace hurray::testing
