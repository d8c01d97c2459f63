// The raw unix-socket round trip: the floor of any request and reply between two processes
// on this machine, printed beside every latency figure in the same placement.
//
// Both ends are worker roles of this binary (worker.h):
//   echo-server SOCKET            listens on SOCKET, prints "ready", and echoes every
//                                 kEchoMessageBytes message on each connection until killed
//                                 (a thread per connection);
//   socket-round-trip SOCKET N    N timed round trips (after 100 untimed ones); prints
//                                 "round_trip_ns" samples.
#pragma once

#include <cstddef>

#include "worker.h"

namespace hurray::bench {

// The size of one message: a small request, like an acquire's.
inline constexpr std::size_t kEchoMessageBytes = 64;

[[nodiscard]] int EchoServerRole(const WorkerArgs& args);
[[nodiscard]] int SocketRoundTripRole(const WorkerArgs& args);

}  // namespace hurray::bench
