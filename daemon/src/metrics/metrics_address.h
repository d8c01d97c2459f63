// MetricsAddress: a TCP address the daemon listens on, as the metrics_address and tcp_address
// settings give it, checked. A plain value; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

// A metrics_address split: "127.0.0.1:9470", "[::1]:9470", "localhost:9470" (the
// loopback address 127.0.0.1), "0.0.0.0:9470" (every interface). Port 0: any free port.
struct MetricsAddress {
  std::string host;  // As civetweb takes it: "127.0.0.1", "[::1]".
  std::uint16_t port = 0;
  bool loopback = false;  // 127.0.0.0/8 or ::1.

  // "host:port", as civetweb's listening_ports takes it.
  [[nodiscard]] std::string ToString() const;
};

// INVALID_ARGUMENT naming `setting` and the value for anything but host:port with a port
// from 0 to 65535 and a host that is an IPv4 address, a bracketed IPv6 address or
// "localhost".
[[nodiscard]] Result<MetricsAddress> ParseTcpAddress(std::string_view text,
                                                     std::string_view setting);

// ParseTcpAddress of the metrics_address setting.
[[nodiscard]] inline Result<MetricsAddress> ParseMetricsAddress(std::string_view text) {
  return ParseTcpAddress(text, "metrics_address");
}

}  // namespace hurray::daemon
