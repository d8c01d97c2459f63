// Section 4, throughput: acquire+release pairs per second from 1, 4 and 16 client processes
// at once (all on one tensor, as workers reading one model's weights) on the client's
// default path (the fast path), and from 1 and 4 with the fast path off (the session socket,
// release one-way); and the publish rate of small (4 KiB) tensors from 1 and 4 producer
// processes, each tensor allocated then published (two calls), or streamed
// (PublishAndAllocate: one call). The target: >= 1M pairs/s from one process on the fast
// path.
//
// Worker roles (both print "ready" and start on "go", so all clients run at once):
//   throughput-acquire SOCKET NAME SECONDS PATH
//                                            acquire+release NAME in a loop for SECONDS on
//                                            PATH ("default", "slow", "grpc":
//                                            client_transport.h); prints "pairs",
//                                            "fast_path_pairs" and "elapsed_ns"; a one-way
//                                            release's refusal fails it;
//   throughput-publish SOCKET NAME SECONDS [MODE]
//                                            allocate+publish a 4 KiB tensor under NAME (a
//                                            new version each time) for SECONDS, MODE
//                                            "allocate" (the default: Allocate, then Publish)
//                                            or "stream" (PublishAndAllocate: one call per
//                                            tensor); prints "publishes" and "elapsed_ns";
//                                            deletes NAME.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include "client_transport.h"
#include "hurray/v1/exchange.pb.h"
#include "sections.h"

namespace hurray::bench {
namespace {

using std::chrono::seconds;

constexpr auto kWorkerTimeout = seconds(300);
constexpr int kSection = 4;
constexpr std::uint64_t kSmallTensorBytes = 4096;
constexpr double kFastPathTargetPairsPerSecond = 1e6;  // From one process.
const std::string kTensorName = "bench/throughput/tensor";
constexpr int kPublishClients[] = {1, 4};

// How a producer of section 4 gets each tensor: "throughput.publish_4KiB" + suffix.
struct PublishMode {
  std::string_view name;  // The role's MODE.
  std::string suffix;
  std::string label;
};

const PublishMode kPublishModes[] = {
    {.name = "allocate", .suffix = "", .label = ""},
    {.name = "stream", .suffix = "_streaming", .label = ", streamed"},
};

// The acquire+release rates of one path: "throughput.acquire_release" + suffix +
// ".N_clients" for each N of `clients`.
struct AcquirePath {
  ClientPath path;
  std::string suffix;
  std::string label;
  std::vector<int> clients;
};

const AcquirePath kAcquirePaths[] = {
    {.path = ClientPath::kDefault, .suffix = "", .label = "", .clients = {1, 4, 16}},
    {.path = ClientPath::kSlowPath,
     .suffix = "_slow_path",
     .label = ", session socket",
     .clients = {1, 4}},
};

std::string Processes(int clients) {
  return std::to_string(clients) + (clients == 1 ? " process" : " processes");
}

std::int64_t DurationNanoseconds(const std::string& seconds_text) {
  return static_cast<std::int64_t>(std::strtod(seconds_text.c_str(), nullptr) * 1e9);
}

// The summed rate of every process: sum of (operations / its own elapsed time).
double TotalRate(const std::vector<WorkerResults>& workers, const std::string& operations) {
  double rate = 0;
  for (const WorkerResults& worker : workers) {
    rate += worker.Single(operations) / (worker.Single("elapsed_ns") * 1e-9);
  }
  return rate;
}

}  // namespace

int ThroughputAcquireRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const std::int64_t duration = DurationNanoseconds(Arg(args, 2, "SECONDS"));
  const ClientPath path = CheckOk(ParseClientPath(Arg(args, 3, "PATH")), "PATH");
  auto client = ConnectWarm(socket, "throughput-acquire", path);
  CheckOk(CheckOk(client->Acquire(name), "Acquire").Release(), "Release");  // Maps, untimed.
  CheckOk(client->SyncReleases(), "SyncReleases");
  ReadyThenWaitForGo();
  std::uint64_t pairs = 0;
  std::uint64_t fast_path_pairs = 0;
  const std::int64_t start = NowNanoseconds();
  std::int64_t now = start;
  while (now - start < duration) {
    TensorView view = CheckOk(client->Acquire(name), "Acquire");
    if (view.fast_path()) ++fast_path_pairs;
    CheckOk(view.Release(), "Release");
    ++pairs;
    now = NowNanoseconds();
  }
  CheckOk(client->SyncReleases(), "SyncReleases");
  EmitValue("pairs", static_cast<double>(pairs));
  EmitValue("fast_path_pairs", static_cast<double>(fast_path_pairs));
  EmitValue("elapsed_ns", static_cast<double>(now - start));
  return 0;
}

int ThroughputPublishRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const std::int64_t duration = DurationNanoseconds(Arg(args, 2, "SECONDS"));
  const std::string mode = args.size() > 3 ? args[3] : "allocate";
  if (mode != "allocate" && mode != "stream") {
    WorkerFail(fmt::format("MODE {:?}: allocate or stream", mode));
  }
  auto client = ConnectWarm(socket, "throughput-publish");
  const TensorDescriptor descriptor = BytesTensor(kSmallTensorBytes);
  (void)CheckOk(CheckOk(client->Allocate(descriptor), "Allocate").Publish(name), "Publish");
  std::optional<WritableTensor> streamed;
  if (mode == "stream") streamed.emplace(CheckOk(client->Allocate(descriptor), "Allocate"));
  ReadyThenWaitForGo();
  std::uint64_t publishes = 0;
  const std::int64_t start = NowNanoseconds();
  std::int64_t now = start;
  while (now - start < duration) {
    if (streamed) {
      PublishedAndNext published =
          CheckOk(streamed->PublishAndAllocate(name), "PublishAndAllocate");
      *streamed = CheckOk(std::move(published.next), "PublishAndAllocate's next allocation");
    } else {
      WritableTensor tensor = CheckOk(client->Allocate(descriptor), "Allocate");
      (void)CheckOk(tensor.Publish(name), "Publish");
    }
    ++publishes;
    now = NowNanoseconds();
  }
  EmitValue("publishes", static_cast<double>(publishes));
  EmitValue("elapsed_ns", static_cast<double>(now - start));
  if (streamed) CheckOk(streamed->Cancel(), "Cancel");
  (void)CheckOk(client->Delete(name), "Delete");
  return 0;
}

