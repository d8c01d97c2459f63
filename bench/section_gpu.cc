// Section 7, GPU exchange: handing over device memory of the daemon's pool
// cuda:0 — acquire+map of one 1 GiB tensor (--gpu-tensor-mib) and of a 1,000-tensor model set,
// first in a fresh process (the slabs are imported and mapped) and steady (the mappings are cached)
// — against copying the same bytes: cuMemcpyDtoD (device to device), and through pinned host memory
// (device to host, then host to device). Also counts how many slab imports a fresh process makes
// per slab (one: sharing costs per slab, not per tensor).
//
// Driver API calls only, through the driver hurray itself loads (cuda/driver.h:
// dlopen("libcuda.so.1") at run time), so that the benchmark starts, and skips the section,
// without a driver, and runs the section on any driver that implements those calls (the
// software driver of tests/softcuda included: --software-driver-label labels such a run, whose
// figures are no GPU's). Measured only where this process sees a CUDA device; otherwise the
// section is one note saying why it was skipped. Producers fill with cuMemsetD8Async and
// publish with an Event handoff (PublishAfter); the figures wait for the data on a stream
// (WaitOn), which enqueues nothing once it is ready.
//
// Worker roles:
//   gpu-publish SOCKET PREFIX COUNT BYTES  publish PREFIX000000.. (COUNT tensors of BYTES in
//                                          cuda:0), then wait for the GPU
//   gpu-acquire SOCKET PREFIX COUNT R      BatchAcquire every name under PREFIX and wait for
//                                          each on a stream: "first_ns" once (fresh
//                                          process), then R times "steady_ns"; "slab_imports"
//                                          (slab mappings this process reported) and "slabs"
//                                          (the slabs the set lies in)
//   gpu-copy BYTES R                       R times each: "d2d_ns" (cuMemcpyDtoD of BYTES)
//                                          and "host_ns" (device to pinned host to device)
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
#include <cuda.h>
#include <sys/mman.h>

#include "hurray/cuda/driver.h"
#endif

