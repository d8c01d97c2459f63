// cuda_device_check: the first program to run on a GPU machine, the first step of the GPU
// check (tests/cuda/run_on_gpu.sh; docs/gpu.md, "Tests and the GPU check"): does the driver
// do what the GPU path assumes of it? Driver API only: it links no CUDA runtime and
// loads libcuda.so.1 through hurray's own loader (hurray/cuda/driver.h), as hurrayd does, so
// it runs on any driver hurray runs on (CUDA 12.0 and later) and on softcuda alike.
//
//   cuda_device_check [all|environment|cyclic-geq|host-register|vmm]       (default: all)
//
// Steps, on device 0 where one device is enough:
//   a. environment: the driver's version and, for every device, its name, UUIDs and the
//      attributes the GPU path depends on, and the VMM allocation granularity;
//   b. cyclic-geq: cuStreamWaitValue64(GEQ 1) on a registered host word stays blocked when
//      the word is UINT64_MAX (the compare is cyclic, (int64_t)(word - value) >= 0, so a
//      poison of 2^64-1 would never release a waiting stream) and is released by INT64_MAX;
//   c. host-register: a fence-like page (shm, MAP_SHARED) registered mapped read-only with
//      CU_MEMHOSTREGISTER_READ_ONLY (unsupported is INFO: a consumer then relays the fence
//      with a thread, docs/gpu.md) and mapped read-write;
//      a stream waits on each registered word, which the host then sets;
//   d. vmm: the daemon's path, in a fresh process with no context: cuMemCreate of one
//      granule with POSIX_FD, export; then a second process imports the descriptor, maps it
//      with PROT_READ and reads cuMemGetAccess; a third one tries a one-byte cuMemsetD8
//      through the read-only mapping (a fault that kills it counts as a refusal).
//
// Every result is one line on stdout, "PASS|FAIL|INFO|SKIP <step> <detail>", flushed at once.
// Exit status: 1 when any line is FAIL; 0 otherwise. Exactly one line, "SKIP no CUDA driver
// ..." or "SKIP no CUDA device ...", and exit 0 when libcuda.so.1 cannot be loaded or the
// driver has no device (CUDA_ERROR_NO_DEVICE, or a count of 0); any other failure to start
// the driver (CUDA_ERROR_INSUFFICIENT_DRIVER, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, ...) is FAIL.
//
// Internal modes, the separate processes of step d: vmm-export, vmm-import FD BYTES and
// vmm-write FD BYTES.
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "hurray/cuda/driver.h"

namespace hurray::device_check {
namespace {

using namespace std::chrono_literals;
using cuda::DriverApi;

constexpr std::size_t kPageBytes = 4096;
// The fence segment's size (daemon/src/registry/fence_table.h).
constexpr std::size_t kFenceSegmentBytes = std::size_t{64} << 10;
// The VMM check's allocation: at least this, rounded up to the granularity.
constexpr std::size_t kVmmBytes = std::size_t{2} << 20;

// The result lines, and whether any was FAIL. Not thread-safe: one per process.
class Report {
 public:
  void Pass(std::string_view step, std::string_view detail = {}) { Line("PASS", step, detail); }
  void Fail(std::string_view step, std::string_view detail) {
    ++failures_;
    Line("FAIL", step, detail);
  }
  void Info(std::string_view step, std::string_view detail) { Line("INFO", step, detail); }
  void Skip(std::string_view step, std::string_view detail) { Line("SKIP", step, detail); }
  // For the results a child process printed itself and reported in its exit status.
  void CountFailure() { ++failures_; }
  [[nodiscard]] int ExitStatus() const { return failures_ > 0 ? 1 : 0; }

 private:
  static void Line(std::string_view outcome, std::string_view step, std::string_view detail) {
    fmt::print("{} {}{}{}\n", outcome, step, detail.empty() ? "" : " ", detail);
    // Child processes write to the same stdout: every line leaves at once, in order.
    (void)std::fflush(stdout);
  }
  int failures_ = 0;
};

// "CUDA_ERROR_NOT_SUPPORTED", or the number when the driver has no name for it.
std::string ErrorName(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  if (api.GetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return fmt::format("CUresult {}", static_cast<int>(result));
  }
  return name;
}

std::string Version(int version) {
  return fmt::format("{} (CUDA {}.{})", version, version / 1000, version % 1000 / 10);
}

// The driver calls DriverApi lacks (product code never makes them), resolved through
// cuGetProcAddress of the loaded libcuda.so.1 at the ABI of CUDA 12.0, as DriverApi is.
// Each is null when the driver lacks it.
struct ExtraCalls {
  decltype(&::cuMemGetAccess) MemGetAccess = nullptr;
  decltype(&::cuMemsetD8) MemsetD8 = nullptr;

