#include "metrics/metrics_address.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <charconv>

namespace hurray::daemon {
namespace {

Result<MetricsAddress> Invalid(std::string_view setting, std::string_view text,
                               std::string_view why) {
  return InvalidArgumentError(
      fmt::format(R"({} "{}": {}; expected host:port, e.g. "127.0.0.1:9470")", setting, text, why));
}

}  // namespace

std::string MetricsAddress::ToString() const { return fmt::format("{}:{}", host, port); }

Result<MetricsAddress> ParseTcpAddress(std::string_view text, std::string_view setting) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return Invalid(setting, text, "no port");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return Invalid(setting, text,
                   fmt::format("port \"{}\" is not a number from 0 to 65535", port_text));
  }
  MetricsAddress address{.host = std::string(host), .port = static_cast<std::uint16_t>(port)};
  if (host == "localhost") {
    address.host = "127.0.0.1";
    address.loopback = true;
    return address;
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    const std::string inner(host.substr(1, host.size() - 2));
    in6_addr ip6{};
    if (::inet_pton(AF_INET6, inner.c_str(), &ip6) != 1) {
      return Invalid(setting, text, fmt::format("\"{}\" is not an IPv6 address", inner));
    }
    address.loopback = IN6_IS_ADDR_LOOPBACK(&ip6);
    return address;
  }
  in_addr ip4{};
  if (::inet_pton(AF_INET, address.host.c_str(), &ip4) != 1) {
    return Invalid(setting, text,
                   fmt::format("host \"{}\" is not an IPv4 address, [IPv6] or localhost", host));
  }
  address.loopback = (ntohl(ip4.s_addr) >> 24) == 127;
  return address;
}

}  // namespace hurray::daemon
