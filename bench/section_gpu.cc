// Section 7, GPU exchange (issue 9): handing over device memory of the daemon's pool
// cuda:0 — acquire+map of one 1 GiB tensor and of a 1,000-tensor model set, first in a
// fresh process (the slabs are imported and mapped) and steady (the mappings are cached) —
// against copying the same bytes: cudaMemcpy device to device, and through pinned host
// memory (device to host, then host to device). Also counts how many slab imports a fresh
// process makes per slab (one: sharing costs per slab, not per tensor).
//
// Measured only where this process sees a CUDA device; otherwise the section is one note
// saying why it was skipped. Producers fill with cudaMemsetAsync and publish with an Event
// handoff (PublishAfter); the figures wait for the data on a stream (WaitOn), which enqueues
// nothing once it is ready.
//
// Worker roles:
//   gpu-publish SOCKET PREFIX COUNT BYTES  publish PREFIX000000.. (COUNT tensors of BYTES in
//                                          cuda:0), then wait for the GPU
//   gpu-acquire SOCKET PREFIX COUNT R      BatchAcquire every name under PREFIX and wait for
//                                          each on a stream: "first_ns" once (fresh
//                                          process), then R times "steady_ns"; "slab_imports"
//                                          (slab mappings this process reported) and "slabs"
//                                          (the slabs the set lies in)
//   gpu-copy BYTES R                       R times each: "d2d_ns" (cudaMemcpy device to
//                                          device of BYTES) and "host_ns" (device to pinned
//                                          host to device)
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hurray/buffer_handle.h"
#include "sections.h"
#include "system_info.h"
#include "testing/daemon_stats.h"

#if HURRAY_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace hurray::bench {
namespace {

constexpr int kSection = 7;
constexpr std::string_view kPool = "cuda:0";
constexpr auto kWorkerTimeout = std::chrono::seconds(300);
const std::string kBigPrefix = "gpu/big-";
const std::string kSetPrefix = "gpu/set-";

#if HURRAY_HAVE_CUDA

void CheckCudaRuntime(cudaError_t result, std::string_view call) {
  if (result != cudaSuccess) {
    WorkerFail(
        fmt::format("{}: {} ({})", call, cudaGetErrorName(result), cudaGetErrorString(result)));
  }
}

// A stream of device 0, with the CUDA context made before anything is timed.
class WorkerStream {
 public:
  WorkerStream() {
    CheckCudaRuntime(cudaSetDevice(0), "cudaSetDevice(0)");
    CheckCudaRuntime(cudaFree(nullptr), "cudaFree(nullptr): make the context");
    CheckCudaRuntime(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                     "cudaStreamCreateWithFlags");
  }
  WorkerStream(const WorkerStream&) = delete;
  WorkerStream& operator=(const WorkerStream&) = delete;
  ~WorkerStream() { (void)cudaStreamDestroy(stream_); }
  [[nodiscard]] cudaStream_t get() const { return stream_; }
  void Synchronize() const { CheckCudaRuntime(cudaStreamSynchronize(stream_), "synchronize"); }

 private:
  cudaStream_t stream_ = nullptr;
};

// Device (or, with `host`, pinned host) memory of `bytes`, freed with the object.
class WorkerMemory {
 public:
  WorkerMemory(std::uint64_t bytes, bool host) : host_(host) {
    CheckCudaRuntime(host ? cudaMallocHost(&data_, bytes) : cudaMalloc(&data_, bytes),
                     host ? "cudaMallocHost" : "cudaMalloc");
  }
  WorkerMemory(const WorkerMemory&) = delete;
  WorkerMemory& operator=(const WorkerMemory&) = delete;
  ~WorkerMemory() { (void)(host_ ? cudaFreeHost(data_) : cudaFree(data_)); }
  [[nodiscard]] void* get() const { return data_; }

