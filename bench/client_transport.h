// Which channel the hurray client uses for the hot path (allocate, publish, acquire,
// release), as far as its public API tells.
//
// The session-socket hot path is being added to the client by another change, with a
// `Client::Options::hot_path` setting. This file finds it at compile time, so the harness
// builds against the client with or without it: without it every call goes over gRPC.
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>

#include "hurray/client.h"

namespace hurray::bench {

enum class HotPath : std::uint8_t {
  kClientDefault,  // Whatever the client chooses.
  kGrpc,           // Forced onto gRPC (only when the client can be told).
};

// "session socket" or "gRPC": what the client uses by default, and how that is known.
[[nodiscard]] std::string DescribeDefaultHotPath();

// Whether the client can be told to use gRPC for the hot path.
[[nodiscard]] bool CanForceGrpcHotPath();

// `options` set for `hot_path` (unchanged for kClientDefault, or when the client has no
// such setting).
[[nodiscard]] Client::Options WithHotPath(Client::Options options, HotPath hot_path);

}  // namespace hurray::bench