  static ExtraCalls Resolve() {
    ExtraCalls calls;
    // A driver that lacks one leaves it null: its step says so.
    (void)cuda::ResolveDriverEntryPoint("cuMemGetAccess", calls.MemGetAccess);
    (void)cuda::ResolveDriverEntryPoint("cuMemsetD8", calls.MemsetD8);
    return calls;
  }
};

// ---------------------------------------------------------------------------------------
// Starting the driver, and the one SKIP.

// Whether the driver can be used. On no driver or no device: the one SKIP line, and the
// caller exits 0. On any other failure: FAIL lines. Else the loaded driver.
enum class Start : std::uint8_t { kReady, kSkipped, kFailed };

// cuInit's own result, before hurray's loader wraps it into a message: so that
// CUDA_ERROR_NO_DEVICE (a skip) is told from every other error (a failure) by its code.
Start ProbeDriver(Report& report, int& driver_version) {
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): one thread here; glibc keeps it per thread anyway.
    const char* why = ::dlerror();
    report.Skip("no CUDA driver", fmt::format("(dlopen libcuda.so.1: {})", why ? why : "?"));
    return Start::kSkipped;
  }
  using GetVersion = CUresult (*)(int*);
  using Init = CUresult (*)(unsigned int);
  using GetName = CUresult (*)(CUresult, const char**);
  // NOLINTBEGIN: dlsym returns void*.
  auto* get_version = reinterpret_cast<GetVersion>(::dlsym(library, "cuDriverGetVersion"));
  auto* init = reinterpret_cast<Init>(::dlsym(library, "cuInit"));
  auto* get_name = reinterpret_cast<GetName>(::dlsym(library, "cuGetErrorName"));
  // NOLINTEND
  if (get_version == nullptr || init == nullptr || get_name == nullptr) {
    report.Fail("driver", "libcuda.so.1 lacks cuDriverGetVersion, cuInit or cuGetErrorName");
    return Start::kFailed;
  }
  if (const CUresult result = get_version(&driver_version); result != CUDA_SUCCESS) {
    report.Fail("driver", fmt::format("cuDriverGetVersion: CUresult {}", static_cast<int>(result)));
    return Start::kFailed;
  }
  const CUresult result = init(0);
  if (result == CUDA_ERROR_NO_DEVICE) {
    report.Skip("no CUDA device", "(cuInit: CUDA_ERROR_NO_DEVICE)");
    return Start::kSkipped;
  }
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (get_name(result, &name) != CUDA_SUCCESS) name = nullptr;
    report.Fail("driver", fmt::format("cuInit: {}; driver {}",
                                      name ? name : std::to_string(static_cast<int>(result)),
                                      Version(driver_version)));
    return Start::kFailed;
  }
  return Start::kReady;
}

// The driver, through hurray's loader, and its device count. `quiet`: no INFO lines (the
// child processes of step d, whose parent printed them).
Start StartDriver(Report& report, bool quiet, const DriverApi*& api, int& device_count) {
  int driver_version = 0;
  if (const Start probed = ProbeDriver(report, driver_version); probed != Start::kReady) {
    return probed;
  }
  const Result<const DriverApi*> loaded = cuda::LoadDriver();
  if (!loaded) {
    report.Fail("driver", fmt::format("hurray's loader: {}", loaded.error().message()));
    return Start::kFailed;
  }
  api = *loaded;
  if (const CUresult result = api->DeviceGetCount(&device_count); result != CUDA_SUCCESS) {
    if (result == CUDA_ERROR_NO_DEVICE) {
      report.Skip("no CUDA device", "(cuDeviceGetCount: CUDA_ERROR_NO_DEVICE)");
      return Start::kSkipped;
    }
    report.Fail("driver", fmt::format("cuDeviceGetCount: {}", ErrorName(*api, result)));
    return Start::kFailed;
  }
  if (device_count == 0) {
    report.Skip("no CUDA device", "(cuDeviceGetCount: 0)");
    return Start::kSkipped;
  }
  if (!quiet) {
    Dl_info where{};
    const bool found = ::dladdr(reinterpret_cast<void*>(api->DeviceGetCount), &where) != 0;
    report.Info("a.driver-version",
                fmt::format("cuDriverGetVersion {}, libcuda {}", Version(api->driver_version),
                            found && where.dli_fname ? where.dli_fname : "?"));
    report.Info("a.device-count", std::to_string(device_count));
  }
  return Start::kReady;
}

// ---------------------------------------------------------------------------------------
// a. Environment and attributes.

struct AttributeCheck {
  const char* name;  // After CU_DEVICE_ATTRIBUTE_.
  CUdevice_attribute attribute;
  // Needed by hurray's GPU path: 0, or an error, is FAIL (else INFO).
  bool required;
  const char* why;  // What it decides.
};

constexpr AttributeCheck kAttributes[] = {
    {"VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
     true, "cuMemCreate pools"},
    {"HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED",
     CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, true,
     "slabs exported as descriptors"},
    {"READ_ONLY_HOST_REGISTER_SUPPORTED", CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED,
     false, "consumers register fences read-only"},
    {"HOST_REGISTER_SUPPORTED", CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, true,
     "fence pages registered"},
    {"PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES",
     CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, false,
     "without it READ_ONLY is needed for read-only maps"},
    {"CAN_USE_64_BIT_STREAM_MEM_OPS", CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, true,
     "cuStreamWaitValue64 fences"},
    {"CAN_FLUSH_REMOTE_WRITES", CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, false,
     "CU_STREAM_WAIT_VALUE_FLUSH"},
    {"GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED",
     CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, false,
     "gpuDirectRDMACapable slabs"},
};

CUmemAllocationProp ExportableProperties(CUdevice device) {
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location = {CU_MEM_LOCATION_TYPE_DEVICE, device};
  properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return properties;
}