namespace {

// The acquire+release rates of `acquire` in `placement`; returns how many of the pairs took
// the fast path, as "N of M".
Result<std::string> MeasureAcquireRates(Harness& harness, Placement placement,
                                        const std::string& socket, const AcquirePath& acquire) {
  const Scale& scale = harness.scale();
  const std::string duration = std::to_string(scale.throughput_seconds);
  double fast_path_pairs = 0;
  double pairs = 0;
  for (int clients : acquire.clients) {
    harness.Progress(fmt::format("section 4, {}: acquire+release from {}{}",
                                 PlacementName(placement), Processes(clients), acquire.label));
    std::vector<double> rates;
    for (int round = 0; round < scale.throughput_rounds; ++round) {
      std::vector<WorkerArgs> workers(
          static_cast<std::size_t>(clients),
          WorkerArgs{"throughput-acquire", socket, kTensorName, duration,
                     std::string(ClientPathName(acquire.path))});
      auto results = harness.RunWorkersTogether(placement, workers, kWorkerTimeout);
      if (!results) return std::unexpected(results.error());
      rates.push_back(TotalRate(*results, "pairs"));
      for (const WorkerResults& worker : *results) {
        pairs += worker.Single("pairs");
        fast_path_pairs += worker.Single("fast_path_pairs");
      }
    }
    harness.report().AddFigure(
        FigureSpec{
            .key = fmt::format("throughput.acquire_release{}.{}_clients", acquire.suffix, clients),
            .section = kSection,
            .label =
                fmt::format("acquire+release pairs/s, {}{}", Processes(clients), acquire.label),
            .unit = "pairs/s"},
        placement, Summarize(rates));
  }
  return fmt::format("{:.0f} of {:.0f}", fast_path_pairs, pairs);
}

Status MeasurePublishRates(Harness& harness, Placement placement, const std::string& socket) {
  const Scale& scale = harness.scale();
  const std::string duration = std::to_string(scale.throughput_seconds);
  for (const PublishMode& mode : kPublishModes) {
    for (int clients : kPublishClients) {
      harness.Progress(fmt::format("section 4, {}: publishing from {}{}", PlacementName(placement),
                                   Processes(clients), mode.label));
      std::vector<double> rates;
      for (int round = 0; round < scale.throughput_rounds; ++round) {
        std::vector<WorkerArgs> workers;
        workers.reserve(static_cast<std::size_t>(clients));
        for (int i = 0; i < clients; ++i) {
          workers.push_back({"throughput-publish", socket,
                             "bench/throughput/publish-" + std::to_string(i), duration,
                             std::string(mode.name)});
        }
        auto results = harness.RunWorkersTogether(placement, workers, kWorkerTimeout);
        if (!results) return std::unexpected(results.error());
        rates.push_back(TotalRate(*results, "publishes"));
      }
      harness.report().AddFigure(
          FigureSpec{
              .key = fmt::format("throughput.publish_4KiB{}.{}_clients", mode.suffix, clients),
              .section = kSection,
              .label = fmt::format("allocate+publish 4 KiB tensors/s, {}{}", Processes(clients),
                                   mode.label),
              .unit = "tensors/s"},
          placement, Summarize(rates));
    }
  }
  return {};
}

void AddRatiosAndNotes(Harness& harness) {
  Report& report = harness.report();
  report.AddRatio(RatioSpec{.key = "throughput.ratio.acquire_release_4_over_1",
                            .section = kSection,
                            .label = "pairs/s 4 processes / 1 process",
                            .numerator = "throughput.acquire_release.4_clients",
                            .denominator = "throughput.acquire_release.1_clients"});
  report.AddRatio(RatioSpec{.key = "throughput.ratio.acquire_release_slow_path_4_over_1",
                            .section = kSection,
                            .label = "pairs/s 4 processes / 1 process, session socket",
                            .numerator = "throughput.acquire_release_slow_path.4_clients",
                            .denominator = "throughput.acquire_release_slow_path.1_clients"});
  report.AddRatio(
      RatioSpec{.key = "throughput.ratio.acquire_release_default_over_slow_path_1_client",
                .section = kSection,
                .label = "pairs/s 1 process, client default / session socket",
                .numerator = "throughput.acquire_release.1_clients",
                .denominator = "throughput.acquire_release_slow_path.1_clients"});
  report.AddRatio(RatioSpec{.key = "throughput.ratio.publish_streaming_over_allocate_1_client",
                            .section = kSection,
                            .label = "tensors/s 1 process, streamed / allocated",
                            .numerator = "throughput.publish_4KiB_streaming.1_clients",
                            .denominator = "throughput.publish_4KiB.1_clients"});
  std::string fast;
  for (Placement placement : kBothPlacements) {
    if (auto rate = report.Median("throughput.acquire_release.1_clients", placement)) {
      fast += fmt::format("{}{} {:.0f} pairs/s ({})", fast.empty() ? "" : ", ",
                          PlacementName(placement), *rate,
                          *rate >= kFastPathTargetPairsPerSecond ? "met" : "NOT met");
    }
  }
  report.AddNote(kSection,
                 "target: >= 1M pairs/s from one process on the fast path (the "
                 "client default): " +
                     fast);
  char seconds_text[32];
  std::snprintf(seconds_text, sizeof(seconds_text), "%.1f", harness.scale().throughput_seconds);
  report.AddNote(kSection,
                 "a rate is the sum over all processes of each one's operations / its "
                 "own time; median and p99 are over " +
                     std::to_string(harness.scale().throughput_rounds) + " rounds of " +
                     seconds_text +
                     " s (with so few rounds the p99 column is the "
                     "best round; the JSON has min too)");
}

}  // namespace

Status RunThroughput(Harness& harness) {
  auto daemon = harness.Daemon();
  if (!daemon) return std::unexpected(daemon.error());
  const std::string socket = (*daemon)->socket_path();
  if (auto published = harness.PublishTensor(kTensorName, kSmallTensorBytes, /*fill=*/true);
      !published) {
    return published;
  }
  for (Placement placement : kBothPlacements) {
    if (auto placed = harness.Place(placement); !placed) return placed;
    std::string counts;
    for (const AcquirePath& acquire : kAcquirePaths) {
      auto fast_path_pairs = MeasureAcquireRates(harness, placement, socket, acquire);
      if (!fast_path_pairs) return std::unexpected(fast_path_pairs.error());
      counts += fmt::format("{}{}: {}", counts.empty() ? "" : ", ", ClientPathName(acquire.path),
                            *fast_path_pairs);
    }
    harness.report().AddNote(kSection, std::string(PlacementName(placement)) +
                                           ": pairs on the fast path (TensorView::fast_path()), " +
                                           counts);
    if (auto published = MeasurePublishRates(harness, placement, socket); !published) {
      return published;
    }
  }
  harness.DeleteTensors({kTensorName});
  AddRatiosAndNotes(harness);
  return {};
}

}  // namespace hurray::bench
