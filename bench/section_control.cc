// Section 3, control plane: what one acquire+release costs a consumer on each of the
// client's paths, against the floors under it: an empty gRPC call (on the benchmark's own
// server, and grpc.health.v1 Check on hurrayd's own socket) and a raw unix-socket round trip.
// The paths (client_transport.h): the client's default (the fast path: no system call once
// the version is mapped), the session socket with the fast path off (release one-way), and
// gRPC. The targets: acquire+release beats Plasma's get+release in the same placement
// (peer_reference.cc); on the session socket <= 1.5x the raw round trip; on the fast path
// <= 1 us. And the handoff: publish -> a waiting consumer has the view, 4 KiB, <= 3x the raw
// round trip; with what the daemon spends on each (its CPU time and context switches, from
// /proc); unpinned, also with a consumer that spins for the answer (AcquireOptions::spin) on
// a CPU the producer and the daemon leave it.
//
// Worker role:
//   control-acquire-release SOCKET NAME N PATH   N timed acquire+release pairs of NAME
//                                                (after 100 untimed ones), PATH "default",
//                                                "slow" or "grpc" (client_transport.h);
//                                                prints "acquire_ns", "release_ns",
//                                                "pair_ns", and "fast_path_pairs" (how many
//                                                timed views were TensorView::fast_path()).
//                                                A one-way release's refusal (SyncReleases
//                                                after the loop) fails the worker.
//   handoff-producer SOCKET NAME N GAP_US        after "go", N + 1 times: allocate a 4 KiB
//                                                tensor, write the clock (NowNanoseconds) in
//                                                its first 8 bytes, publish it under NAME
//                                                (versions 1 ... N + 1), sleep GAP_US.
//   handoff-consumer SOCKET NAME N PATH [SPIN_US]
//                                                after "go", acquires NAME's versions 1 ...
//                                                N + 1, each waiting for it to be published
//                                                (AcquireOptions::wait), reads the clock the
//                                                producer wrote and prints "handoff_ns":
//                                                now minus it, for all but the first, and
//                                                "handoff_missed": versions gone before it
//                                                asked (it fell a gap behind; at most N / 10,
//                                                else it fails). PATH
//                                                "default" (the daemon holds the wait on the
//                                                session socket and answers it from the
//                                                publishing thread) or "grpc" (the daemon
//                                                holds the wait, over gRPC). SPIN_US:
//                                                AcquireOptions::spin (default 0).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "client_transport.h"
#include "grpc_baseline.h"
#include "hurray/v1/exchange.pb.h"
#include "process.h"
#include "sections.h"