void CheckDeviceNames(const DriverApi& api, Report& report, CUdevice device,
                      const std::string& prefix) {
  std::array<char, 256> name{};
  const CUresult named = api.DeviceGetName(name.data(), static_cast<int>(name.size()), device);
  std::size_t memory = 0;
  const CUresult sized = api.DeviceTotalMem(&memory, device);
  if (named != CUDA_SUCCESS || sized != CUDA_SUCCESS) {
    report.Fail(prefix + "name", fmt::format("cuDeviceGetName: {}, cuDeviceTotalMem: {}",
                                             ErrorName(api, named), ErrorName(api, sized)));
  } else {
    report.Info(prefix + "name", fmt::format("{}, {} MiB", name.data(), memory >> 20));
  }
  CUuuid uuid{};
  const CUresult v2 = api.DeviceGetUuid(&uuid, device);
  std::array<unsigned char, 16> bytes{};
  std::memcpy(bytes.data(), uuid.bytes, bytes.size());
  std::string physical = "not resolved (the driver has no cuDeviceGetUuid of CUDA 11.0)";
  if (api.DeviceGetPhysicalUuid != nullptr) {
    CUuuid parent{};
    const CUresult v1 = api.DeviceGetPhysicalUuid(&parent, device);
    std::array<unsigned char, 16> parent_bytes{};
    std::memcpy(parent_bytes.data(), parent.bytes, parent_bytes.size());
    physical = v1 == CUDA_SUCCESS ? cuda::FormatDeviceUuid(parent_bytes) : ErrorName(api, v1);
  }
  if (v2 != CUDA_SUCCESS) {
    report.Fail(prefix + "uuid", fmt::format("cuDeviceGetUuid_v2: {}", ErrorName(api, v2)));
    return;
  }
  const Result<cuda::DeviceUuids> uuids = cuda::ReadDeviceUuids(api, device);
  report.Info(prefix + "uuid",
              fmt::format("_v2 {}, 11.0 {}; hurray names it {}", cuda::FormatDeviceUuid(bytes),
                          physical, uuids ? uuids->uuid : uuids.error().message()));
}

void CheckAttributes(const DriverApi& api, Report& report, CUdevice device,
                     const std::string& prefix) {
  for (const AttributeCheck& check : kAttributes) {
    int value = 0;
    const CUresult result = api.DeviceGetAttribute(&value, check.attribute, device);
    const std::string step = prefix + check.name;
    if (result != CUDA_SUCCESS) {
      const std::string detail = fmt::format("cuDeviceGetAttribute: {}", ErrorName(api, result));
      check.required ? report.Fail(step, detail) : report.Info(step, detail);
    } else if (check.required) {
      const std::string detail = fmt::format("{}; needed for: {}", value, check.why);
      value != 0 ? report.Pass(step, detail) : report.Fail(step, detail);
    } else {
      report.Info(step, fmt::format("{}; decides: {}", value, check.why));
    }
  }
}

