// Section 2, getting the bytes: a consumer reads every byte of a just-published tensor
// (1 GiB) through hurray, against reading its own already-touched memory (the floor; the
// target: <= 1.3x), memcpy, gRPC bytes and a GET from redis-server (the target: hurray >= 20x
// faster). "First" is the first time a fresh consumer process gets and reads the bytes
// (page faults, allocation and every copy on the way included); "repeat" is the same
// process doing it again.
//
// The hurray consumer is measured twice, in separate fresh processes: with a plain acquire
// (every first read of a 64 KiB stretch takes a page fault) and with AcquireOptions::populate
// (the acquire fills the page tables of the tensor's range with MADV_POPULATE_READ).
//
// Worker roles:
//   bytes-hurray SOCKET NAME BYTES MODE
//                                    MODE "plain" or "populate" (AcquireOptions::populate):
//                                    acquire NAME and read every byte ("first_acquire_ns",
//                                    "first_read_ns", "first_total_ns"), read it again
//                                    ("repeat_read_ns"), release, acquire and read again
//                                    ("repeat_total_ns"); checks the bytes;
//   bytes-local BYTES R              the floor: R timed reads of BYTES of its own memory,
//                                    written beforehand ("floor_ns"), and of memory advised
//                                    to use transparent huge pages ("floor_huge_ns"); memcpy
//                                    into fresh pages ("memcpy_first_ns") and again into the
//                                    same pages ("memcpy_repeat_ns"), R times.
#include <fmt/format.h>
#include <sys/mman.h>

#include <cstring>

#include "grpc_baseline.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/v1/exchange.pb.h"
#include "memory_touch.h"
#include "redis_baseline.h"
#include "sections.h"
#include "system_info.h"

namespace hurray::bench {
namespace {

using std::chrono::seconds;

constexpr auto kWorkerTimeout = seconds(300);
constexpr double kNanosecondsToMilliseconds = 1e-6;
const std::string kTensorName = "bench/bytes/tensor";

// An anonymous private mapping, unmapped in the destructor; its pages are not touched yet.
// With `huge`, advised to use transparent huge pages (the kernel may not).
class FreshPages {
 public:
  explicit FreshPages(std::size_t size, bool huge = false) : size_(size) {
    data_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data_ == MAP_FAILED) WorkerFail(ErrnoError("mmap", "", errno).message());
    if (huge) (void)::madvise(data_, size, MADV_HUGEPAGE);
  }
  FreshPages(const FreshPages&) = delete;
  FreshPages& operator=(const FreshPages&) = delete;
  ~FreshPages() { ::munmap(data_, size_); }
  [[nodiscard]] std::span<std::byte> bytes() const {
    return {static_cast<std::byte*>(data_), size_};
  }

 private:
  void* data_;
  std::size_t size_;
};

void CheckPattern(std::span<const std::byte> bytes, std::string_view what) {
  if (ReadEveryByte(bytes) != PatternChecksum(bytes.size())) {
    WorkerFail(std::string(what) + ": the bytes differ from the pattern");
  }
}

}  // namespace

int BytesHurrayRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const std::uint64_t bytes = ArgNumber(args, 2, "BYTES");
  const std::string& mode = Arg(args, 3, "MODE");
  if (mode != "plain" && mode != "populate") WorkerFail("MODE " + mode + ": plain or populate");
  const AcquireOptions options{.populate = mode == "populate"};
  auto client = ConnectWarm(socket, "bytes-hurray");
  const std::uint64_t expected = PatternChecksum(bytes);

  const std::int64_t start = NowNanoseconds();
  TensorView view = CheckOk(client->Acquire(name, options), "Acquire");
  const std::int64_t acquired = NowNanoseconds();
  const std::uint64_t first_sum = ReadEveryByte(view.buffer(0));
  const std::int64_t first_read = NowNanoseconds();
  const std::uint64_t second_sum = ReadEveryByte(view.buffer(0));
  const std::int64_t second_read = NowNanoseconds();
  if (view.buffer(0).size() != bytes || first_sum != expected || second_sum != expected) {
    WorkerFail("acquired " + name + ": the bytes differ from the pattern");
  }
  CheckOk(view.Release(), "Release");

  const std::int64_t again = NowNanoseconds();
  TensorView repeat = CheckOk(client->Acquire(name, options), "Acquire");
  const std::uint64_t repeat_sum = ReadEveryByte(repeat.buffer(0));
  const std::int64_t repeat_done = NowNanoseconds();
  if (repeat_sum != expected) WorkerFail("acquired " + name + " again: the bytes differ");
  CheckOk(repeat.Release(), "Release");

  EmitValue("first_acquire_ns", static_cast<double>(acquired - start));
  EmitValue("first_read_ns", static_cast<double>(first_read - acquired));
  EmitValue("first_total_ns", static_cast<double>(first_read - start));
  EmitValue("repeat_read_ns", static_cast<double>(second_read - first_read));
  EmitValue("repeat_total_ns", static_cast<double>(repeat_done - again));
  return 0;
}

int BytesLocalRole(const WorkerArgs& args) {
  const std::uint64_t bytes = ArgNumber(args, 0, "BYTES");
  const auto repetitions = static_cast<int>(ArgNumber(args, 1, "R"));
  FreshPages source(bytes);
  FillPattern(source.bytes());  // Touched: every page is resident and written.
  for (int i = 0; i < repetitions; ++i) {
    const std::int64_t start = NowNanoseconds();
    const std::uint64_t sum = ReadEveryByte(source.bytes());
    const std::int64_t elapsed = NowNanoseconds() - start;
    if (sum != PatternChecksum(bytes)) WorkerFail("local read: the bytes differ");
    EmitValue("floor_ns", static_cast<double>(elapsed));
  }
  {
    FreshPages huge_source(bytes, /*huge=*/true);
    FillPattern(huge_source.bytes());
    for (int i = 0; i < repetitions; ++i) {
      const std::int64_t start = NowNanoseconds();
      const std::uint64_t sum = ReadEveryByte(huge_source.bytes());
      const std::int64_t elapsed = NowNanoseconds() - start;
      if (sum != PatternChecksum(bytes)) WorkerFail("local read: the bytes differ");
      EmitValue("floor_huge_ns", static_cast<double>(elapsed));
    }
  }
  for (int i = 0; i < repetitions; ++i) {
    FreshPages destination(bytes);
    const std::int64_t start = NowNanoseconds();
    std::memcpy(destination.bytes().data(), source.bytes().data(), bytes);
    const std::int64_t first = NowNanoseconds();
    std::memcpy(destination.bytes().data(), source.bytes().data(), bytes);
    const std::int64_t repeat = NowNanoseconds();
    if (i == 0) CheckPattern(destination.bytes(), "memcpy");
    EmitValue("memcpy_first_ns", static_cast<double>(first - start));
    EmitValue("memcpy_repeat_ns", static_cast<double>(repeat - first));
  }
  return 0;
}

