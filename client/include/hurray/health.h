// The daemon's health, as its gRPC health service (grpc.health.v1.Health) reports it: what
// systemd's probes, load balancers and `hurrayctl health` ask. Needs no session. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "hurray/error.h"
#include "hurray/export.h"

namespace hurray {

// grpc.health.v1.HealthCheckResponse.ServingStatus.
enum class ServingStatus : std::uint8_t {
  kUnknown,
  kServing,
  kNotServing,
  kServiceUnknown,  // The daemon knows no service of that name.
};

// The status's name as the health protocol spells it: "SERVING", "NOT_SERVING", "UNKNOWN",
// "SERVICE_UNKNOWN".
[[nodiscard]] HURRAY_CXX_EXPORT std::string_view ServingStatusName(ServingStatus status);

// Asks the daemon at `socket_path` (empty: the socket Client::Connect uses by default,
// DefaultSocketPath() in hurray/client.h) whether `service` serves; "" asks for hurrayd as a
// whole, "hurray.v1.Exchange" for the exchange service. Returns the daemon's answer, whatever
// it is. UNAVAILABLE when no daemon answers at the socket, DEADLINE_EXCEEDED when none answered
// within `timeout`, NOT_FOUND when the daemon knows no such service (older daemons answer so
// rather than SERVICE_UNKNOWN), PERMISSION_DENIED when this process may not open the socket.
[[nodiscard]] HURRAY_CXX_EXPORT Result<ServingStatus> CheckHealth(
    std::string_view socket_path = {}, std::string_view service = {},
    std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace hurray