void CheckGranularity(const DriverApi& api, Report& report, CUdevice device,
                      const std::string& prefix) {
  const CUmemAllocationProp properties = ExportableProperties(device);
  std::size_t minimum = 0;
  std::size_t recommended = 0;
  const CUresult min_result =
      api.MemGetAllocationGranularity(&minimum, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  const CUresult rec_result = api.MemGetAllocationGranularity(&recommended, &properties,
                                                              CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (min_result != CUDA_SUCCESS || rec_result != CUDA_SUCCESS) {
    report.Fail(prefix + "granularity",
                fmt::format("cuMemGetAllocationGranularity (POSIX_FD): minimum {}, recommended {}",
                            ErrorName(api, min_result), ErrorName(api, rec_result)));
    return;
  }
  report.Info(prefix + "granularity", fmt::format("POSIX_FD pinned: minimum {} KiB, recommended "
                                                  "{} KiB",
                                                  minimum >> 10, recommended >> 10));
}

void CheckEnvironment(const DriverApi& api, Report& report, int device_count) {
  for (int ordinal = 0; ordinal < device_count; ++ordinal) {
    const std::string prefix = fmt::format("a.dev{}.", ordinal);
    CUdevice device = 0;
    if (const CUresult result = api.DeviceGet(&device, ordinal); result != CUDA_SUCCESS) {
      report.Fail(prefix + "get", fmt::format("cuDeviceGet: {}", ErrorName(api, result)));
      continue;
    }
    CheckDeviceNames(api, report, device, prefix);
    CheckAttributes(api, report, device, prefix);
    CheckGranularity(api, report, device, prefix);
  }
}

// ---------------------------------------------------------------------------------------
// Shared by steps b to d: device 0's primary context, streams, waits.

// Device 0's primary context, current on this thread while the object lives. Not movable.
class PrimaryContext {
 public:
  PrimaryContext(const DriverApi& api, Report& report, std::string_view step) : api_(api) {
    CUcontext context = nullptr;
    result_ = api.DevicePrimaryCtxRetain(&context, 0);
    if (result_ == CUDA_SUCCESS) {
      retained_ = true;
      result_ = api.CtxSetCurrent(context);
    }
    if (result_ != CUDA_SUCCESS) {
      report.Fail(step, fmt::format("device 0's primary context: {}", ErrorName(api, result_)));
    }
  }
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
  ~PrimaryContext() {
    if (!retained_) return;
    (void)api_.CtxSetCurrent(nullptr);
    (void)api_.DevicePrimaryCtxRelease(0);
  }
  [[nodiscard]] bool ok() const { return result_ == CUDA_SUCCESS; }

 private:
  const DriverApi& api_;
  CUresult result_ = CUDA_SUCCESS;
  bool retained_ = false;
};

// A stream that waits on a word, and an event recorded after the wait. Destroyed only when
// the wait has ended (Ended), else leaked: a stream still blocked on host memory must keep
// that memory registered, so the caller leaks it too.
class WaitingStream {
 public:
  // Queues "wait until (int64_t)(*word - value) >= 0", then the event. The error of the
  // first call that failed, naming it.
  static Result<WaitingStream> Start(const DriverApi& api, CUdeviceptr word, std::uint64_t value) {
    WaitingStream waiting(api);
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
        api, "cuStreamCreate", api.StreamCreate(&waiting.stream_, CU_STREAM_NON_BLOCKING)));
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
        api, "cuEventCreate", api.EventCreate(&waiting.event_, CU_EVENT_DISABLE_TIMING)));
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
        api, "cuStreamWaitValue64",
        api.StreamWaitValue64(waiting.stream_, word, value, CU_STREAM_WAIT_VALUE_GEQ)));
    HURRAY_RETURN_IF_ERROR(
        cuda::CheckCuda(api, "cuEventRecord", api.EventRecord(waiting.event_, waiting.stream_)));
    waiting.ended_ = false;
    return waiting;
  }
  WaitingStream(WaitingStream&& other) noexcept
      : api_(other.api_),
        stream_(std::exchange(other.stream_, nullptr)),
        event_(std::exchange(other.event_, nullptr)),
        ended_(other.ended_) {}
  WaitingStream& operator=(WaitingStream&&) = delete;
  WaitingStream(const WaitingStream&) = delete;
  WaitingStream& operator=(const WaitingStream&) = delete;
  ~WaitingStream() {
    if (!ended_) return;  // Leaked: see the class comment.
    if (event_ != nullptr) (void)api_->EventDestroy(event_);
    if (stream_ != nullptr) (void)api_->StreamDestroy(stream_);
  }

  // cuEventQuery: CUDA_ERROR_NOT_READY while the wait holds the stream.
  [[nodiscard]] CUresult Query() const { return api_->EventQuery(event_); }

  // Polls until the event completes or `timeout` passes; the last cuEventQuery result.
  CUresult AwaitEnd(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    CUresult result = Query();
    while (result == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
      result = Query();
    }
    if (result != CUDA_ERROR_NOT_READY) ended_ = true;
    return result;
  }
  [[nodiscard]] bool ended() const { return ended_; }

 private:
  explicit WaitingStream(const DriverApi& api) : api_(&api) {}
  const DriverApi* api_;
  CUstream stream_ = nullptr;
  CUevent event_ = nullptr;
  bool ended_ = true;  // Until the wait is queued, nothing blocks the stream.
};

void Store(std::uint64_t* word, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(*word).store(value, std::memory_order_release);
}

// Host pages mapped at their own address; unmapped with the object unless leaked. Move-only.
class Mapping {
 public:
  static std::optional<Mapping> Create(std::size_t size, int protection, int flags, int fd) {
    void* address = ::mmap(nullptr, size, protection, flags, fd, 0);
    if (address == MAP_FAILED) return std::nullopt;
    return Mapping(address, size);
  }
  Mapping(Mapping&& other) noexcept
      : address_(std::exchange(other.address_, nullptr)), size_(other.size_) {}
  Mapping& operator=(Mapping&&) = delete;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (address_ != nullptr) (void)::munmap(address_, size_);
  }
  [[nodiscard]] void* address() const { return address_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::uint64_t* word() const { return static_cast<std::uint64_t*>(address_); }
  // A stream may still read it: never unmap.
  void Leak() { address_ = nullptr; }

 private:
  Mapping(void* address, std::size_t size) : address_(address), size_(size) {}
  void* address_;
  std::size_t size_;
};

// ---------------------------------------------------------------------------------------
// b. The cyclic GEQ.

// With the wait for 1 queued on a word that is 0: UINT64_MAX must not release it (the compare
// is cyclic: (int64_t)(UINT64_MAX - 1) < 0), INT64_MAX must.
void ProveCyclicGeq(const DriverApi& api, Report& report, WaitingStream& waiting,
                    std::uint64_t* word) {
  if (const CUresult result = waiting.Query(); result != CUDA_ERROR_NOT_READY) {
    report.Fail("b.geq-word-0-holds",
                fmt::format("cuEventQuery with the word 0: {} (expected CUDA_ERROR_NOT_READY)",
                            ErrorName(api, result)));
    return;
  }
  Store(word, std::numeric_limits<std::uint64_t>::max());
  std::this_thread::sleep_for(500ms);
  if (const CUresult result = waiting.Query(); result == CUDA_ERROR_NOT_READY) {
    report.Pass("b.geq-uint64-max-holds",
                "GEQ 1 still waits 500 ms after the word became UINT64_MAX: the compare is "
                "cyclic, a poison of 2^64-1 never releases a waiting stream");
  } else {
    report.Fail("b.geq-uint64-max-holds",
                fmt::format("cuEventQuery 500 ms after UINT64_MAX: {} (expected "
                            "CUDA_ERROR_NOT_READY: the compare is not the documented cyclic one)",
                            ErrorName(api, result)));
  }
  const auto stored = std::chrono::steady_clock::now();
  Store(word, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  const CUresult result = waiting.AwaitEnd(1s);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - stored);
  if (result == CUDA_SUCCESS) {
    report.Pass("b.geq-int64-max-releases",
                fmt::format("the wait ended {} ms after the word became INT64_MAX", took.count()));
  } else {
    report.Fail("b.geq-int64-max-releases",
                fmt::format("cuEventQuery 1 s after INT64_MAX: {}", ErrorName(api, result)));
  }
}

