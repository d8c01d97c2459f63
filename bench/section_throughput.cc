// Section 4, throughput: acquire+release pairs per second from 1, 4 and 16 client processes
// at once (all on one tensor, as workers reading one model's weights), and the publish rate
// of small (4 KiB) tensors from 1 and 4 producer processes.
//
// Worker roles (both print "ready" and start on "go", so all clients run at once):
//   throughput-acquire SOCKET NAME SECONDS   acquire+release NAME in a loop for SECONDS;
//                                            prints "pairs" and "elapsed_ns";
//   throughput-publish SOCKET NAME SECONDS   allocate+publish a 4 KiB tensor under NAME (a
//                                            new version each time) for SECONDS; prints
//                                            "publishes" and "elapsed_ns"; deletes NAME.
#include <cstdio>
#include <cstdlib>

#include "hurray/v1/exchange.pb.h"
#include "sections.h"

namespace hurray::bench {
namespace {

using std::chrono::seconds;

constexpr auto kWorkerTimeout = seconds(300);
constexpr std::uint64_t kSmallTensorBytes = 4096;
const std::string kTensorName = "bench/throughput/tensor";
constexpr int kAcquireClients[] = {1, 4, 16};
constexpr int kPublishClients[] = {1, 4};

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
  auto client = ConnectWarm(socket, "throughput-acquire");
  CheckOk(CheckOk(client->Acquire(name), "Acquire").Release(), "Release");  // Maps, untimed.
  ReadyThenWaitForGo();
  std::uint64_t pairs = 0;
  const std::int64_t start = NowNanoseconds();
  std::int64_t now = start;
  while (now - start < duration) {
    TensorView view = CheckOk(client->Acquire(name), "Acquire");
    CheckOk(view.Release(), "Release");
    ++pairs;
    now = NowNanoseconds();
  }
  EmitValue("pairs", static_cast<double>(pairs));
  EmitValue("elapsed_ns", static_cast<double>(now - start));
  return 0;
}

int ThroughputPublishRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const std::int64_t duration = DurationNanoseconds(Arg(args, 2, "SECONDS"));
  auto client = ConnectWarm(socket, "throughput-publish");
  const TensorDescriptor descriptor = BytesTensor(kSmallTensorBytes);
  (void)CheckOk(CheckOk(client->Allocate(descriptor), "Allocate").Publish(name), "Publish");
  ReadyThenWaitForGo();
  std::uint64_t publishes = 0;
  const std::int64_t start = NowNanoseconds();
  std::int64_t now = start;
  while (now - start < duration) {
    WritableTensor tensor = CheckOk(client->Allocate(descriptor), "Allocate");
    (void)CheckOk(tensor.Publish(name), "Publish");
    ++publishes;
    now = NowNanoseconds();
  }
  EmitValue("publishes", static_cast<double>(publishes));
  EmitValue("elapsed_ns", static_cast<double>(now - start));
  (void)CheckOk(client->Delete(name), "Delete");
  return 0;
}

Status RunThroughput(Harness& harness) {
  constexpr int kSection = 4;
  Report& report = harness.report();
  const Scale& scale = harness.scale();
  auto daemon = harness.Daemon();
  if (!daemon) return std::unexpected(daemon.error());
  const std::string socket = (*daemon)->socket_path();
  if (auto published = harness.PublishTensor(kTensorName, kSmallTensorBytes, /*fill=*/true);
      !published) {
    return published;
  }
  const std::string duration = std::to_string(scale.throughput_seconds);

  for (Placement placement : kBothPlacements) {
    if (auto placed = harness.Place(placement); !placed) return placed;
    for (int clients : kAcquireClients) {
      harness.Progress("section 4, " + std::string(PlacementName(placement)) +
                       ": acquire+release from " + std::to_string(clients) + " processes");
      std::vector<double> rates;
      for (int round = 0; round < scale.throughput_rounds; ++round) {
        std::vector<WorkerArgs> workers(
            static_cast<std::size_t>(clients),
            WorkerArgs{"throughput-acquire", socket, kTensorName, duration});
        auto results = harness.RunWorkersTogether(placement, workers, kWorkerTimeout);
        if (!results) return std::unexpected(results.error());
        rates.push_back(TotalRate(*results, "pairs"));
      }
      report.AddFigure(
          FigureSpec{.key = "throughput.acquire_release." + std::to_string(clients) + "_clients",
                     .section = kSection,
                     .label = "acquire+release pairs/s, " + std::to_string(clients) +
                              (clients == 1 ? " process" : " processes"),
                     .unit = "pairs/s"},
          placement, Summarize(rates));
    }
    for (int clients : kPublishClients) {
      harness.Progress("section 4, " + std::string(PlacementName(placement)) +
                       ": publishing from " + std::to_string(clients) + " processes");
      std::vector<double> rates;
      for (int round = 0; round < scale.throughput_rounds; ++round) {
        std::vector<WorkerArgs> workers;
        workers.reserve(static_cast<std::size_t>(clients));
        for (int i = 0; i < clients; ++i) {
          workers.push_back({"throughput-publish", socket,
                             "bench/throughput/publish-" + std::to_string(i), duration});
        }
        auto results = harness.RunWorkersTogether(placement, workers, kWorkerTimeout);
        if (!results) return std::unexpected(results.error());
        rates.push_back(TotalRate(*results, "publishes"));
      }
      report.AddFigure(
          FigureSpec{.key = "throughput.publish_4KiB." + std::to_string(clients) + "_clients",
                     .section = kSection,
                     .label = "allocate+publish 4 KiB tensors/s, " + std::to_string(clients) +
                              (clients == 1 ? " process" : " processes"),
                     .unit = "tensors/s"},
          placement, Summarize(rates));
    }
  }
  harness.DeleteTensors({kTensorName});
  report.AddRatio(RatioSpec{.key = "throughput.ratio.acquire_release_4_over_1",
                            .section = kSection,
                            .label = "pairs/s 4 processes / 1 process",
                            .numerator = "throughput.acquire_release.4_clients",
                            .denominator = "throughput.acquire_release.1_clients"});
  char seconds_text[32];
  std::snprintf(seconds_text, sizeof(seconds_text), "%.1f", scale.throughput_seconds);
  report.AddNote(kSection,
                 "a rate is the sum over all processes of each one's operations / its "
                 "own time; median and p99 are over " +
                     std::to_string(scale.throughput_rounds) + " rounds of " + seconds_text +
                     " s (with so few rounds the p99 column is the "
                     "best round; the JSON has min too)");
  return {};
}

}  // namespace hurray::bench