 private:
  void* data_ = nullptr;
  bool host_ = false;
};

TensorDescriptor EventBytesTensor(std::uint64_t bytes) {
  auto buffer =
      CheckOk(BufferHandle::Create(bytes, kMinBufferAlignment, DeviceTag::Cuda(), SyncMode::kEvent),
              "BufferHandle::Create");
  return CheckOk(TensorDescriptor::Create(
                     {.element_type = ElementType::kUint8, .shape = {bytes}, .buffers = {buffer}}),
                 "TensorDescriptor::Create");
}

v1::PoolStats DevicePoolStats(const std::string& socket) {
  const v1::StatsResponse stats = CheckOk(testing::FetchDaemonStats(socket), "Stats");
  return CheckOk(testing::FindPool(stats, kPool), "FindPool");
}

// The distinct slabs the batch's buffers lie in (from Describe: untimed).
std::size_t SlabsOf(Client& client, const TensorViewBatch& batch) {
  std::set<std::uint64_t> slabs;
  for (const TensorView& view : batch) {
    const TensorDetails details = CheckOk(client.Describe(view.name(), view.version()), "Describe");
    for (const BufferLocation& buffer : details.buffers) slabs.insert(buffer.segment_id);
  }
  return slabs.size();
}

std::string SetName(const std::string& prefix, std::uint64_t index) {
  return fmt::format("{}{:06}", prefix, index);
}

#endif  // HURRAY_HAVE_CUDA

}  // namespace

#if HURRAY_HAVE_CUDA

int GpuPublishRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& prefix = Arg(args, 1, "PREFIX");
  const std::uint64_t count = ArgNumber(args, 2, "COUNT");
  const std::uint64_t bytes = ArgNumber(args, 3, "BYTES");
  WorkerStream stream;
  auto client = ConnectWarm(socket, "gpu-publish");
  const TensorDescriptor descriptor = EventBytesTensor(bytes);
  for (std::uint64_t i = 0; i < count; ++i) {
    WritableTensor tensor = CheckOk(client->Allocate(descriptor, kPool), "Allocate");
    CheckCudaRuntime(
        cudaMemsetAsync(tensor.data(0), static_cast<int>(i & 0xFF), bytes, stream.get()),
        "cudaMemsetAsync");
    CheckOk(tensor.PublishAfter(SetName(prefix, i), stream.get()), "PublishAfter");
  }
  stream.Synchronize();
  return 0;
}

int GpuAcquireRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& prefix = Arg(args, 1, "PREFIX");
  const std::uint64_t count = ArgNumber(args, 2, "COUNT");
  const std::uint64_t repetitions = ArgNumber(args, 3, "R");
  WorkerStream stream;
  auto client = ConnectWarm(socket, "gpu-acquire");
  const v1::PoolStats before = DevicePoolStats(socket);
  const auto acquire_all = [&](std::string_view key) {
    const std::int64_t start = NowNanoseconds();
    TensorViewBatch batch = CheckOk(client->BatchAcquire({}, prefix), "BatchAcquire");
    for (const TensorView& view : batch) CheckOk(view.WaitOn(stream.get()), "WaitOn");
    stream.Synchronize();
    EmitValue(key, static_cast<double>(NowNanoseconds() - start));
    if (batch.size() != count) {
      WorkerFail(fmt::format("BatchAcquire found {} of {}", batch.size(), count));
    }
    return batch;
  };
  {
    TensorViewBatch first = acquire_all("first_ns");
    const v1::PoolStats holding = DevicePoolStats(socket);
    EmitValue("slab_imports",
              static_cast<double>(holding.slab_mappings() - before.slab_mappings()));
    EmitValue("slabs", static_cast<double>(SlabsOf(*client, first)));
  }
  for (std::uint64_t i = 0; i < repetitions; ++i) (void)acquire_all("steady_ns");
  return 0;
}

