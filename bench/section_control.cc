// Section 3, control plane: what one acquire+release costs a consumer, against the floors
// under it: an empty gRPC call (on the benchmark's own server, and grpc.health.v1 Check on
// hurrayd's own socket) and a raw unix-socket round trip. DESIGN §9: acquire+release beats
// Plasma's get+release in the same placement (peer_reference.cc).
//
// When the client can be told which channel carries the hot path (client_transport.h),
// acquire+release is also measured with the client forced onto gRPC, side by side.
//
// Worker role:
//   control-acquire-release SOCKET NAME N PATH   N timed acquire+release pairs of NAME
//                                                (after 100 untimed ones), PATH "default"
//                                                or "grpc" (client_transport.h); prints
//                                                "acquire_ns", "release_ns", "pair_ns".
#include "client_transport.h"
#include "grpc_baseline.h"
#include "hurray/v1/exchange.pb.h"
#include "sections.h"

namespace hurray::bench {
namespace {

using std::chrono::seconds;

constexpr auto kWorkerTimeout = seconds(300);
constexpr int kWarmUpPairs = 100;
constexpr double kNanosecondsToMicroseconds = 1e-3;
const std::string kTensorName = "bench/control/tensor";
constexpr std::uint64_t kTensorBytes = 4096;

}  // namespace

int ControlAcquireReleaseRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const auto count = static_cast<int>(ArgNumber(args, 2, "N"));
  const std::string& path = Arg(args, 3, "PATH");
  if (path != "default" && path != "grpc") WorkerFail("PATH must be default or grpc: " + path);
  auto client = ConnectWarm(socket, "control-acquire-release",
                            path == "grpc" ? HotPath::kGrpc : HotPath::kClientDefault);
  std::vector<std::int64_t> acquires, releases, pairs;
  acquires.reserve(static_cast<std::size_t>(count));
  releases.reserve(static_cast<std::size_t>(count));
  pairs.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < kWarmUpPairs + count; ++i) {
    const std::int64_t start = NowNanoseconds();
    TensorView view = CheckOk(client->Acquire(name), "Acquire");
    const std::int64_t acquired = NowNanoseconds();
    CheckOk(view.Release(), "Release");
    const std::int64_t released = NowNanoseconds();
    if (i < kWarmUpPairs) continue;
    acquires.push_back(acquired - start);
    releases.push_back(released - acquired);
    pairs.push_back(released - start);
  }
  EmitSamples("acquire_ns", acquires);
  EmitSamples("release_ns", releases);
  EmitSamples("pair_ns", pairs);
  return 0;
}

Status RunControlPlane(Harness& harness) {
  constexpr int kSection = 3;
  Report& report = harness.report();
  const std::string count = std::to_string(harness.scale().round_trips);
  auto daemon = harness.Daemon();
  if (!daemon) return std::unexpected(daemon.error());
  const std::string socket = (*daemon)->socket_path();
  if (auto published = harness.PublishTensor(kTensorName, kTensorBytes, /*fill=*/true);
      !published) {
    return published;
  }
  auto grpc_socket = harness.GrpcServerSocket(0);
  if (!grpc_socket) return std::unexpected(grpc_socket.error());
  if (auto measured = harness.MeasureSocketRoundTrip(kSection, "control.raw_uds_round_trip");
      !measured) {
    return measured;
  }

  const auto add = [&](const std::string& key, const std::string& label, Placement placement,
                       const std::vector<double>& samples_ns) {
    report.AddFigure(FigureSpec{.key = key, .section = kSection, .label = label, .unit = "us"},
                     placement, Scaled(Summarize(samples_ns), kNanosecondsToMicroseconds));
  };
  for (Placement placement : kBothPlacements) {
    if (auto placed = harness.Place(placement); !placed) return placed;
    harness.Progress("section 3, " + std::string(PlacementName(placement)) +
                     ": empty gRPC calls, acquire+release");
    auto empty = harness.RunWorker(placement, {"grpc-empty-call", *grpc_socket, count, "peer"},
                                   kWorkerTimeout);
    if (!empty) return std::unexpected(empty.error());
    add("control.grpc_empty_call", "empty gRPC unary call, own server", placement,
        empty->Values("round_trip_ns"));
    auto health =
        harness.RunWorker(placement, {"grpc-empty-call", socket, count, "health"}, kWorkerTimeout);
    if (!health) return std::unexpected(health.error());
    add("control.grpc_health_check_hurrayd", "gRPC health Check on hurrayd's socket", placement,
        health->Values("round_trip_ns"));
    auto pairs = harness.RunWorker(
        placement, {"control-acquire-release", socket, kTensorName, count, "default"},
        kWorkerTimeout);
    if (!pairs) return std::unexpected(pairs.error());
    add("control.acquire_release", "hurray acquire+release, 4 KiB tensor", placement,
        pairs->Values("pair_ns"));
    add("control.acquire", "hurray acquire alone", placement, pairs->Values("acquire_ns"));
    add("control.release", "hurray release alone", placement, pairs->Values("release_ns"));
    if (CanForceGrpcHotPath()) {
      auto grpc_pairs = harness.RunWorker(
          placement, {"control-acquire-release", socket, kTensorName, count, "grpc"},
          kWorkerTimeout);
      if (!grpc_pairs) return std::unexpected(grpc_pairs.error());
      add("control.acquire_release_over_grpc", "hurray acquire+release, client forced onto gRPC",
          placement, grpc_pairs->Values("pair_ns"));
    }
  }
  harness.DeleteTensors({kTensorName});

  report.AddRatio(RatioSpec{.key = "control.ratio.acquire_release_over_grpc_empty_call",
                            .section = kSection,
                            .label = "acquire+release / empty gRPC call",
                            .numerator = "control.acquire_release",
                            .denominator = "control.grpc_empty_call"});
  report.AddRatio(RatioSpec{.key = "control.ratio.acquire_release_default_over_grpc_path",
                            .section = kSection,
                            .label = "acquire+release: client default / forced gRPC",
                            .numerator = "control.acquire_release",
                            .denominator = "control.acquire_release_over_grpc"});
  report.AddRatio(RatioSpec{.key = "control.ratio.acquire_release_over_raw_uds",
                            .section = kSection,
                            .label = "acquire+release / raw socket round trip",
                            .numerator = "control.acquire_release",
                            .denominator = "control.raw_uds_round_trip"});

  // A check of client_transport from the timings: over gRPC an acquire+release is two
  // calls, so it cannot cost less than one empty call on hurrayd's own socket.
  const auto pair = report.Median("control.acquire_release", Placement::kPinned);
  const auto call = report.Median("control.grpc_health_check_hurrayd", Placement::kPinned);
  if (pair && call) {
    report.SetRunFact("client_transport_by_timing",
                      *pair < *call ? "not gRPC: a pinned acquire+release costs less than one "
                                      "gRPC call on hurrayd's socket"
                                    : "gRPC or slower: a pinned acquire+release costs at least "
                                      "one gRPC call on hurrayd's socket");
  }
  return {};
}

}  // namespace hurray::bench