namespace hurray::bench {
namespace {

using std::chrono::seconds;

constexpr auto kWorkerTimeout = seconds(300);
constexpr int kSection = 3;
constexpr int kWarmUpPairs = 100;
constexpr double kNanosecondsToMicroseconds = 1e-3;
constexpr double kFastPathTargetMicroseconds = 1.0;
const std::string kTensorName = "bench/control/tensor";
constexpr std::uint64_t kTensorBytes = 4096;
const std::string kHandoffName = "bench/control/handoff";
// Between two publishes: long enough that the consumer waits for each version.
constexpr int kHandoffGapMicroseconds = 2000;
constexpr auto kHandoffWait = std::chrono::seconds(30);
// The spinning consumer's AcquireOptions::spin: ten gaps, so that it is spinning when each
// version comes.
constexpr auto kHandoffSpin = std::chrono::microseconds(10 * kHandoffGapMicroseconds);

// One path's figures: "control.acquire_release" + suffix, and with `halves`
// "control.acquire" / "control.release" + suffix.
struct PathFigures {
  ClientPath path;
  std::string suffix;
  std::string label;
  bool halves;
};

const PathFigures kPaths[] = {
    {.path = ClientPath::kDefault, .suffix = "", .label = "client default", .halves = true},
    {.path = ClientPath::kSlowPath,
     .suffix = "_slow_path",
     .label = "session socket",
     .halves = true},
    {.path = ClientPath::kGrpc,
     .suffix = "_over_grpc",
     .label = "client forced onto gRPC",
     .halves = false},
};

void AddMicroseconds(Report& report, const std::string& key, const std::string& label,
                     Placement placement, const std::vector<double>& samples_ns) {
  report.AddFigure(FigureSpec{.key = key, .section = kSection, .label = label, .unit = "us"},
                   placement, Scaled(Summarize(samples_ns), kNanosecondsToMicroseconds));
}

// The empty gRPC calls of `placement`: on the benchmark's own server and on hurrayd's.
Status MeasureGrpcFloors(Harness& harness, Placement placement, const std::string& socket,
                         const std::string& grpc_socket, const std::string& count) {
  auto empty =
      harness.RunWorker(placement, {"grpc-empty-call", grpc_socket, count, "peer"}, kWorkerTimeout);
  if (!empty) return std::unexpected(empty.error());
  AddMicroseconds(harness.report(), "control.grpc_empty_call", "empty gRPC unary call, own server",
                  placement, empty->Values("round_trip_ns"));
  auto health =
      harness.RunWorker(placement, {"grpc-empty-call", socket, count, "health"}, kWorkerTimeout);
  if (!health) return std::unexpected(health.error());
  AddMicroseconds(harness.report(), "control.grpc_health_check_hurrayd",
                  "gRPC health Check on hurrayd's socket", placement,
                  health->Values("round_trip_ns"));
  return {};
}

// Acquire+release of `placement` on every path; returns one note per path saying how many
// of its timed views took the fast path.
Result<std::string> MeasurePaths(Harness& harness, Placement placement, const std::string& socket,
                                 const std::string& count) {
  Report& report = harness.report();
  std::string fast_path_counts;
  for (const PathFigures& figures : kPaths) {
    auto pairs = harness.RunWorker(placement,
                                   {"control-acquire-release", socket, kTensorName, count,
                                    std::string(ClientPathName(figures.path))},
                                   kWorkerTimeout);
    if (!pairs) return std::unexpected(pairs.error());
    AddMicroseconds(report, "control.acquire_release" + figures.suffix,
                    "hurray acquire+release, " + figures.label, placement,
                    pairs->Values("pair_ns"));
    if (figures.halves) {
      AddMicroseconds(report, "control.acquire" + figures.suffix,
                      "hurray acquire alone, " + figures.label, placement,
                      pairs->Values("acquire_ns"));
      AddMicroseconds(report, "control.release" + figures.suffix,
                      "hurray release alone, " + figures.label, placement,
                      pairs->Values("release_ns"));
    }
    fast_path_counts += fmt::format("{}{}: {:.0f} of {}", fast_path_counts.empty() ? "" : ", ",
                                    ClientPathName(figures.path), pairs->Single("fast_path_pairs"),
                                    pairs->Values("pair_ns").size());
  }
  return fmt::format("{}: timed pairs on the fast path (TensorView::fast_path()), {}",
                     PlacementName(placement), fast_path_counts);
}

void AddRatios(Report& report) {
  const auto ratio = [&](const std::string& key, const std::string& label,
                         const std::string& numerator, const std::string& denominator,
                         std::optional<Target> target = std::nullopt) {
    report.AddRatio(RatioSpec{.key = "control.ratio." + key,
                              .section = kSection,
                              .label = label,
                              .numerator = numerator,
                              .denominator = denominator,
                              .target = target});
  };
  ratio("acquire_release_over_grpc_empty_call", "acquire+release / empty gRPC call",
        "control.acquire_release", "control.grpc_empty_call");
  ratio("acquire_release_default_over_grpc_path", "acquire+release: client default / forced gRPC",
        "control.acquire_release", "control.acquire_release_over_grpc");
  ratio("acquire_release_default_over_slow_path",
        "acquire+release: client default / session socket", "control.acquire_release",
        "control.acquire_release_slow_path");
  ratio("acquire_release_over_raw_uds", "acquire+release, client default / raw round trip",
        "control.acquire_release", "control.raw_uds_round_trip");
  ratio("acquire_release_slow_path_over_raw_uds",
        "acquire+release, session socket / raw round trip", "control.acquire_release_slow_path",
        "control.raw_uds_round_trip", Target{.kind = Target::Kind::kAtMost, .value = 1.5});
  ratio("acquire_release_over_grpc_over_raw_uds", "acquire+release, gRPC / raw round trip",
        "control.acquire_release_over_grpc", "control.raw_uds_round_trip");
  ratio("handoff_over_raw_uds", "publish -> waiting consumer has the view / raw round trip",
        "control.handoff", "control.raw_uds_round_trip",
        Target{.kind = Target::Kind::kAtMost, .value = 3.0});
  ratio("handoff_grpc_wait_over_raw_uds",
        "publish -> waiting consumer has the view, gRPC wait / raw round trip",
        "control.handoff_grpc_wait", "control.raw_uds_round_trip");
  ratio("handoff_over_grpc_wait", "handoff: session socket wait / gRPC wait", "control.handoff",
        "control.handoff_grpc_wait");
  ratio("handoff_spin_over_raw_uds", "publish -> spinning consumer has the view / raw round trip",
        "control.handoff_spin", "control.raw_uds_round_trip");
  ratio("handoff_spin_over_handoff", "handoff: spinning consumer / sleeping consumer",
        "control.handoff_spin", "control.handoff");
}

// The fast path's absolute target, and a check of the transport from the
// timings: over gRPC an acquire+release is two calls, so it cannot cost less than one
// empty call on hurrayd's own socket.
void AddVerdicts(Report& report) {
  std::string fast;
  for (Placement placement : kBothPlacements) {
    if (auto pair = report.Median("control.acquire_release", placement)) {
      fast += fmt::format("{}{} {:.2f} us ({})", fast.empty() ? "" : ", ", PlacementName(placement),
                          *pair, *pair <= kFastPathTargetMicroseconds ? "met" : "NOT met");
    }
  }
  if (!fast.empty()) {
    report.AddNote(kSection,
                   "target: acquire+release on the fast path (the client default) "
                   "<= 1 us: " +
                       fast);
  }
  const auto pair = report.Median("control.acquire_release", Placement::kPinned);
  const auto call = report.Median("control.grpc_health_check_hurrayd", Placement::kPinned);
  if (pair && call) {
    report.SetRunFact("client_transport_by_timing",
                      *pair < *call ? "not gRPC: a pinned acquire+release costs less than one "
                                      "gRPC call on hurrayd's socket"
                                    : "gRPC or slower: a pinned acquire+release costs at least "
                                      "one gRPC call on hurrayd's socket");
  }
}

}  // namespace

int ControlAcquireReleaseRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const auto count = static_cast<int>(ArgNumber(args, 2, "N"));
  const ClientPath path = CheckOk(ParseClientPath(Arg(args, 3, "PATH")), "PATH");
  auto client = ConnectWarm(socket, "control-acquire-release", path);
  std::vector<std::int64_t> acquires, releases, pairs;
  acquires.reserve(static_cast<std::size_t>(count));
  releases.reserve(static_cast<std::size_t>(count));
  pairs.reserve(static_cast<std::size_t>(count));
  std::uint64_t fast_path_pairs = 0;
  for (int i = 0; i < kWarmUpPairs + count; ++i) {
    const std::int64_t start = NowNanoseconds();
    TensorView view = CheckOk(client->Acquire(name), "Acquire");
    const std::int64_t acquired = NowNanoseconds();
    const bool fast_path = view.fast_path();
    CheckOk(view.Release(), "Release");
    const std::int64_t released = NowNanoseconds();
    if (i < kWarmUpPairs) continue;
    acquires.push_back(acquired - start);
    releases.push_back(released - acquired);
    pairs.push_back(released - start);
    if (fast_path) ++fast_path_pairs;
  }
  CheckOk(client->SyncReleases(), "SyncReleases");
  EmitSamples("acquire_ns", acquires);
  EmitSamples("release_ns", releases);
  EmitSamples("pair_ns", pairs);
  EmitValue("fast_path_pairs", static_cast<double>(fast_path_pairs));
  return 0;
}

int HandoffProducerRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const auto count = static_cast<int>(ArgNumber(args, 2, "N"));
  const auto gap = std::chrono::microseconds(ArgNumber(args, 3, "GAP_US"));
  auto client = ConnectWarm(socket, "handoff-producer");
  const TensorDescriptor descriptor = BytesTensor(kTensorBytes);
  ReadyThenWaitForGo();
  for (int i = 0; i <= count; ++i) {
    WritableTensor tensor = CheckOk(client->Allocate(descriptor), "Allocate");
    const std::int64_t now = NowNanoseconds();
    std::memcpy(tensor.buffer(0).data(), &now, sizeof now);
    (void)CheckOk(tensor.Publish(name), "Publish");
    std::this_thread::sleep_for(gap);
  }
  return 0;
}

int HandoffConsumerRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const auto count = static_cast<int>(ArgNumber(args, 2, "N"));
  const ClientPath path = CheckOk(ParseClientPath(Arg(args, 3, "PATH")), "PATH");
  const auto spin = std::chrono::microseconds(args.size() > 4 ? ArgNumber(args, 4, "SPIN_US") : 0);
  auto client = ConnectWarm(socket, "handoff-consumer", path);
  std::vector<std::int64_t> handoffs;
  handoffs.reserve(static_cast<std::size_t>(count));
  ReadyThenWaitForGo();
  int missed = 0;
  for (int i = 0; i <= count; ++i) {
    auto acquired = client->Acquire(
        name, {.version = static_cast<std::uint64_t>(i) + 1, .wait = kHandoffWait, .spin = spin});
    // A consumer more than one gap behind (a stall of the machine) finds the version
    // superseded and reclaimed: it is counted and skipped, not timed.
    if (!acquired && acquired.error().code() == StatusCode::kNotFound && ++missed <= count / 10) {
      continue;
    }
    TensorView view = CheckOk(std::move(acquired), "Acquire");
    std::int64_t published = 0;
    std::memcpy(&published, view.buffer(0).data(), sizeof published);
    const std::int64_t now = NowNanoseconds();
    if (i > 0) handoffs.push_back(now - published);
    CheckOk(view.Release(), "Release");
  }
  EmitSamples("handoff_ns", handoffs);
  EmitValue("handoff_missed", missed);
  return 0;
}

