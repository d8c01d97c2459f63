// The measuring workers: this same binary started as `hurray_bench worker ROLE ARGS...`,
// one process per client a figure needs, in the figure's placement.
//
// Protocol (stdout, one line each): results as "KEY VALUE" (a number: nanoseconds, a
// count, a checksum), printed after the timed work so printing is never timed; roles that
// start together print "ready" and wait for a "go" line on stdin. Errors go to stderr with
// exit status 1.
//
// The worker-side helpers are for a worker's single thread; WorkerResults is a plain value.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client_transport.h"
#include "hurray/client.h"
#include "hurray/error.h"

namespace hurray::bench {

using WorkerArgs = std::vector<std::string>;

// ---- Worker side ----

// Runs the role named by argv[0] with the rest of argv. Returns the exit status.
[[nodiscard]] int RunWorkerRole(int argc, char** argv);

// Steady-clock time in nanoseconds (CLOCK_MONOTONIC: comparable across processes).
[[nodiscard]] std::int64_t NowNanoseconds();

// Prints "KEY VALUE" for each value.
void EmitValue(std::string_view key, double value);
void EmitSamples(std::string_view key, const std::vector<std::int64_t>& samples);

// Prints "ready", then blocks until the harness writes "go" (exits 1 if stdin closes).
void ReadyThenWaitForGo();

// Prints "hurray_bench worker: WHAT" to stderr and exits 1.
[[noreturn]] void WorkerFail(const std::string& what);

// The value of `result`, or WorkerFail naming `call`.
template <typename T>
T CheckOk(Result<T> result, std::string_view call) {
  if (!result) WorkerFail(std::string(call) + ": " + result.error().ToString());
  return std::move(*result);
}
void CheckOk(const Status& status, std::string_view call);

// args[index] as a number, or WorkerFail.
[[nodiscard]] std::uint64_t ArgNumber(const WorkerArgs& args, std::size_t index,
                                      std::string_view what);
[[nodiscard]] const std::string& Arg(const WorkerArgs& args, std::size_t index,
                                     std::string_view what);

// A client of the daemon at `socket`, its gRPC channel already connected (a Stats call),
// so that the first timed call pays for the call, not for the channel's set-up.
[[nodiscard]] std::unique_ptr<Client> ConnectWarm(const std::string& socket, std::string_view role,
                                                  ClientPath path = ClientPath::kDefault);

// A dense uint8 tensor of `bytes` bytes (one buffer).
[[nodiscard]] TensorDescriptor BytesTensor(std::uint64_t bytes);

// ---- Harness side ----

// What a worker printed: every value of each key, in order.
struct WorkerResults {
  std::map<std::string, std::vector<double>> values;

  // The values of `key` (empty when none).
  [[nodiscard]] const std::vector<double>& Values(const std::string& key) const;
  // The one value of `key`; NaN when absent.
  [[nodiscard]] double Single(const std::string& key) const;
  // Appends every value of `other`.
  void Merge(const WorkerResults& other);
};

// Adds one "KEY VALUE" line to `results`; other lines ("ready") are ignored.
void ParseWorkerLine(const std::string& line, WorkerResults& results);

}  // namespace hurray::bench
