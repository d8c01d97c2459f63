#include "hurray/health.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <string>

#include "connection.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "hurray/client.h"

namespace hurray {
namespace {

namespace health = grpc::health::v1;

ServingStatus FromProto(health::HealthCheckResponse::ServingStatus status) {
  switch (status) {
    case health::HealthCheckResponse::SERVING:
      return ServingStatus::kServing;
    case health::HealthCheckResponse::NOT_SERVING:
      return ServingStatus::kNotServing;
    case health::HealthCheckResponse::SERVICE_UNKNOWN:
      return ServingStatus::kServiceUnknown;
    default:
      return ServingStatus::kUnknown;
  }
}

}  // namespace

std::string_view ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

Result<ServingStatus> CheckHealth(std::string_view socket_path, std::string_view service,
                                  std::chrono::milliseconds timeout) {
  const std::string path = socket_path.empty() ? DefaultSocketPath() : std::string(socket_path);
  const auto stub = health::Health::NewStub(
      grpc::CreateChannel(fmt::format("unix:{}", path), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  health::HealthCheckRequest request;
  request.set_service(std::string(service));
  health::HealthCheckResponse response;
  if (const grpc::Status status = stub->Check(&context, request, &response); !status.ok()) {
    return std::unexpected(client_internal::FromGrpcStatus(status, "health check"));
  }
  return FromProto(response.status());
}

}  // namespace hurray
