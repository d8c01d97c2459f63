// Section 1, size independence: handing over a tensor costs the same at 4 KiB and at 1 GiB
// (the target: 1 GiB / 4 KiB <= 1.5), because nothing on the way is proportional to its size.
//
// Worker roles:
//   size-producer SOCKET BYTES NAME M   allocate+publish a BYTES tensor under NAME, M + 1
//                                       times (no writing in between: only the calls are
//                                       timed); prints "first_ns" (the first in this
//                                       process, which also maps the pool's segment
//                                       read-write) and "steady_ns"; deletes NAME at the end;
//   size-consumer SOCKET NAME M         connect (timed: "connect_ns", with the channel's
//                                       first call), then acquire+release NAME M + 1 times;
//                                       prints "first_ns" (the first acquire in this process
//                                       maps the segment read-only) and "steady_ns".
#include <fmt/format.h>

#include "hurray/v1/exchange.pb.h"
#include "sections.h"
#include "system_info.h"

namespace hurray::bench {
namespace {

using std::chrono::seconds;

constexpr auto kWorkerTimeout = seconds(300);
constexpr double kNanosecondsToMicroseconds = 1e-3;

std::string ProducerName(std::uint64_t size) { return "bench/size-producer/" + SizeKey(size); }
std::string ConsumerName(std::uint64_t size) { return "bench/size-consumer/" + SizeKey(size); }

// Starts `processes` fresh workers one after the other and merges what they print.
Result<WorkerResults> RunFreshProcesses(Harness& harness, Placement placement, int processes,
                                        const WorkerArgs& args) {
  WorkerResults merged;
  for (int i = 0; i < processes; ++i) {
    auto results = harness.RunWorker(placement, args, kWorkerTimeout);
    if (!results) return std::unexpected(results.error());
    merged.Merge(*results);
  }
  return merged;
}

}  // namespace

int SizeProducerRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::uint64_t bytes = ArgNumber(args, 1, "BYTES");
  const std::string& name = Arg(args, 2, "NAME");
  const auto steady = static_cast<int>(ArgNumber(args, 3, "M"));
  auto client = ConnectWarm(socket, "size-producer");
  const TensorDescriptor descriptor = BytesTensor(bytes);
  std::vector<std::int64_t> first, steady_samples;
  for (int i = 0; i <= steady; ++i) {
    const std::int64_t start = NowNanoseconds();
    WritableTensor tensor = CheckOk(client->Allocate(descriptor), "Allocate");
    (void)CheckOk(tensor.Publish(name), "Publish");
    (i == 0 ? first : steady_samples).push_back(NowNanoseconds() - start);
  }
  (void)CheckOk(client->Delete(name), "Delete");
  EmitSamples("first_ns", first);
  EmitSamples("steady_ns", steady_samples);
  return 0;
}

int SizeConsumerRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const auto steady = static_cast<int>(ArgNumber(args, 2, "M"));
  const std::int64_t connect_start = NowNanoseconds();
  auto client = ConnectWarm(socket, "size-consumer");
  const std::int64_t connect = NowNanoseconds() - connect_start;
  std::vector<std::int64_t> first, steady_samples;
  for (int i = 0; i <= steady; ++i) {
    const std::int64_t start = NowNanoseconds();
    TensorView view = CheckOk(client->Acquire(name), "Acquire");
    CheckOk(view.Release(), "Release");
    (i == 0 ? first : steady_samples).push_back(NowNanoseconds() - start);
  }
  EmitValue("connect_ns", static_cast<double>(connect));
  EmitSamples("first_ns", first);
  EmitSamples("steady_ns", steady_samples);
  return 0;
}