// Publish -> a waiting consumer has the view, in `placement`: the client's default (the
// wait on the session socket) and, side by side, the wait over gRPC (the previous release's
// wait).
Status MeasureHandoff(Harness& harness, Placement placement, const std::string& socket,
                      pid_t daemon_pid) {
  const int handoffs = std::max(harness.scale().round_trips / 10, 100);
  const std::string count = std::to_string(handoffs);
  struct Variant {
    ClientPath path;
    std::string figure;
    std::string label;
    std::chrono::microseconds spin{0};  // The consumer's AcquireOptions::spin.
  };
  const Variant variants[] = {
      {.path = ClientPath::kDefault,
       .figure = "control.handoff",
       .label = "publish -> waiting consumer has the view, 4 KiB (session socket wait)"},
      {.path = ClientPath::kGrpc,
       .figure = "control.handoff_grpc_wait",
       .label = "publish -> waiting consumer has the view, 4 KiB, all over gRPC (gRPC wait)"},
      {.path = ClientPath::kDefault,
       .figure = "control.handoff_spin",
       .label = "publish -> spinning consumer has the view, 4 KiB (AcquireOptions::spin)",
       .spin = kHandoffSpin}};
  for (const Variant& variant : variants) {
    // A spinning consumer needs a CPU of its own: pinned, it would take the one the
    // producer and the daemon need.
    if (variant.spin.count() > 0 && placement == Placement::kPinned) continue;
    harness.DeleteTensors({kHandoffName});
    HURRAY_ASSIGN_OR_RETURN(const ProcessCpu daemon_before, ReadProcessCpu(daemon_pid));
    HURRAY_ASSIGN_OR_RETURN(
        std::vector<WorkerResults> results,
        harness.RunWorkersTogether(
            placement,
            {{"handoff-consumer", socket, kHandoffName, count,
              std::string(ClientPathName(variant.path)), std::to_string(variant.spin.count())},
             {"handoff-producer", socket, kHandoffName, count,
              std::to_string(kHandoffGapMicroseconds)}},
            kWorkerTimeout));
    AddMicroseconds(harness.report(), variant.figure, variant.label, placement,
                    results[0].Values("handoff_ns"));
    if (variant.path != ClientPath::kDefault || variant.spin.count() > 0) continue;
    // What the daemon spent on each handoff (the allocate, the publish, the consumer's wait
    // and its release), its two workers' connections included: one value per run.
    HURRAY_ASSIGN_OR_RETURN(const ProcessCpu daemon_after, ReadProcessCpu(daemon_pid));
    const auto add_per_handoff = [&](const std::string& key, const std::string& what,
                                     const std::string& unit, double total) {
      harness.report().AddFigure(
          FigureSpec{.key = key,
                     .section = kSection,
                     .label = "hurrayd's " + what + " per handoff (session socket wait)",
                     .unit = unit},
          placement, Summarize({total / (handoffs + 1)}));
    };
    add_per_handoff("control.handoff_daemon_cpu", "CPU time", "us",
                    static_cast<double>(daemon_after.cpu_ns - daemon_before.cpu_ns) *
                        kNanosecondsToMicroseconds);
    add_per_handoff(
        "control.handoff_daemon_switches", "context switches", "switches",
        static_cast<double>(daemon_after.context_switches - daemon_before.context_switches));
  }
  harness.DeleteTensors({kHandoffName});
  return {};
}

Status RunControlPlane(Harness& harness) {
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
  for (Placement placement : kBothPlacements) {
    if (auto placed = harness.Place(placement); !placed) return placed;
    harness.Progress("section 3, " + std::string(PlacementName(placement)) +
                     ": empty gRPC calls, acquire+release on each path");
    if (auto floors = MeasureGrpcFloors(harness, placement, socket, *grpc_socket, count); !floors) {
      return floors;
    }
    auto counts = MeasurePaths(harness, placement, socket, count);
    if (!counts) return std::unexpected(counts.error());
    report.AddNote(kSection, *counts);
    HURRAY_RETURN_IF_ERROR(MeasureHandoff(harness, placement, socket, (*daemon)->pid()));
  }
  harness.DeleteTensors({kTensorName});
  AddRatios(report);
  AddVerdicts(report);
  return {};
}

}  // namespace hurray::bench
