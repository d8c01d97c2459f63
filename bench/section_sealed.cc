// Section 10, the sealed pool's cost per tensor: a tensor of its own memfd, sealed at
// publish, against the shared-segment cpu pool, as a ratio per size.
//
// Worker roles:
//   sealed-producer SOCKET POOL BYTES NAME M   allocate a BYTES tensor in POOL, write every
//                                              byte, publish it under NAME; M + 1 times
//                                              (superseding); prints "steady_ns" for all but
//                                              the first; deletes NAME at the end;
//   sealed-consumer SOCKET NAME M              acquire NAME, read one byte of each page,
//                                              release; M + 1 times; prints "steady_ns" for
//                                              all but the first.
#include <fmt/format.h>

#include <cstddef>
#include <string>

#include "memory_touch.h"
#include "sections.h"
#include "system_info.h"

namespace hurray::bench {
namespace {

constexpr auto kWorkerTimeout = std::chrono::seconds(300);
constexpr double kNanosecondsToMicroseconds = 1e-3;
constexpr std::uint64_t kPage = 4096;
constexpr std::string_view kPools[] = {"cpu", "sealed"};

std::string TensorName(std::string_view pool, std::uint64_t size) {
  return fmt::format("bench/sealed-{}/{}", pool, SizeKey(size));
}

// Reads one byte of every page of `bytes`: what mapping the memory costs a reader.
std::uint64_t TouchEachPage(std::span<const std::byte> bytes) {
  std::uint64_t sum = 0;
  for (std::size_t offset = 0; offset < bytes.size(); offset += kPage) {
    sum += std::to_integer<std::uint64_t>(bytes[offset]);
  }
  return sum;
}

}  // namespace

int SealedProducerRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& pool = Arg(args, 1, "POOL");
  const std::uint64_t bytes = ArgNumber(args, 2, "BYTES");
  const std::string& name = Arg(args, 3, "NAME");
  const auto steady = static_cast<int>(ArgNumber(args, 4, "M"));
  auto client = ConnectWarm(socket, "sealed-producer");
  const TensorDescriptor descriptor = BytesTensor(bytes);
  std::vector<std::int64_t> samples;
  for (int i = 0; i <= steady; ++i) {
    const std::int64_t start = NowNanoseconds();
    WritableTensor tensor = CheckOk(client->Allocate(descriptor, pool), "Allocate");
    FillPattern(tensor.buffer(0));
    (void)CheckOk(tensor.Publish(name), "Publish");
    if (i > 0) samples.push_back(NowNanoseconds() - start);
  }
  (void)CheckOk(client->Delete(name), "Delete");
  EmitSamples("steady_ns", samples);
  return 0;
}

int SealedConsumerRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const auto steady = static_cast<int>(ArgNumber(args, 2, "M"));
  auto client = ConnectWarm(socket, "sealed-consumer");
  std::vector<std::int64_t> samples;
  std::uint64_t sum = 0;
  for (int i = 0; i <= steady; ++i) {
    const std::int64_t start = NowNanoseconds();
    TensorView view = CheckOk(client->Acquire(name), "Acquire");
    sum += TouchEachPage(view.buffer(0));
    CheckOk(view.Release(), "Release");
    if (i > 0) samples.push_back(NowNanoseconds() - start);
  }
  EmitValue("page_byte_sum", static_cast<double>(sum));  // Keeps the reads.
  EmitSamples("steady_ns", samples);
  return 0;
}

Status RunSealedPool(Harness& harness) {
  constexpr int kSection = 10;
  Report& report = harness.report();
  const Scale& scale = harness.scale();
  HURRAY_ASSIGN_OR_RETURN(testing::DaemonProcess * daemon, harness.Daemon());
  const std::string socket = daemon->socket_path();
  const std::string steady = std::to_string(scale.steady_repetitions_per_process);
  std::vector<std::string> published;
  for (std::string_view pool : kPools) {
    for (std::uint64_t size : scale.sealed_sizes) {
      published.push_back(TensorName(pool, size));
      HURRAY_RETURN_IF_ERROR(
          harness.PublishTensor(published.back(), size, /*fill=*/true, std::string(pool)));
    }
  }
  const auto add = [&](const std::string& key, const std::string& label, Placement placement,
                       const std::vector<double>& samples_ns) {
    report.AddFigure(
        FigureSpec{.key = "sealed." + key, .section = kSection, .label = label, .unit = "us"},
        placement, Scaled(Summarize(samples_ns), kNanosecondsToMicroseconds));
  };
  for (Placement placement : kBothPlacements) {
    HURRAY_RETURN_IF_ERROR(harness.Place(placement));
    for (std::string_view pool : kPools) {
      for (std::uint64_t size : scale.sealed_sizes) {
        harness.Progress(fmt::format("section 10, {}: pool {}, {}", PlacementName(placement), pool,
                                     FormatBytes(size)));
        const std::string key = fmt::format("{}.{}", pool, SizeKey(size));
        HURRAY_ASSIGN_OR_RETURN(
            WorkerResults producer,
            harness.RunWorker(placement,
                              {"sealed-producer", socket, std::string(pool), std::to_string(size),
                               TensorName(pool, size) + "-w", steady},
                              kWorkerTimeout));
        HURRAY_ASSIGN_OR_RETURN(
            WorkerResults consumer,
            harness.RunWorker(placement,
                              {"sealed-consumer", socket, TensorName(pool, size), steady},
                              kWorkerTimeout));
        add("producer." + key,
            fmt::format("pool {}: allocate+write+publish, {}", pool, FormatBytes(size)), placement,
            producer.Values("steady_ns"));
        add("consumer." + key,
            fmt::format("pool {}: acquire+map+read a byte per page+release, {}", pool,
                        FormatBytes(size)),
            placement, consumer.Values("steady_ns"));
      }
    }
  }
  harness.DeleteTensors(published);
  for (std::uint64_t size : scale.sealed_sizes) {
    for (const std::string figure : {"producer", "consumer"}) {
      const std::string size_key = SizeKey(size);
      report.AddRatio(
          RatioSpec{.key = fmt::format("sealed.ratio.{}.{}", figure, size_key),
                    .section = kSection,
                    .label = fmt::format("{} sealed / cpu, {}", figure, FormatBytes(size)),
                    .numerator = fmt::format("sealed.{}.sealed.{}", figure, size_key),
                    .denominator = fmt::format("sealed.{}.cpu.{}", figure, size_key),
                    .target = std::nullopt});
    }
  }
  report.AddNote(kSection,
                 "Steady state in one process. A sealed tensor is a memfd of its own: the "
                 "producer pays memfd_create + fallocate + a first touch of fresh pages, the "
                 "seal at publish and an unmap; each consumer acquire maps it anew (no cache: "
                 "the memfd is one tensor's), so its pages fault again. The cpu pool reuses "
                 "one cached mapping of a segment whose pages are already faulted in.");
  return {};
}

}  // namespace hurray::bench
