// The daemon's Stats as its gRPC reply carries it, for the tests and the benchmark figures
// that read counters the client's DaemonStats does not hold (a CUDA pool's slab mappings,
// its fences). Stats needs no session: this opens no session socket, so it leaves the
// counters it reads as they are.
//
// Stateless functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "hurray/error.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::testing {

// Calls Stats on the daemon at `socket_path` (its gRPC socket), with a 30 s deadline.
// UNAVAILABLE (or gRPC's code) with gRPC's message when the call fails.
[[nodiscard]] Result<v1::StatsResponse> FetchDaemonStats(const std::string& socket_path);

// The pool named `pool` in `stats`. NOT_FOUND naming the pools there are.
[[nodiscard]] Result<v1::PoolStats> FindPool(const v1::StatsResponse& stats, std::string_view pool);

}  // namespace hurray::testing
