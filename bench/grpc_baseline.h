// The gRPC baselines: the floor of a unary call (an empty one, on the benchmark's own server
// and on hurrayd's channel) and a tensor moved as gRPC bytes.
//
// Worker roles of this binary (worker.h):
//   grpc-server SOCKET BYTES          serves BenchPeer (proto/bench_peer.proto) on SOCKET,
//                                     holding BYTES of the pattern (memory_touch.h); prints
//                                     "ready"; runs until killed;
//   grpc-empty-call SOCKET N SERVICE  N timed unary calls (after 100 untimed ones) on a
//                                     channel like the hurray client's: SERVICE "peer" calls
//                                     BenchPeer/Empty, "health" calls grpc.health.v1
//                                     Health/Check (hurrayd serves it); prints
//                                     "round_trip_ns" samples;
//   grpc-bytes SOCKET BYTES CHUNK R   R times: stream BYTES in CHUNK-byte messages and read
//                                     every byte (checked against the pattern); prints
//                                     "first_ns" (the first stream in this process) and
//                                     "repeat_ns" (each later one).
#pragma once

#include <cstdint>

#include "worker.h"

namespace hurray::bench {

// Bytes per gRPC message of the stream: 1 MiB, a common choice (gRPC's default receive
// limit is 4 MiB).
inline constexpr std::uint64_t kGrpcChunkBytes = std::uint64_t{1} << 20;

[[nodiscard]] int GrpcServerRole(const WorkerArgs& args);
[[nodiscard]] int GrpcEmptyCallRole(const WorkerArgs& args);
[[nodiscard]] int GrpcBytesRole(const WorkerArgs& args);

}  // namespace hurray::bench
