// Section 5, scale and memory: the daemon holding 100,000 small published tensors — its own
// memory per tensor (the target: well under 1 KiB), and list and describe latency at that
// size — then a model-like set (1,000 tensors, 2 GiB in all) batch-acquired by a consumer.
// The section runs on a fresh hurrayd, so the heap it measures holds only these tensors.
//
// Worker roles:
//   scale-publish SOCKET PREFIX FIRST COUNT   publish PREFIX<FIRST>..PREFIX<FIRST+COUNT-1>,
//                                             256-byte tensors; prints "elapsed_ns";
//   scale-inspect SOCKET PREFIX TOTAL N F     N timed List (page of 100, page of 1000) and
//                                             Describe calls, F listings of all TOTAL names
//                                             in pages of 1000: "list_100_ns", "list_1000_ns",
//                                             "describe_ns", "list_all_ns";
//   model-publish SOCKET PREFIX COUNT BYTES   publish COUNT tensors of BYTES, each written with
//                                             the pattern: "allocate_publish_ns" per tensor
//                                             (the calls only), "total_ns" (writing included);
//   model-batch SOCKET PREFIX COUNT R         R times: BatchAcquire every name under PREFIX
//                                             ("first_batch_ns" the first time in this process,
//                                             then "steady_batch_ns") and release the batch in
//                                             one request ("release_batch_ns"); then again,
//                                             releasing the views one by one, a request each
//                                             ("release_each_ns").
#include <fmt/format.h>

#include <cstdio>
#include <iterator>
#include <thread>

#include "hurray/v1/exchange.pb.h"
#include "memory_touch.h"
#include "sections.h"
#include "system_info.h"

namespace hurray::bench {
namespace {

using std::chrono::seconds;

constexpr int kSection = 5;
constexpr auto kPublishTimeout = seconds(600);
constexpr auto kWorkerTimeout = seconds(300);
constexpr int kPublishers = 2;
constexpr std::uint64_t kSmallTensorFloats = 64;  // 256 bytes.
constexpr std::uint32_t kSmallPage = 100;
constexpr std::uint32_t kLargePage = 1000;
const std::string kScalePrefix = "scale/t";
const std::string kModelPrefix = "model/layer-";

std::string NumberedName(const std::string& prefix, std::uint64_t index) {
  char digits[24];
  std::snprintf(digits, sizeof(digits), "%06llu", static_cast<unsigned long long>(index));
  return prefix + digits;
}

}  // namespace

int ScalePublishRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& prefix = Arg(args, 1, "PREFIX");
  const std::uint64_t first = ArgNumber(args, 2, "FIRST");
  const std::uint64_t count = ArgNumber(args, 3, "COUNT");
  auto client = ConnectWarm(socket, "scale-publish");
  const TensorDescriptor descriptor =
      CheckOk(TensorDescriptor::Dense(ElementType::kFloat32, {kSmallTensorFloats}), "Dense");
  ReadyThenWaitForGo();
  const std::int64_t start = NowNanoseconds();
  for (std::uint64_t i = first; i < first + count; ++i) {
    WritableTensor tensor = CheckOk(client->Allocate(descriptor), "Allocate");
    (void)CheckOk(tensor.Publish(NumberedName(prefix, i)), "Publish");
  }
  EmitValue("elapsed_ns", static_cast<double>(NowNanoseconds() - start));
  return 0;
}

int ScaleInspectRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& prefix = Arg(args, 1, "PREFIX");
  const std::uint64_t total = ArgNumber(args, 2, "TOTAL");
  const auto samples = static_cast<int>(ArgNumber(args, 3, "N"));
  const auto listings = static_cast<int>(ArgNumber(args, 4, "F"));
  auto client = ConnectWarm(socket, "scale-inspect");
  std::vector<std::int64_t> small_pages, large_pages, describes, full_listings;
  for (int i = 0; i < samples; ++i) {
    std::int64_t start = NowNanoseconds();
    auto small = CheckOk(client->List(prefix, kSmallPage), "List");
    small_pages.push_back(NowNanoseconds() - start);
    start = NowNanoseconds();
    auto large = CheckOk(client->List(prefix, kLargePage), "List");
    large_pages.push_back(NowNanoseconds() - start);
    if (static_cast<std::uint64_t>(small.tensors.size()) !=
        std::min<std::uint64_t>(total, kSmallPage)) {
      WorkerFail("List returned " + std::to_string(small.tensors.size()) + " names");
    }
    // Spread over the whole name space, not one hot entry.
    const std::string name = NumberedName(prefix, (static_cast<std::uint64_t>(i) * 7919) % total);
    start = NowNanoseconds();
    (void)CheckOk(client->Describe(name), "Describe " + name);
    describes.push_back(NowNanoseconds() - start);
  }
  for (int i = 0; i < listings; ++i) {
    const std::int64_t start = NowNanoseconds();
    std::uint64_t names = 0;
    std::string token;
    do {
      auto page = CheckOk(client->List(prefix, kLargePage, token), "List");
      names += static_cast<std::uint64_t>(page.tensors.size());
      token = page.next_page_token;
    } while (!token.empty());
    full_listings.push_back(NowNanoseconds() - start);
    if (names != total) {
      WorkerFail("listing all found " + std::to_string(names) + " of " + std::to_string(total));
    }
  }
  EmitSamples("list_100_ns", small_pages);
  EmitSamples("list_1000_ns", large_pages);
  EmitSamples("describe_ns", describes);
  EmitSamples("list_all_ns", full_listings);
  return 0;
}

int ModelPublishRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& prefix = Arg(args, 1, "PREFIX");
  const std::uint64_t count = ArgNumber(args, 2, "COUNT");
  const std::uint64_t bytes = ArgNumber(args, 3, "BYTES");
  auto client = ConnectWarm(socket, "model-publish");
  const TensorDescriptor descriptor = BytesTensor(bytes);
  std::vector<std::int64_t> calls;
  const std::int64_t start = NowNanoseconds();
  for (std::uint64_t i = 0; i < count; ++i) {
    std::int64_t call_start = NowNanoseconds();
    WritableTensor tensor = CheckOk(client->Allocate(descriptor), "Allocate");
    std::int64_t call_time = NowNanoseconds() - call_start;
    FillPattern(tensor.buffer(0));
    call_start = NowNanoseconds();
    (void)CheckOk(tensor.Publish(NumberedName(prefix, i)), "Publish");
    calls.push_back(call_time + NowNanoseconds() - call_start);
  }
  EmitValue("total_ns", static_cast<double>(NowNanoseconds() - start));
  EmitSamples("allocate_publish_ns", calls);
  return 0;
}

int ModelBatchAcquireRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& prefix = Arg(args, 1, "PREFIX");
  const std::uint64_t count = ArgNumber(args, 2, "COUNT");
  const auto repetitions = static_cast<int>(ArgNumber(args, 3, "R"));
  auto client = ConnectWarm(socket, "model-batch");
  const auto acquire_all = [&](std::string_view key) {
    const std::int64_t start = NowNanoseconds();
    TensorViewBatch batch = CheckOk(client->BatchAcquire({}, prefix), "BatchAcquire");
    EmitValue(key, static_cast<double>(NowNanoseconds() - start));
    if (batch.size() != count) {
      WorkerFail("BatchAcquire found " + std::to_string(batch.size()) + " of " +
                 std::to_string(count));
    }
    return batch;
  };
  for (int i = 0; i < repetitions; ++i) {
    TensorViewBatch batch = acquire_all(i == 0 ? "first_batch_ns" : "steady_batch_ns");
    std::int64_t start = NowNanoseconds();
    CheckOk(batch.Release(), "TensorViewBatch::Release");  // One request.
    EmitValue("release_batch_ns", static_cast<double>(NowNanoseconds() - start));

    TensorViewBatch again = acquire_all("steady_batch_ns");
    std::vector<TensorView> views(std::make_move_iterator(again.begin()),
                                  std::make_move_iterator(again.end()));
    start = NowNanoseconds();
    views.clear();  // Each view ends its own lease: a request each.
    EmitValue("release_each_ns", static_cast<double>(NowNanoseconds() - start));
  }
  return 0;
}