void CheckCyclicGeq(const DriverApi& api, Report& report) {
  constexpr std::string_view kStep = "b.geq";
  const PrimaryContext context(api, report, kStep);
  if (!context.ok()) return;
  std::optional<Mapping> page =
      Mapping::Create(kPageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  if (!page) return report.Fail(kStep, "mmap of one page failed");
  constexpr unsigned int kFlags = CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE;
  if (const CUresult result = api.MemHostRegister(page->address(), kPageBytes, kFlags);
      result != CUDA_SUCCESS) {
    return report.Fail(kStep, fmt::format("cuMemHostRegister: {}", ErrorName(api, result)));
  }
  CUdeviceptr word = 0;
  bool leak = false;
  if (const CUresult result = api.MemHostGetDevicePointer(&word, page->address(), 0);
      result != CUDA_SUCCESS) {
    report.Fail(kStep, fmt::format("cuMemHostGetDevicePointer: {}", ErrorName(api, result)));
  } else if (Result<WaitingStream> waiting = WaitingStream::Start(api, word, 1); !waiting) {
    report.Fail(kStep, waiting.error().message());
  } else {
    ProveCyclicGeq(api, report, *waiting, page->word());
    if (!waiting->ended()) {
      Store(page->word(), 1);  // (int64_t)(1 - 1) >= 0 holds on any reading of GEQ.
      (void)waiting->AwaitEnd(1s);
    }
    leak = !waiting->ended();
  }
  if (leak) {
    report.Info(kStep, "the stream still waits: its page stays registered and mapped");
    page->Leak();
    return;
  }
  (void)api.MemHostUnregister(page->address());
}

// ---------------------------------------------------------------------------------------
// c. Host registration of fence-like pages.

// A stream waits for 5 on the registered word at `device_view`, which the host then sets
// through `host_view` (another mapping of the same page). Whether the device sees it.
void CheckWaitOnRegisteredWord(const DriverApi& api, Report& report, const std::string& step,
                               void* device_view, std::uint64_t* host_view, bool& leak) {
  Store(host_view, 0);
  CUdeviceptr word = 0;
  if (const CUresult result = api.MemHostGetDevicePointer(&word, device_view, 0);
      result != CUDA_SUCCESS) {
    return report.Fail(step, fmt::format("cuMemHostGetDevicePointer: {}", ErrorName(api, result)));
  }
  Result<WaitingStream> waiting = WaitingStream::Start(api, word, 5);
  if (!waiting) return report.Fail(step, waiting.error().message());
  Store(host_view, 5);
  const CUresult result = waiting->AwaitEnd(1s);
  if (result == CUDA_SUCCESS) {
    report.Pass(step, "a stream's GEQ wait on the registered word ended when the host set it");
  } else {
    report.Fail(step, fmt::format("the stream's wait did not end within 1 s: cuEventQuery {}",
                                  ErrorName(api, result)));
    leak = !waiting->ended();
  }
}

// Registers `mapping` (of the fence page) with `flags`; SUCCESS or the driver's error.
CUresult Register(const DriverApi& api, const Mapping& mapping, unsigned int flags) {
  return api.MemHostRegister(mapping.address(), mapping.size(), flags);
}

void CheckReadOnlyRegistration(const DriverApi& api, Report& report, const Mapping& read_only,
                               const Mapping& read_write, bool& leak) {
  constexpr unsigned int kFlags = CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE;
  int supported = 0;
  (void)api.DeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED,
                               0);
  const std::string step = "c.register-read-only-map";
  const CUresult result = Register(api, read_only, kFlags | CU_MEMHOSTREGISTER_READ_ONLY);
  const std::string detail = fmt::format(
      "PROT_READ MAP_SHARED shm, DEVICEMAP|PORTABLE|READ_ONLY: {} "
      "(READ_ONLY_HOST_REGISTER_SUPPORTED {})",
      ErrorName(api, result), supported);
  if (result == CUDA_SUCCESS) {
    report.Pass(step, detail);
    CheckWaitOnRegisteredWord(api, report, "c.wait-on-read-only-registration", read_only.address(),
                              read_write.word(), leak);
    if (!leak) (void)api.MemHostUnregister(read_only.address());
  } else if (supported == 0) {
    report.Info(step, detail + ": unsupported, consumers need a read-write fence (a relay word)");
  } else {
    report.Fail(step, detail + ": refused although the attribute says it is supported");
  }
  // For comparison: the same read-only map registered without READ_ONLY.
  const CUresult plain = Register(api, read_only, kFlags);
  report.Info("c.register-read-only-map-without-flag",
              fmt::format("DEVICEMAP|PORTABLE: {}", ErrorName(api, plain)));
  if (plain == CUDA_SUCCESS) (void)api.MemHostUnregister(read_only.address());
}