Status RunGettingTheBytes(Harness& harness, const SectionRun& run) {
  Report& report = harness.report();
  const Scale& scale = harness.scale();
  const std::uint64_t bytes = scale.read_bytes;
  const std::string size = FormatBytes(bytes);
  const std::string prefix = run.key_prefix + "bytes.";
  const std::string baseline_prefix = "bytes.";  // Baselines are measured once.
  auto daemon = harness.Daemon(run.huge_pages);
  if (!daemon) return std::unexpected(daemon.error());
  const std::string socket = (*daemon)->socket_path();

  std::string grpc_socket;
  std::string redis_socket;
  if (run.baselines) {
    harness.Progress("section 2: starting the gRPC server and redis-server with " + size);
    auto grpc = harness.GrpcServerSocket(bytes);
    if (!grpc) return std::unexpected(grpc.error());
    grpc_socket = *grpc;
    auto redis = harness.Redis();
    if (!redis) return std::unexpected(redis.error());
    if (auto stored = (*redis)->StoreTensor(bytes); !stored) return stored;
    redis_socket = (*redis)->socket_path();
  }

  const auto add = [&](const std::string& key, const std::string& label, Placement placement,
                       const std::vector<double>& samples_ns) {
    report.AddFigure(FigureSpec{.key = key,
                                .section = run.section,
                                .label = label + ", " + size + run.label_suffix,
                                .unit = "ms"},
                     placement, Scaled(Summarize(samples_ns), kNanosecondsToMilliseconds));
  };
  const std::string repetitions = std::to_string(scale.read_repetitions);
  for (Placement placement : kBothPlacements) {
    if (auto placed = harness.Place(placement); !placed) return placed;
    const std::string where = "section " + std::to_string(run.section) + ", " +
                              std::string(PlacementName(placement)) + ": ";

    if (run.baselines) {
      harness.Progress(fmt::format("{}reading {} of local memory, memcpy", where, size));
      auto local = harness.RunWorker(placement, {"bytes-local", std::to_string(bytes), repetitions},
                                     kWorkerTimeout);
      if (!local) return std::unexpected(local.error());
      add(baseline_prefix + "local_read", "local memory, touched: read all (the floor)", placement,
          local->Values("floor_ns"));
      add(baseline_prefix + "local_read_huge_pages", "local memory, MADV_HUGEPAGE: read all",
          placement, local->Values("floor_huge_ns"));
      add(baseline_prefix + "memcpy_first", "memcpy into fresh pages", placement,
          local->Values("memcpy_first_ns"));
      add(baseline_prefix + "memcpy_repeat", "memcpy into touched pages", placement,
          local->Values("memcpy_repeat_ns"));
    }

    harness.Progress(fmt::format("{}hurray: publish {}, fresh consumers read it", where, size));
    WorkerResults hurray;
    WorkerResults populated;
    for (int i = 0; i < scale.read_repetitions; ++i) {
      // Plain and populate alternate, each on a fresh publish, so drift hits both alike.
      for (const std::string mode : {"plain", "populate"}) {
        if (auto published = harness.PublishTensor(kTensorName, bytes, /*fill=*/true); !published) {
          return published;
        }
        auto results = harness.RunWorker(
            placement, {"bytes-hurray", socket, kTensorName, std::to_string(bytes), mode},
            kWorkerTimeout);
        if (!results) return std::unexpected(results.error());
        (mode == "plain" ? hurray : populated).Merge(*results);
      }
    }
    add(prefix + "hurray_first_total", "hurray: acquire + read all, first touch", placement,
        hurray.Values("first_total_ns"));
    add(prefix + "hurray_first_acquire", "hurray: acquire+map alone (bytes readable)", placement,
        hurray.Values("first_acquire_ns"));
    add(prefix + "hurray_first_read", "hurray: the read alone, first touch", placement,
        hurray.Values("first_read_ns"));
    add(prefix + "hurray_populate_first_total",
        "hurray: acquire with populate + read all, first touch", placement,
        populated.Values("first_total_ns"));
    add(prefix + "hurray_populate_first_acquire", "hurray: acquire with populate alone", placement,
        populated.Values("first_acquire_ns"));
    add(prefix + "hurray_populate_first_read", "hurray: the read alone, after populate", placement,
        populated.Values("first_read_ns"));
    add(prefix + "hurray_repeat_read", "hurray: read all again, same mapping", placement,
        hurray.Values("repeat_read_ns"));
    add(prefix + "hurray_repeat_total", "hurray: release, acquire + read all again", placement,
        hurray.Values("repeat_total_ns"));

    if (!run.baselines) continue;
    harness.Progress(fmt::format("{}gRPC bytes: fresh consumers stream {}", where, size));
    WorkerResults grpc;
    for (int i = 0; i < scale.read_repetitions; ++i) {
      auto results = harness.RunWorker(
          placement,
          {"grpc-bytes", grpc_socket, std::to_string(bytes), std::to_string(kGrpcChunkBytes), "2"},
          kWorkerTimeout);
      if (!results) return std::unexpected(results.error());
      grpc.Merge(*results);
    }
    add(baseline_prefix + "grpc_first", "gRPC bytes: stream 1 MiB messages + read, first",
        placement, grpc.Values("first_ns"));
    add(baseline_prefix + "grpc_repeat", "gRPC bytes: stream + read, repeat", placement,
        grpc.Values("repeat_ns"));

    harness.Progress(fmt::format("{}redis: fresh consumers GET {}", where, size));
    WorkerResults redis;
    for (int i = 0; i < scale.read_repetitions; ++i) {
      auto results = harness.RunWorker(
          placement, {"redis-get", redis_socket, std::to_string(bytes), "2"}, kWorkerTimeout);
      if (!results) return std::unexpected(results.error());
      redis.Merge(*results);
    }
    add(baseline_prefix + "redis_first", "redis GET 256 MiB values + read, first", placement,
        redis.Values("first_ns"));
    add(baseline_prefix + "redis_repeat", "redis GET + read, repeat", placement,
        redis.Values("repeat_ns"));
  }
  harness.DeleteTensors({kTensorName});
  if (run.baselines) {
    report.AddNote(run.section,
                   "first touch: a fresh consumer process acquires the just-published tensor and "
                   "reads it, so the page faults that map the shared pages into it are included; "
                   "the floor reads pages already mapped. \"with populate\": the acquire asks for "
                   "AcquireOptions::populate (madvise MADV_POPULATE_READ on the tensor's range), "
                   "which fills the page tables inside the acquire instead of faulting during "
                   "the read. Every method reads every byte with the same AVX2 loop and checks "
                   "the bytes against the pattern.");
  }

  const auto ratio = [&](const std::string& key, const std::string& label,
                         const std::string& numerator, const std::string& denominator,
                         std::optional<Target> target) {
    report.AddRatio(RatioSpec{.key = prefix + "ratio." + key,
                              .section = run.section,
                              .label = label + run.label_suffix,
                              .numerator = numerator,
                              .denominator = denominator,
                              .target = target});
  };
  const Target close_to_floor{.kind = Target::Kind::kAtMost, .value = 1.3};
  const Target twenty_times{.kind = Target::Kind::kAtLeast, .value = 20};
  ratio("hurray_first_over_floor", "hurray first touch / local read", prefix + "hurray_first_total",
        baseline_prefix + "local_read", close_to_floor);
  ratio("hurray_populate_first_over_floor", "hurray first touch with populate / local read",
        prefix + "hurray_populate_first_total", baseline_prefix + "local_read", close_to_floor);
  ratio("hurray_populate_first_over_hurray_first", "hurray first touch: populate / plain",
        prefix + "hurray_populate_first_total", prefix + "hurray_first_total", std::nullopt);
  ratio("hurray_repeat_over_floor", "hurray repeat / local read", prefix + "hurray_repeat_total",
        baseline_prefix + "local_read", close_to_floor);
  ratio("memcpy_first_over_hurray_first", "memcpy fresh / hurray first touch",
        baseline_prefix + "memcpy_first", prefix + "hurray_first_total", std::nullopt);
  ratio("grpc_first_over_hurray_first", "gRPC bytes first / hurray first",
        baseline_prefix + "grpc_first", prefix + "hurray_first_total", twenty_times);
  ratio("redis_first_over_hurray_first", "redis GET first / hurray first",
        baseline_prefix + "redis_first", prefix + "hurray_first_total", twenty_times);
  ratio("grpc_repeat_over_hurray_repeat", "gRPC bytes repeat / hurray repeat",
        baseline_prefix + "grpc_repeat", prefix + "hurray_repeat_total", twenty_times);
  ratio("grpc_first_over_hurray_acquire", "gRPC bytes first / hurray acquire+map",
        baseline_prefix + "grpc_first", prefix + "hurray_first_acquire", std::nullopt);
  ratio("redis_repeat_over_hurray_repeat", "redis GET repeat / hurray repeat",
        baseline_prefix + "redis_repeat", prefix + "hurray_repeat_total", twenty_times);
  return {};
}

}  // namespace hurray::bench