Status RunScaleAndMemory(Harness& harness) {
  Report& report = harness.report();
  const Scale& scale = harness.scale();
  harness.StopBulkBaselines();  // Their tensors' memory back before this section's.
  auto daemon = harness.FreshDaemon();
  if (!daemon) return std::unexpected(daemon.error());
  const std::string socket = (*daemon)->socket_path();
  const pid_t pid = (*daemon)->pid();
  if (auto measured = harness.MeasureSocketRoundTrip(kSection, "scale.raw_uds_round_trip");
      !measured) {
    return measured;
  }
  if (auto placed = harness.Place(Placement::kUnpinned); !placed) return placed;

  // 100,000 small tensors, published by two processes at once.
  const auto count = static_cast<std::uint64_t>(scale.scale_tensor_count);
  harness.Progress("section 5: publishing " + std::to_string(count) + " small tensors");
  auto before = ReadProcessMemory(pid);
  if (!before) return std::unexpected(before.error());
  std::vector<WorkerArgs> publishers;
  for (int i = 0; i < kPublishers; ++i) {
    const std::uint64_t first = count * static_cast<std::uint64_t>(i) / kPublishers;
    const std::uint64_t last = count * static_cast<std::uint64_t>(i + 1) / kPublishers;
    publishers.push_back({"scale-publish", socket, kScalePrefix, std::to_string(first),
                          std::to_string(last - first)});
  }
  auto published = harness.RunWorkersTogether(Placement::kUnpinned, publishers, kPublishTimeout);
  if (!published) return std::unexpected(published.error());
  auto after = ReadProcessMemory(pid);
  if (!after) return std::unexpected(after.error());
  double slowest = 0;
  for (const WorkerResults& publisher : *published) {
    slowest = std::max(slowest, publisher.Single("elapsed_ns"));
  }
  const auto any = [&](const std::string& key, const std::string& label, const std::string& unit,
                       double value) {
    report.AddFigure(FigureSpec{.key = key, .section = kSection, .label = label, .unit = unit},
                     Placement::kAny, Summarize({value}));
  };
  const auto n = static_cast<double>(count);
  any("scale.publish_rate", "publishing " + std::to_string(count) + " tensors, 2 processes",
      "tensors/s", n / (slowest * 1e-9));
  any("scale.daemon_rss_anon_before", "daemon RssAnon before", "MiB",
      static_cast<double>(before->rss_anon) / (1 << 20));
  any("scale.daemon_rss_anon_after", "daemon RssAnon holding " + std::to_string(count) + " tensors",
      "MiB", static_cast<double>(after->rss_anon) / (1 << 20));
  const double heap_per_tensor =
      (static_cast<double>(after->rss_anon) - static_cast<double>(before->rss_anon)) / n;
  any("scale.daemon_rss_anon_per_tensor", "daemon private memory (RssAnon) per tensor", "B/tensor",
      heap_per_tensor);
  any("scale.daemon_vm_rss_per_tensor", "daemon VmRSS per tensor", "B/tensor",
      (static_cast<double>(after->vm_rss) - static_cast<double>(before->vm_rss)) / n);
  char verdict[200];
  std::snprintf(verdict, sizeof(verdict),
                "target: well under 1 KiB of the daemon's own memory per tensor: "
                "%.0f B of RssAnon per tensor, %s",
                heap_per_tensor, heap_per_tensor < 1024 ? "met" : "NOT met");
  report.AddNote(kSection, verdict);

  const std::string total = std::to_string(count);
  for (Placement placement : kBothPlacements) {
    if (auto placed = harness.Place(placement); !placed) return placed;
    harness.Progress("section 5, " + std::string(PlacementName(placement)) + ": list, describe");
    auto inspected = harness.RunWorker(
        placement,
        {"scale-inspect", socket, kScalePrefix, total, std::to_string(scale.inspect_samples),
         std::to_string(scale.full_listings)},
        kWorkerTimeout);
    if (!inspected) return std::unexpected(inspected.error());
    const auto add = [&](const std::string& key, const std::string& label, const std::string& unit,
                         double factor, const std::string& values) {
      report.AddFigure(FigureSpec{.key = key, .section = kSection, .label = label, .unit = unit},
                       placement, Scaled(Summarize(inspected->Values(values)), factor));
    };
    add("scale.list_page_100", "List, first page of 100, of " + total, "us", 1e-3, "list_100_ns");
    add("scale.list_page_1000", "List, first page of 1000, of " + total, "us", 1e-3,
        "list_1000_ns");
    add("scale.describe", "Describe one name among " + total, "us", 1e-3, "describe_ns");
    add("scale.list_all", "List all " + total + " names, pages of 1000", "ms", 1e-6, "list_all_ns");
  }

  // A model-like set: 1,000 tensors, 2 GiB in all, each a multiple of the page size.
  if (auto placed = harness.Place(Placement::kUnpinned); !placed) return placed;
  const auto model_count = static_cast<std::uint64_t>(scale.model_tensor_count);
  const std::uint64_t each = scale.model_total_bytes / model_count / 4096 * 4096;
  const std::string set = std::to_string(model_count) + " x " + FormatBytes(each) + " = " +
                          FormatBytes(each * model_count);
  harness.Progress("section 5: publishing a model-like set, " + set);
  auto model = harness.RunWorker(
      Placement::kUnpinned,
      {"model-publish", socket, kModelPrefix, std::to_string(model_count), std::to_string(each)},
      kPublishTimeout);
  if (!model) return std::unexpected(model.error());
  report.AddFigure(FigureSpec{.key = "model.allocate_publish",
                              .section = kSection,
                              .label = "model set: allocate+publish per tensor",
                              .unit = "us"},
                   Placement::kUnpinned,
                   Scaled(Summarize(model->Values("allocate_publish_ns")), 1e-3));
  report.AddFigure(FigureSpec{.key = "model.publish_total",
                              .section = kSection,
                              .label = "model set: publish all, writing included",
                              .unit = "ms"},
                   Placement::kUnpinned, Scaled(Summarize(model->Values("total_ns")), 1e-6));
  for (Placement placement : kBothPlacements) {
    if (auto placed = harness.Place(placement); !placed) return placed;
    harness.Progress("section 5, " + std::string(PlacementName(placement)) +
                     ": BatchAcquire of the model set");
    WorkerResults batches;
    for (int i = 0; i < scale.model_repetitions; ++i) {
      auto results = harness.RunWorker(
          placement, {"model-batch", socket, kModelPrefix, std::to_string(model_count), "3"},
          kWorkerTimeout);
      if (!results) return std::unexpected(results.error());
      batches.Merge(*results);
    }
    const auto add = [&](const std::string& key, const std::string& label,
                         const std::string& values) {
      report.AddFigure(FigureSpec{.key = key,
                                  .section = kSection,
                                  .label = fmt::format("{}, {}", label, set),
                                  .unit = "ms"},
                       placement, Scaled(Summarize(batches.Values(values)), 1e-6));
    };
    add("model.batch_acquire_first", "BatchAcquire all, first in process", "first_batch_ns");
    add("model.batch_acquire_steady", "BatchAcquire all, steady", "steady_batch_ns");
    add("model.release_batch", "release the batch (one request)", "release_batch_ns");
    add("model.release_all", "release the views one by one", "release_each_ns");
  }
  return harness.StopDaemon();
}

}  // namespace hurray::bench