void CheckFenceRegistration(const DriverApi& api, Report& report) {
  constexpr std::string_view kStep = "c.register";
  const PrimaryContext context(api, report, kStep);
  if (!context.ok()) return;
  // The daemon's fence segments are POSIX shm (shm_open); so is this page, unlinked at once.
  const std::string name = fmt::format("/hurray-device-check-{}", ::getpid());
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return report.Fail(kStep, fmt::format("shm_open {}: errno {}", name, errno));
  (void)::shm_unlink(name.c_str());
  if (::ftruncate(fd, kFenceSegmentBytes) != 0) {
    (void)::close(fd);
    return report.Fail(kStep, fmt::format("ftruncate of the shm: errno {}", errno));
  }
  std::optional<Mapping> read_write =
      Mapping::Create(kFenceSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
  std::optional<Mapping> read_only = Mapping::Create(kFenceSegmentBytes, PROT_READ, MAP_SHARED, fd);
  (void)::close(fd);
  if (!read_write || !read_only) return report.Fail(kStep, "mmap of the shm failed");
  bool leak = false;
  CheckReadOnlyRegistration(api, report, *read_only, *read_write, leak);
  const CUresult result =
      Register(api, *read_write, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
  const std::string detail = fmt::format(
      "PROT_READ|PROT_WRITE MAP_SHARED shm, DEVICEMAP|PORTABLE: "
      "{}",
      ErrorName(api, result));
  if (result == CUDA_SUCCESS) {
    report.Pass("c.register-read-write-map", detail);
    CheckWaitOnRegisteredWord(api, report, "c.wait-on-read-write-registration",
                              read_write->address(), read_write->word(), leak);
    if (!leak) (void)api.MemHostUnregister(read_write->address());
  } else {
    report.Fail("c.register-read-write-map", detail);
  }
  if (leak) {
    report.Info(kStep, "a stream still waits: the pages stay registered and mapped");
    read_write->Leak();
    read_only->Leak();
  }
}

// ---------------------------------------------------------------------------------------
// d. The daemon's VMM path, in three processes.

struct ChildStatus {
  bool exited = false;
  int code = 0;    // When exited.
  int signal = 0;  // When killed by a signal.
  bool timed_out = false;
};

// Runs this program again with `arguments`, sharing stdout and stderr, `inherited` kept open
// in it; waits up to `timeout`, then kills it. `no_core`: the child may die by a fault.
ChildStatus RunSelf(const std::vector<std::string>& arguments, int inherited, bool no_core,
                    std::chrono::seconds timeout) {
  std::vector<char*> argv;
  std::string self = "/proc/self/exe";
  argv.push_back(self.data());
  std::vector<std::string> copies = arguments;
  for (std::string& argument : copies) argv.push_back(argument.data());
  argv.push_back(nullptr);
  (void)std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    if (inherited >= 0) (void)::fcntl(inherited, F_SETFD, 0);
    if (no_core) {
      const rlimit none{.rlim_cur = 0, .rlim_max = 0};
      (void)::setrlimit(RLIMIT_CORE, &none);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ChildStatus status;
  if (pid < 0) return status;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      status.timed_out = true;
      (void)::kill(pid, SIGKILL);
      (void)::waitpid(pid, &wait_status, 0);
      return status;
    }
    std::this_thread::sleep_for(10ms);
  }
  status.exited = WIFEXITED(wait_status);
  status.code = status.exited ? WEXITSTATUS(wait_status) : 0;
  status.signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  return status;
}

std::string Describe(const ChildStatus& status) {
  if (status.timed_out) return "timed out (killed)";
  if (status.exited) return fmt::format("exit {}", status.code);
  return fmt::format("killed by signal {}", status.signal);
}

// The imported allocation mapped at its own reserved range; unmapped and freed with the
// object. Move-only.
class ImportedMapping {
 public:
  // Imports `fd`, reserves `size` bytes and maps them; FAIL lines on `report` and nullopt
  // when a call fails. `verbose`: a PASS line for each call.
  static std::optional<ImportedMapping> Create(const DriverApi& api, Report& report, int fd,
                                               std::size_t size, bool verbose);
  ImportedMapping(ImportedMapping&& other) noexcept
      : api_(other.api_),
        address_(std::exchange(other.address_, 0)),
        size_(other.size_),
        mapped_(other.mapped_) {}
  ImportedMapping& operator=(ImportedMapping&&) = delete;
  ImportedMapping(const ImportedMapping&) = delete;
  ImportedMapping& operator=(const ImportedMapping&) = delete;
  ~ImportedMapping() {
    if (address_ == 0) return;
    if (mapped_) (void)api_->MemUnmap(address_, size_);
    (void)api_->MemAddressFree(address_, size_);
  }
  [[nodiscard]] CUdeviceptr address() const { return address_; }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  ImportedMapping(const DriverApi& api, CUdeviceptr address, std::size_t size)
      : api_(&api), address_(address), size_(size) {}
  const DriverApi* api_;
  CUdeviceptr address_;
  std::size_t size_;
  bool mapped_ = false;
};

std::optional<ImportedMapping> ImportedMapping::Create(const DriverApi& api, Report& report, int fd,
                                                       std::size_t size, bool verbose) {
  CUmemGenericAllocationHandle handle = 0;
  // The driver API takes the descriptor's value in the pointer.
  void* shareable = reinterpret_cast<void*>(static_cast<std::intptr_t>(fd));  // NOLINT
  CUresult result = api.MemImportFromShareableHandle(&handle, shareable,
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (result != CUDA_SUCCESS) {
    report.Fail("d.import",
                fmt::format("cuMemImportFromShareableHandle: {}", ErrorName(api, result)));
    return std::nullopt;
  }
  if (verbose) report.Pass("d.import", "cuMemImportFromShareableHandle in a second process");
  CUdeviceptr address = 0;
  result = api.MemAddressReserve(&address, size, 0, 0, 0);
  if (result != CUDA_SUCCESS) {
    (void)api.MemRelease(handle);
    report.Fail("d.reserve", fmt::format("cuMemAddressReserve: {}", ErrorName(api, result)));
    return std::nullopt;
  }
  ImportedMapping mapping(api, address, size);
  result = api.MemMap(address, size, 0, handle, 0);
  // Mapped, the memory keeps itself alive; the client releases the handle at once too.
  (void)api.MemRelease(handle);
  if (result != CUDA_SUCCESS) {
    report.Fail("d.map", fmt::format("cuMemMap: {}", ErrorName(api, result)));
    return std::nullopt;
  }
  mapping.mapped_ = true;
  CUmemAccessDesc access{};
  access.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  result = api.MemSetAccess(address, size, &access, 1);
  if (result != CUDA_SUCCESS) {
    report.Fail("d.set-access-read", fmt::format("cuMemSetAccess(PROT_READ): {} (the client "
                                                 "then maps read-write)",
                                                 ErrorName(api, result)));
    return std::nullopt;
  }
  if (verbose) report.Pass("d.set-access-read", "cuMemSetAccess(PROT_READ) on the import");
  return mapping;
}

// Second process: import, map read-only as a consumer does, and read the access back.
int ImportMode(const DriverApi& api, Report& report, int fd, std::size_t size) {
  const PrimaryContext context(api, report, "d.import");  // As the client maps: in context.
  if (!context.ok()) return report.ExitStatus();
  const std::optional<ImportedMapping> mapping =
      ImportedMapping::Create(api, report, fd, size, true);
  if (!mapping) return report.ExitStatus();
  const ExtraCalls extra = ExtraCalls::Resolve();
  if (extra.MemGetAccess == nullptr) {
    report.Fail("d.get-access", "the driver has no cuMemGetAccess");
  } else {
    unsigned long long flags = 0;  // NOLINT(google-runtime-int): cuda.h's type.
    const CUmemLocation location{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    const CUresult result = extra.MemGetAccess(&flags, &location, mapping->address());
    const std::string detail =
        fmt::format("cuMemGetAccess: {}, flags {} (PROT_READ is {})", ErrorName(api, result), flags,
                    static_cast<int>(CU_MEM_ACCESS_FLAGS_PROT_READ));
    if (result == CUDA_SUCCESS && flags == CU_MEM_ACCESS_FLAGS_PROT_READ) {
      report.Pass("d.get-access", detail);
    } else {
      report.Fail("d.get-access", detail);
    }
  }
  std::uint64_t first = 0;
  const CUresult read = api.MemcpyDtoH(&first, mapping->address(), sizeof first);
  if (read == CUDA_SUCCESS) {
    report.Pass("d.read", fmt::format("cuMemcpyDtoH from the read-only mapping: {:#x}", first));
  } else {
    report.Fail("d.read", fmt::format("cuMemcpyDtoH: {}", ErrorName(api, read)));
  }
  return report.ExitStatus();
}

// Third process: one byte written through the read-only mapping must be refused. A fault
// that kills this process is seen by its parent.
int WriteMode(const DriverApi& api, Report& report, int fd, std::size_t size) {
  constexpr std::string_view kStep = "d.write-through-read-only";
  const PrimaryContext context(api, report, kStep);
  if (!context.ok()) return report.ExitStatus();
  const std::optional<ImportedMapping> mapping =
      ImportedMapping::Create(api, report, fd, size, false);
  const ExtraCalls extra = ExtraCalls::Resolve();
  if (!mapping) return report.ExitStatus();
  if (extra.MemsetD8 == nullptr) {
    report.Fail(kStep, "the driver has no cuMemsetD8");
    return report.ExitStatus();
  }
  std::uint8_t before = 0;
  (void)api.MemcpyDtoH(&before, mapping->address(), 1);
  const auto value = static_cast<std::uint8_t>(before ^ 0xA5U);
  const CUresult set = extra.MemsetD8(mapping->address(), value, 1);
  const CUresult synchronized = api.CtxSynchronize();
  std::uint8_t after = before;
  const CUresult read = api.MemcpyDtoH(&after, mapping->address(), 1);
  const std::string detail = fmt::format(
      "cuMemsetD8: {}, cuCtxSynchronize: {}, read back: {} (byte {:#04x} -> {:#04x})",
      ErrorName(api, set), ErrorName(api, synchronized), ErrorName(api, read), before, after);
  if (set != CUDA_SUCCESS || synchronized != CUDA_SUCCESS) {
    report.Pass(kStep, "write refused by an error: " + detail);
  } else if (read == CUDA_SUCCESS && after == value) {
    report.Fail(kStep, "the write landed through a PROT_READ mapping: " + detail);
  } else {
    report.Info(kStep, "no error, yet the byte did not change: " + detail);
  }
  return report.ExitStatus();
}

// First process of step d, the daemon's part: no context, cuMemCreate, export; then the
// other two processes on the descriptor.
int ExportMode(const DriverApi& api, Report& report) {
  CUcontext current = nullptr;
  (void)api.CtxGetCurrent(&current);
  report.Info("d.context", current == nullptr ? "none current, as in hurrayd"
                                              : "a context is current (unexpected)");
  const CUmemAllocationProp properties = ExportableProperties(0);
  std::size_t granularity = 0;
  CUresult result =
      api.MemGetAllocationGranularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (result != CUDA_SUCCESS || granularity == 0) {
    report.Fail("d.create",
                fmt::format("cuMemGetAllocationGranularity: {}", ErrorName(api, result)));
    return report.ExitStatus();
  }
  const std::size_t size = (kVmmBytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  result = api.MemCreate(&handle, size, &properties, 0);
  if (result != CUDA_SUCCESS) {
    report.Fail("d.create-without-context",
                fmt::format("cuMemCreate {} MiB POSIX_FD: {}", size >> 20, ErrorName(api, result)));
    return report.ExitStatus();
  }
  report.Pass("d.create-without-context", fmt::format("cuMemCreate {} MiB POSIX_FD", size >> 20));
  int fd = -1;
  result = api.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (result != CUDA_SUCCESS) {
    report.Fail("d.export",
                fmt::format("cuMemExportToShareableHandle: {}", ErrorName(api, result)));
  } else {
    report.Pass("d.export", fmt::format("cuMemExportToShareableHandle: descriptor {}", fd));
    const std::vector<std::string> import = {"vmm-import", std::to_string(fd),
                                             std::to_string(size)};
    if (const ChildStatus status = RunSelf(import, fd, false, 60s);
        !status.exited || status.code != 0) {
      report.Fail("d.import-process", Describe(status));
    }
    const std::vector<std::string> write = {"vmm-write", std::to_string(fd), std::to_string(size)};
    const ChildStatus status = RunSelf(write, fd, true, 60s);
    if (status.signal != 0 && !status.timed_out) {
      report.Pass("d.write-through-read-only", "write refused by a fault: " + Describe(status));
    } else if (!status.exited || status.code != 0) {
      report.Fail("d.write-process", Describe(status));
    }
    (void)::close(fd);
  }
  if (result = api.MemRelease(handle); result != CUDA_SUCCESS) {
    report.Fail("d.release", fmt::format("cuMemRelease: {}", ErrorName(api, result)));
  }
  return report.ExitStatus();
}

// Step d from the main process, which may have a context by now: a fresh process has none.
void CheckVmm(Report& report) {
  const ChildStatus status = RunSelf({"vmm-export"}, -1, false, 180s);
  if (!status.exited || status.code != 0) {
    // Its own FAIL lines were printed; a crash or timeout printed none.
    if (!status.exited) report.Fail("d.export-process", Describe(status));
    report.CountFailure();
  }
}

// ---------------------------------------------------------------------------------------

std::optional<std::size_t> Number(std::string_view text) {
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

int Usage() {
  (void)std::fputs("usage: cuda_device_check [all|environment|cyclic-geq|host-register|vmm]\n",
                   stderr);
  return 2;
}

int Run(const std::vector<std::string_view>& arguments) {
  const std::string_view mode = arguments.empty() ? "all" : arguments[0];
  const bool child = mode == "vmm-export" || mode == "vmm-import" || mode == "vmm-write";
  const bool known = child || mode == "all" || mode == "environment" || mode == "cyclic-geq" ||
                     mode == "host-register" || mode == "vmm";
  if (!known) return Usage();
  Report report;
  const DriverApi* api = nullptr;
  int device_count = 0;
  if (const Start started = StartDriver(report, child, api, device_count);
      started != Start::kReady) {
    return started == Start::kSkipped ? 0 : 1;
  }
  if (mode == "vmm-export") return ExportMode(*api, report);
  if (mode == "vmm-import" || mode == "vmm-write") {
    const std::optional<std::size_t> fd =
        arguments.size() == 3 ? Number(arguments[1]) : std::nullopt;
    const std::optional<std::size_t> size =
        arguments.size() == 3 ? Number(arguments[2]) : std::nullopt;
    if (!fd || !size) return Usage();
    return mode == "vmm-import" ? ImportMode(*api, report, static_cast<int>(*fd), *size)
                                : WriteMode(*api, report, static_cast<int>(*fd), *size);
  }
  if (mode == "all" || mode == "environment") CheckEnvironment(*api, report, device_count);
  if (mode == "all" || mode == "cyclic-geq") CheckCyclicGeq(*api, report);
  if (mode == "all" || mode == "host-register") CheckFenceRegistration(*api, report);
  if (mode == "all" || mode == "vmm") CheckVmm(report);
  return report.ExitStatus();
}

}  // namespace
}  // namespace hurray::device_check

// NOLINTNEXTLINE(bugprone-exception-escape): running out of memory ends the check, as it should.
int main(int argc, char** argv) {
  std::vector<std::string_view> arguments(argv + 1, argv + argc);
  return hurray::device_check::Run(arguments);
}