Status RunSizeIndependence(Harness& harness, const SectionRun& run) {
  Report& report = harness.report();
  const Scale& scale = harness.scale();
  auto daemon = harness.Daemon(run.huge_pages);
  if (!daemon) return std::unexpected(daemon.error());
  const std::string socket = (*daemon)->socket_path();
  const std::string prefix = run.key_prefix + "size.";

  std::vector<std::string> consumer_names;
  for (std::uint64_t size : scale.tensor_sizes) {
    consumer_names.push_back(ConsumerName(size));
    if (auto published = harness.PublishTensor(ConsumerName(size), size, /*fill=*/false);
        !published) {
      return published;
    }
  }
  if (auto measured = harness.MeasureSocketRoundTrip(run.section, prefix + "raw_uds_round_trip");
      !measured) {
    return measured;
  }

  const auto add = [&](const std::string& key, const std::string& label, Placement placement,
                       const std::vector<double>& samples_ns) {
    report.AddFigure(FigureSpec{.key = prefix + key,
                                .section = run.section,
                                .label = label + run.label_suffix,
                                .unit = "us"},
                     placement, Scaled(Summarize(samples_ns), kNanosecondsToMicroseconds));
  };
  for (Placement placement : kBothPlacements) {
    if (auto placed = harness.Place(placement); !placed) return placed;
    WorkerResults connects;
    for (std::uint64_t size : scale.tensor_sizes) {
      const std::string size_key = SizeKey(size);
      harness.Progress("section " + std::to_string(run.section) + ", " +
                       std::string(PlacementName(placement)) + ": allocate+publish and " +
                       "acquire+release of " + FormatBytes(size));
      auto producer =
          RunFreshProcesses(harness, placement, scale.processes_per_size,
                            {"size-producer", socket, std::to_string(size), ProducerName(size),
                             std::to_string(scale.steady_repetitions_per_process)});
      if (!producer) return std::unexpected(producer.error());
      auto consumer = RunFreshProcesses(harness, placement, scale.processes_per_size,
                                        {"size-consumer", socket, ConsumerName(size),
                                         std::to_string(scale.steady_repetitions_per_process)});
      if (!consumer) return std::unexpected(consumer.error());
      add("producer_first." + size_key,
          "producer allocate+publish, first in process, " + FormatBytes(size), placement,
          producer->Values("first_ns"));
      add("producer_steady." + size_key, "producer allocate+publish, steady, " + FormatBytes(size),
          placement, producer->Values("steady_ns"));
      add("consumer_first." + size_key,
          "consumer acquire+map+release, first in process, " + FormatBytes(size), placement,
          consumer->Values("first_ns"));
      add("consumer_steady." + size_key, "consumer acquire+release, steady, " + FormatBytes(size),
          placement, consumer->Values("steady_ns"));
      connects.Merge(*consumer);
    }
    report.AddFigure(FigureSpec{.key = prefix + "consumer_connect",
                                .section = run.section,
                                .label = "consumer connect + first gRPC call" + run.label_suffix,
                                .unit = "ms"},
                     placement, Scaled(Summarize(connects.Values("connect_ns")), 1e-6));
  }
  harness.DeleteTensors(consumer_names);
  report.AddNote(run.section,
                 "\"first in process\" is a fresh process's first call after connecting: it maps "
                 "the pool's segment (mmap of the whole segment, no populate) and pays the "
                 "process's first-use costs (lazy symbol binding, cold code); \"steady\" is every "
                 "later call in the same process. No call writes or reads the tensor's bytes.");

  const std::string smallest = SizeKey(scale.tensor_sizes.front());
  const std::string largest = SizeKey(scale.tensor_sizes.back());
  for (const std::string figure :
       {"producer_first", "producer_steady", "consumer_first", "consumer_steady"}) {
    report.AddRatio(
        RatioSpec{.key = fmt::format("{}ratio.{}.{}_over_{}", prefix, figure, largest, smallest),
                  .section = run.section,
                  .label = fmt::format("{} {} / {}{}", figure, largest, smallest, run.label_suffix),
                  .numerator = fmt::format("{}{}.{}", prefix, figure, largest),
                  .denominator = fmt::format("{}{}.{}", prefix, figure, smallest),
                  .target = Target{.kind = Target::Kind::kAtMost, .value = 1.5}});
  }
  return {};
}

}  // namespace hurray::bench