namespace hurray::bench {
namespace {

constexpr int kSection = 7;
constexpr std::string_view kPool = "cuda:0";
constexpr auto kWorkerTimeout = std::chrono::seconds(300);
const std::string kBigPrefix = "gpu/big-";
const std::string kSetPrefix = "gpu/set-";
// The one big tensor's bytes unless --gpu-tensor-mib says otherwise.
constexpr std::uint64_t kDefaultBigBytes = std::uint64_t{1} << 30;
// The note of a run on a software driver (--software-driver-label).
constexpr std::string_view kSoftwareDriverLabel =
    "software driver: no GPU figure (the section's harness ran end to end on a CUDA driver "
    "that is not a GPU; its timings measure host memory copies)";

#if HURRAY_HAVE_CUDA

// The driver (cuda::LoadDriver), and the calls of the section that DriverApi lacks (product
// code never makes them), resolved through the driver's cuGetProcAddress with the ABI of
// CUDA 12.0, as LoadDriver resolves its own.
struct BenchDriver {
  const cuda::DriverApi* api = nullptr;
  decltype(&::cuMemsetD8Async) MemsetD8Async = nullptr;
  decltype(&::cuMemcpyDtoD_v2) MemcpyDtoD = nullptr;
  decltype(&::cuMemcpyHtoD_v2) MemcpyHtoD = nullptr;
};

// Loaded once per process; the first outcome is kept.
const Result<BenchDriver>& LoadBenchDriver() {
  static const Result<BenchDriver> loaded = []() -> Result<BenchDriver> {
    BenchDriver driver;
    HURRAY_ASSIGN_OR_RETURN(driver.api, cuda::LoadDriver());
    HURRAY_RETURN_IF_ERROR(cuda::ResolveDriverEntryPoint("cuMemsetD8Async", driver.MemsetD8Async));
    HURRAY_RETURN_IF_ERROR(cuda::ResolveDriverEntryPoint("cuMemcpyDtoD", driver.MemcpyDtoD));
    HURRAY_RETURN_IF_ERROR(cuda::ResolveDriverEntryPoint("cuMemcpyHtoD", driver.MemcpyHtoD));
    return driver;
  }();
  return loaded;
}

// The worker's driver; WorkerFail when it cannot be loaded.
const BenchDriver& WorkerDriver() {
  const Result<BenchDriver>& driver = LoadBenchDriver();
  if (!driver) WorkerFail("the CUDA driver: " + driver.error().ToString());
  return *driver;
}

void CheckDriver(CUresult result, std::string_view call) {
  if (result != CUDA_SUCCESS)
    WorkerFail(cuda::CudaError(WorkerDriver().api, call, result).ToString());
}

// A stream of device 0 in its primary context, made current on this thread before anything
// is timed.
class WorkerStream {
 public:
  WorkerStream() : driver_(WorkerDriver()) {
    const cuda::DriverApi& api = *driver_.api;
    CheckDriver(api.DeviceGet(&device_, 0), "cuDeviceGet(0)");
    CheckDriver(api.DevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
    CheckDriver(api.CtxSetCurrent(context_), "cuCtxSetCurrent");
    CheckDriver(api.StreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  WorkerStream(const WorkerStream&) = delete;
  WorkerStream& operator=(const WorkerStream&) = delete;
  ~WorkerStream() {
    (void)driver_.api->StreamDestroy(stream_);
    (void)driver_.api->CtxSetCurrent(nullptr);
    (void)driver_.api->DevicePrimaryCtxRelease(device_);
  }
  [[nodiscard]] CUstream get() const { return stream_; }
  void Synchronize() const {
    CheckDriver(driver_.api->StreamSynchronize(stream_), "cuStreamSynchronize");
  }

 private:
  const BenchDriver& driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
};

// Device memory (cuMemAlloc) or, with `host`, pinned host memory (pages registered with
// cuMemHostRegister) of `bytes`, freed with the object. Needs the context current.
class WorkerMemory {
 public:
  WorkerMemory(std::uint64_t bytes, bool host) : api_(*WorkerDriver().api), bytes_(bytes) {
    if (!host) {
      CheckDriver(api_.MemAlloc(&device_, bytes), "cuMemAlloc");
      return;
    }
    host_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (host_ == MAP_FAILED) WorkerFail(fmt::format("mmap of {} bytes of host memory", bytes));
    CheckDriver(api_.MemHostRegister(host_, bytes, 0), "cuMemHostRegister");
  }
  WorkerMemory(const WorkerMemory&) = delete;
  WorkerMemory& operator=(const WorkerMemory&) = delete;
  ~WorkerMemory() {
    if (host_ != nullptr) {
      (void)api_.MemHostUnregister(host_);
      (void)::munmap(host_, bytes_);
    } else {
      (void)api_.MemFree(device_);
    }
  }
  [[nodiscard]] CUdeviceptr device() const { return device_; }
  [[nodiscard]] void* host() const { return host_; }

 private:
  const cuda::DriverApi& api_;
  std::uint64_t bytes_ = 0;
  CUdeviceptr device_ = 0;
  void* host_ = nullptr;
};

CUdeviceptr DevicePointer(void* data) { return reinterpret_cast<CUdeviceptr>(data); }

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
    CheckDriver(
        WorkerDriver().MemsetD8Async(DevicePointer(tensor.data(0)),
                                     static_cast<unsigned char>(i & 0xFF), bytes, stream.get()),
        "cuMemsetD8Async");
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
  const BenchDriver& driver = WorkerDriver();
  const cuda::DriverApi& api = *driver.api;
  WorkerMemory source(bytes, /*host=*/false);
  WorkerMemory target(bytes, /*host=*/false);
  WorkerMemory host(bytes, /*host=*/true);
  CheckDriver(driver.MemsetD8Async(source.device(), 0x5A, bytes, stream.get()), "cuMemsetD8Async");
  stream.Synchronize();
  const auto timed = [&](std::string_view key, const auto& copy) {
    CheckDriver(api.CtxSynchronize(), "cuCtxSynchronize");
    const std::int64_t start = NowNanoseconds();
    copy();
    // A device-to-device copy may return before it is done.
    CheckDriver(api.CtxSynchronize(), "cuCtxSynchronize");
    EmitValue(key, static_cast<double>(NowNanoseconds() - start));
  };
  for (std::uint64_t i = 0; i < repetitions; ++i) {
    timed("d2d_ns", [&] {
      CheckDriver(driver.MemcpyDtoD(target.device(), source.device(), bytes), "cuMemcpyDtoD");
    });
    timed("host_ns", [&] {
      CheckDriver(api.MemcpyDtoH(host.host(), source.device(), bytes), "cuMemcpyDtoH");
      CheckDriver(driver.MemcpyHtoD(target.device(), host.host(), bytes), "cuMemcpyHtoD");
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
  const Result<BenchDriver>& driver = LoadBenchDriver();
  if (!driver) return fmt::format("skipped: no CUDA device ({})", driver.error().message());
  int devices = 0;
  if (const CUresult result = driver->api->DeviceGetCount(&devices); result != CUDA_SUCCESS) {
    return fmt::format("skipped: no CUDA device ({})",
                       cuda::CudaError(driver->api, "cuDeviceGetCount", result).message());
  }
  if (devices == 0) return "skipped: no CUDA device";
  return std::nullopt;
#else
  return "skipped: hurray_bench was built without the CUDA toolkit";
#endif
}

// "device 0: NAME (UUID)", as this process's driver names it: which device the figures are
// of (a software driver's, under --software-driver-label, is no GPU).
std::string DescribeDevice() {
#if HURRAY_HAVE_CUDA
  const Result<BenchDriver>& driver = LoadBenchDriver();
  if (!driver) return "device 0: unknown (" + driver.error().message() + ")";
  const cuda::DriverApi& api = *driver->api;
  CUdevice device = 0;
  std::string name(256, '\0');
  if (api.DeviceGet(&device, 0) != CUDA_SUCCESS ||
      api.DeviceGetName(name.data(), static_cast<int>(name.size()), device) != CUDA_SUCCESS) {
    return "device 0: unknown (cuDeviceGet or cuDeviceGetName failed)";
  }
  name.resize(name.find('\0'));
  const Result<cuda::DeviceUuids> uuids = cuda::ReadDeviceUuids(api, device);
  return fmt::format("device 0: {} ({})", name, uuids ? uuids->uuid : "no UUID");
#else
  return "device 0: none";
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
  add("memcpy_d2d", "cuMemcpyDtoD device to device", copies, "d2d_ns");
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
                  .label = fmt::format("{} / cuMemcpyDtoD, {}", figure, set.Describe()),
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
  harness.report().AddNote(kSection, DescribeDevice());
  if (harness.options().software_driver_label) {
    harness.report().AddNote(kSection, std::string(kSoftwareDriverLabel));
    harness.Progress(fmt::format("section 7: {}", kSoftwareDriverLabel));
  }
  HURRAY_ASSIGN_OR_RETURN(testing::DaemonProcess * daemon, harness.FreshDaemon());
  const std::string socket = daemon->socket_path();
  HURRAY_ASSIGN_OR_RETURN(const v1::StatsResponse stats, testing::FetchDaemonStats(socket));
  if (auto pool = testing::FindPool(stats, kPool); !pool) return std::unexpected(pool.error());
  HURRAY_RETURN_IF_ERROR(harness.Place(Placement::kUnpinned));
  const Scale& scale = harness.scale();
  const auto model_count = static_cast<std::uint64_t>(scale.model_tensor_count);
  const std::uint64_t big_bytes = harness.options().gpu_tensor_mib << 20;
  const GpuSet sets[] = {
      {.key = big_bytes == kDefaultBigBytes ? "1GiB" : fmt::format("{}MiB", big_bytes >> 20),
       .prefix = kBigPrefix,
       .count = 1,
       .each = big_bytes},
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