int GpuCopyRole(const WorkerArgs& args) {
  const std::uint64_t bytes = ArgNumber(args, 0, "BYTES");
  const std::uint64_t repetitions = ArgNumber(args, 1, "R");
  WorkerStream stream;
  WorkerMemory source(bytes, /*host=*/false);
  WorkerMemory target(bytes, /*host=*/false);
  WorkerMemory host(bytes, /*host=*/true);
  CheckCudaRuntime(cudaMemset(source.get(), 0x5A, bytes), "cudaMemset");
  const auto timed = [&](std::string_view key, const auto& copy) {
    CheckCudaRuntime(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const std::int64_t start = NowNanoseconds();
    copy();
    // cudaMemcpy of device to device may return before the copy is done.
    CheckCudaRuntime(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    EmitValue(key, static_cast<double>(NowNanoseconds() - start));
  };
  for (std::uint64_t i = 0; i < repetitions; ++i) {
    timed("d2d_ns", [&] {
      CheckCudaRuntime(cudaMemcpy(target.get(), source.get(), bytes, cudaMemcpyDeviceToDevice),
                       "cudaMemcpy(device to device)");
    });
    timed("host_ns", [&] {
      CheckCudaRuntime(cudaMemcpy(host.get(), source.get(), bytes, cudaMemcpyDeviceToHost),
                       "cudaMemcpy(device to host)");
      CheckCudaRuntime(cudaMemcpy(target.get(), host.get(), bytes, cudaMemcpyHostToDevice),
                       "cudaMemcpy(host to device)");
    });
  }
  return 0;
}

#else  // !HURRAY_HAVE_CUDA

int GpuPublishRole(const WorkerArgs&) { WorkerFail("hurray_bench was built without CUDA"); }
int GpuAcquireRole(const WorkerArgs&) { WorkerFail("hurray_bench was built without CUDA"); }
int GpuCopyRole(const WorkerArgs&) { WorkerFail("hurray_bench was built without CUDA"); }

#endif  // HURRAY_HAVE_CUDA

namespace {

// Why section 7 cannot run here; nullopt when this process sees a CUDA device.
std::optional<std::string> GpuSkipReason() {
#if HURRAY_HAVE_CUDA
  int devices = 0;
  if (const cudaError_t result = cudaGetDeviceCount(&devices); result != cudaSuccess) {
    return fmt::format("skipped: no CUDA device (cudaGetDeviceCount: {})",
                       cudaGetErrorName(result));
  }
  if (devices == 0) return "skipped: no CUDA device";
  return std::nullopt;
#else
  return "skipped: hurray_bench was built without the CUDA toolkit";
#endif
}

struct GpuSet {
  std::string key;     // "1GiB", "set"
  std::string prefix;  // Its names' prefix.
  std::uint64_t count = 0;
  std::uint64_t each = 0;  // Bytes of each tensor.
  [[nodiscard]] std::string Describe() const {
    return count == 1
               ? FormatBytes(each)
               : fmt::format("{} x {} = {}", count, FormatBytes(each), FormatBytes(count * each));
  }
};

// Fresh consumers acquire `set` and wait for it; adds its figures and the ratios to copies.
Status MeasureSet(Harness& harness, const std::string& socket, const GpuSet& set) {
  Report& report = harness.report();
  const Scale& scale = harness.scale();
  harness.Progress("section 7: publishing " + set.Describe() + " in " + std::string(kPool));
  if (auto published = harness.RunWorker(
          Placement::kUnpinned,
          {"gpu-publish", socket, set.prefix, std::to_string(set.count), std::to_string(set.each)},
          kWorkerTimeout);
      !published) {
    return std::unexpected(published.error());
  }
  WorkerResults acquired;
  for (int i = 0; i < scale.model_repetitions; ++i) {
    HURRAY_ASSIGN_OR_RETURN(
        WorkerResults results,
        harness.RunWorker(Placement::kUnpinned,
                          {"gpu-acquire", socket, set.prefix, std::to_string(set.count), "5"},
                          kWorkerTimeout));
    acquired.Merge(results);
  }
  HURRAY_ASSIGN_OR_RETURN(
      WorkerResults copies,
      harness.RunWorker(Placement::kUnpinned,
                        {"gpu-copy", std::to_string(set.count * set.each), "5"}, kWorkerTimeout));
  const auto add = [&](const std::string& figure, const std::string& label,
                       const WorkerResults& results, const std::string& values) {
    report.AddFigure(FigureSpec{.key = fmt::format("gpu.{}.{}", figure, set.key),
                                .section = kSection,
                                .label = fmt::format("{}, {}", label, set.Describe()),
                                .unit = "ms"},
                     Placement::kUnpinned, Scaled(Summarize(results.Values(values)), 1e-6));
  };
  add("acquire_first", "acquire+map+wait, fresh process", acquired, "first_ns");
  add("acquire_steady", "acquire+map+wait, steady", acquired, "steady_ns");
  add("memcpy_d2d", "cudaMemcpy device to device", copies, "d2d_ns");
  add("memcpy_via_host", "copy through pinned host memory", copies, "host_ns");
  std::vector<double> per_slab;
  const auto& imports = acquired.Values("slab_imports");
  const auto& slabs = acquired.Values("slabs");
  for (std::size_t i = 0; i < imports.size() && i < slabs.size(); ++i) {
    per_slab.push_back(slabs[i] > 0 ? imports[i] / slabs[i] : 0);
  }
  report.AddFigure(
      FigureSpec{.key = "gpu.imports_per_slab." + set.key,
                 .section = kSection,
                 .label = "slab imports per slab in a fresh process, " + set.Describe(),
                 .unit = "imports/slab"},
      Placement::kUnpinned, Summarize(per_slab));
  for (const std::string figure : {"acquire_first", "acquire_steady"}) {
    report.AddRatio(
        RatioSpec{.key = fmt::format("gpu.ratio.{}_over_memcpy_d2d.{}", figure, set.key),
                  .section = kSection,
                  .label = fmt::format("{} / cudaMemcpy d2d, {}", figure, set.Describe()),
                  .numerator = fmt::format("gpu.{}.{}", figure, set.key),
                  .denominator = fmt::format("gpu.memcpy_d2d.{}", set.key)});
  }
  return {};
}

}  // namespace

Status RunGpu(Harness& harness) {
  if (const std::optional<std::string> reason = GpuSkipReason()) {
    harness.report().AddNote(kSection, *reason);
    harness.Progress("section 7: " + *reason);
    return {};
  }
  HURRAY_ASSIGN_OR_RETURN(testing::DaemonProcess * daemon, harness.FreshDaemon());
  const std::string socket = daemon->socket_path();
  HURRAY_ASSIGN_OR_RETURN(const v1::StatsResponse stats, testing::FetchDaemonStats(socket));
  if (auto pool = testing::FindPool(stats, kPool); !pool) return std::unexpected(pool.error());
  HURRAY_RETURN_IF_ERROR(harness.Place(Placement::kUnpinned));
  const Scale& scale = harness.scale();
  const auto model_count = static_cast<std::uint64_t>(scale.model_tensor_count);
  const GpuSet sets[] = {
      {.key = "1GiB", .prefix = kBigPrefix, .count = 1, .each = std::uint64_t{1} << 30},
      {.key = "set",
       .prefix = kSetPrefix,
       .count = model_count,
       .each = scale.model_total_bytes / model_count / 4096 * 4096},
  };
  for (const GpuSet& set : sets) HURRAY_RETURN_IF_ERROR(MeasureSet(harness, socket, set));
  harness.report().AddNote(kSection,
                           "acquire+map+wait: BatchAcquire, then WaitOn on a stream of the "
                           "consumer's and a stream synchronize (the data is ready: nothing "
                           "waits on the GPU); the copies are of the same bytes, in one call");
  return harness.StopDaemon();
}

}  // namespace hurray::bench
