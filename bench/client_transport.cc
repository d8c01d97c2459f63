#include "client_transport.h"

#include <fmt/format.h>

namespace hurray::bench {

std::string_view ClientPathName(ClientPath path) {
  switch (path) {
    case ClientPath::kDefault:
      return "default";
    case ClientPath::kSlowPath:
      return "slow";
    case ClientPath::kGrpc:
      break;
  }
  return "grpc";
}

Result<ClientPath> ParseClientPath(std::string_view name) {
  for (ClientPath path : {ClientPath::kDefault, ClientPath::kSlowPath, ClientPath::kGrpc}) {
    if (ClientPathName(path) == name) return path;
  }
  return InvalidArgumentError(fmt::format("PATH must be default, slow or grpc, not \"{}\"", name));
}

Client::Options WithClientPath(Client::Options options, ClientPath path) {
  if (path == ClientPath::kDefault) return options;
  options.fast_path = false;
  if (path == ClientPath::kGrpc) options.hot_path = Client::Options::HotPath::kGrpc;
  return options;
}

std::string DescribeDefaultClientPath() {
  const Client::Options defaults;
  const std::string_view channel = defaults.hot_path == Client::Options::HotPath::kGrpc
                                       ? "gRPC (Client::Options::hot_path defaults to kGrpc)"
                                       : "session socket (Client::Options::hot_path defaults to "
                                         "kSessionSocket)";
  return defaults.fast_path
             ? fmt::format(
                   "fast path where it applies (Client::Options::fast_path defaults to "
                   "true), else {}",
                   channel)
             : std::string(channel);
}

}  // namespace hurray::bench
