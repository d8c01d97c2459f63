#include "client_transport.h"

namespace hurray::bench {
namespace {

// True when the client's Options has `hot_path` and HotPath::kGrpc. A template, so that
// the requires-expression is checked on substitution rather than being a hard error.
template <typename Options>
constexpr bool HasHotPathSetting() {
  return requires(Options options) {
    options.hot_path = Options::HotPath::kGrpc;
    Options::HotPath::kSessionSocket;
  };
}

template <typename Options>
std::string DescribeDefault() {
  if constexpr (HasHotPathSetting<Options>()) {
    return Options{}.hot_path == Options::HotPath::kGrpc
               ? "gRPC (Client::Options::hot_path defaults to kGrpc)"
               : "session socket (Client::Options::hot_path defaults to kSessionSocket)";
  } else {
    return "gRPC (this client has no session-socket hot path)";
  }
}

template <typename Options>
Options Forced(Options options, HotPath hot_path) {
  if constexpr (HasHotPathSetting<Options>()) {
    if (hot_path == HotPath::kGrpc) options.hot_path = Options::HotPath::kGrpc;
  }
  return options;
}

}  // namespace

std::string DescribeDefaultHotPath() { return DescribeDefault<Client::Options>(); }

bool CanForceGrpcHotPath() { return HasHotPathSetting<Client::Options>(); }

Client::Options WithHotPath(Client::Options options, HotPath hot_path) {
  return Forced(std::move(options), hot_path);
}

}  // namespace hurray::bench
