// hurray_driver_agent: hurray_cuda_agent's modes, arguments and lines (testing/agent_program.h)
// with driver API calls only, so that it runs the same on a real GPU and on softcuda. Its
// device is device 0's primary context and a non-blocking stream of its own:
// - fill: the pattern (the kernels' own, device_kernels.h) is computed on the host into
//   pinned staging memory and copied with cuMemcpyHtoDAsync, at most 8 MiB a call;
// - check: cuMemcpyDtoHAsync into pinned staging memory, compared on the host once the
//   stream has run (ReadMismatches);
// - endless wait: cuStreamWaitValue64 for 1 on a registered host word nobody writes;
// - write: cuMemsetD8Async of one byte, then cuStreamSynchronize.
// Staging memory is pinned (registered), so that the copies are asynchronous on a GPU too:
// a copy queued behind a wait that does not end must not block the host. It is reused only
// once the stream has been synchronized, never while a copy may still read or write it.
#include <cuda.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hurray/cuda/driver.h"
#include "testing/agent_program.h"

namespace hurray::driver_agent {
namespace {

using cuda::CheckCuda;
using cuda::DriverApi;

// The largest copy one call queues.
constexpr std::uint64_t kCopyChunkBytes = std::uint64_t{8} << 20;
// Staging memory is pinned in blocks of at least this much.
constexpr std::size_t kStagingBlockBytes = std::size_t{8} << 20;
constexpr std::size_t kPageBytes = 4096;

// The pattern of device_kernels.cu, on the host: byte i for `seed` is byte i % 8 of
// splitmix64(i / 8 + seed * golden ratio). `word` is i / 8.
std::uint64_t PatternWord(std::uint64_t seed, std::uint64_t word) {
  std::uint64_t z = word + seed * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Calls `visit(i, pattern byte i of seed)` for every i below `bytes`, one word at a time.
template <typename Visit>
void ForEachPatternByte(std::size_t bytes, std::uint64_t seed, Visit visit) {
  for (std::size_t word_start = 0; word_start < bytes; word_start += 8) {
    const std::uint64_t word = PatternWord(seed, word_start / 8);
    for (std::size_t i = word_start; i < std::min(bytes, word_start + 8); ++i) {
      visit(i, static_cast<std::uint8_t>(word >> (8 * (i - word_start))));
    }
  }
}

// Writes the pattern of `seed` into `bytes` (bytes[i] is pattern byte i).
void WritePattern(std::span<std::uint8_t> bytes, std::uint64_t seed) {
  ForEachPatternByte(bytes.size(), seed,
                     [&](std::size_t i, std::uint8_t value) { bytes[i] = value; });
}

// The count of the bytes of `bytes` that differ from the pattern of `seed`.
std::uint64_t CountMismatches(std::span<const std::uint8_t> bytes, std::uint64_t seed) {
  std::uint64_t mismatches = 0;
  ForEachPatternByte(bytes.size(), seed, [&](std::size_t i, std::uint8_t value) {
    mismatches += bytes[i] != value ? 1 : 0;
  });
  return mismatches;
}

CUdeviceptr DeviceAddress(const void* data) { return reinterpret_cast<CUdeviceptr>(data); }

// The driver calls DriverApi lacks (product code never makes them), resolved the same way:
// through cuGetProcAddress of the loaded libcuda.so.1, with the ABI of CUDA 12.0.
struct ExtraCalls {
  decltype(&::cuMemcpyHtoDAsync) MemcpyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync) MemcpyDtoHAsync = nullptr;
  decltype(&::cuMemsetD8Async) MemsetD8Async = nullptr;
  decltype(&::cuMemGetAccess) MemGetAccess = nullptr;

  // Once LoadDriver succeeded.
  static Result<ExtraCalls> Resolve() {
    ExtraCalls calls;
    HURRAY_RETURN_IF_ERROR(
        cuda::ResolveDriverEntryPoint("cuMemcpyHtoDAsync", calls.MemcpyHtoDAsync));
    HURRAY_RETURN_IF_ERROR(
        cuda::ResolveDriverEntryPoint("cuMemcpyDtoHAsync", calls.MemcpyDtoHAsync));
    HURRAY_RETURN_IF_ERROR(cuda::ResolveDriverEntryPoint("cuMemsetD8Async", calls.MemsetD8Async));
    HURRAY_RETURN_IF_ERROR(cuda::ResolveDriverEntryPoint("cuMemGetAccess", calls.MemGetAccess));
    return calls;
  }
};

// Host memory registered with the driver (cuMemHostRegister): whole pages of its own, so
// that no other registration overlaps it. Move-only; unregistered and unmapped with the
// object, which needs the context still current.
class PinnedMemory {
 public:
  static Result<PinnedMemory> Create(const DriverApi& api, std::size_t bytes, unsigned int flags) {
    const std::size_t size = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
    void* memory =
        ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return ResourceExhaustedError("mmap of staging memory failed");
    if (const CUresult result = api.MemHostRegister(memory, size, flags); result != CUDA_SUCCESS) {
      (void)::munmap(memory, size);
      return std::unexpected(cuda::CudaError(&api, "cuMemHostRegister", result));
    }
    return PinnedMemory(api, static_cast<std::uint8_t*>(memory), size);
  }
  PinnedMemory(PinnedMemory&& other) noexcept
      : api_(other.api_), bytes_(std::exchange(other.bytes_, {})) {}
  PinnedMemory& operator=(PinnedMemory&&) = delete;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory() {
    if (bytes_.empty()) return;
    (void)api_->MemHostUnregister(bytes_.data());
    (void)::munmap(bytes_.data(), bytes_.size());
  }

  [[nodiscard]] std::span<std::uint8_t> bytes() const { return bytes_; }

 private:
  PinnedMemory(const DriverApi& api, std::uint8_t* memory, std::size_t size)
      : api_(&api), bytes_(memory, size) {}
  const DriverApi* api_;
  std::span<std::uint8_t> bytes_;
};

// Pinned blocks handed out in turn, and all reusable again after Reset (once the stream that
// used them has been synchronized). Not thread-safe.
class Staging {
 public:
  explicit Staging(const DriverApi& api) : api_(api) {}

  // `bytes` of staging memory not handed out since the last Reset.
  Result<std::span<std::uint8_t>> Take(std::size_t bytes) {
    for (; block_ < blocks_.size(); ++block_, used_ = 0) {
      const std::span<std::uint8_t> free = blocks_[block_].bytes().subspan(used_);
      if (free.size() < bytes) continue;
      used_ += bytes;
      return free.first(bytes);
    }
    HURRAY_ASSIGN_OR_RETURN(PinnedMemory block,
                            PinnedMemory::Create(api_, std::max(bytes, kStagingBlockBytes), 0));
    blocks_.push_back(std::move(block));
    block_ = blocks_.size() - 1;
    used_ = bytes;
    return blocks_.back().bytes().first(bytes);
  }
  void Reset() {
    block_ = 0;
    used_ = 0;
  }

 private:
  const DriverApi& api_;
  std::vector<PinnedMemory> blocks_;
  std::size_t block_ = 0;  // The block Take carves from next, at used_.
  std::size_t used_ = 0;
};

class DriverDevice final : public testing::AgentDevice {
 public:
  static Result<std::unique_ptr<testing::AgentDevice>> Create() {
    HURRAY_ASSIGN_OR_RETURN(const DriverApi* api, cuda::LoadDriver());
    HURRAY_ASSIGN_OR_RETURN(ExtraCalls extra, ExtraCalls::Resolve());
    CUdevice device = 0;
    HURRAY_RETURN_IF_ERROR(CheckCuda(*api, "cuDeviceGet(0)", api->DeviceGet(&device, 0)));
    CUcontext context = nullptr;
    HURRAY_RETURN_IF_ERROR(
        CheckCuda(*api, "cuDevicePrimaryCtxRetain", api->DevicePrimaryCtxRetain(&context, device)));
    auto made = std::unique_ptr<DriverDevice>(new DriverDevice(*api, extra, device));
    HURRAY_RETURN_IF_ERROR(CheckCuda(*api, "cuCtxSetCurrent", api->CtxSetCurrent(context)));
    HURRAY_RETURN_IF_ERROR(CheckCuda(*api, "cuStreamCreate",
                                     api->StreamCreate(&made->stream_, CU_STREAM_NON_BLOCKING)));
    return made;
  }
  DriverDevice(DriverDevice&&) = delete;
  DriverDevice& operator=(DriverDevice&&) = delete;
  ~DriverDevice() override {
    releaser_ = std::jthread();  // Stopped and joined before the word goes.
    pending_checks_.clear();
    word_.reset();
    staging_.reset();
    if (stream_ != nullptr) (void)api_.StreamDestroy(stream_);
    (void)api_.DevicePrimaryCtxRelease(device_);
  }

  [[nodiscard]] CudaStream stream() const override { return stream_; }

  // The stream waits on a word of host memory that a thread of this process sets once
  // `delay` has passed (never, when the process ends first).
  void EndDelay() override {
    if (!word_) return;
    releaser_.request_stop();
    __atomic_store_n(reinterpret_cast<std::uint64_t*>(word_->bytes().data()), 1, __ATOMIC_RELEASE);
  }

  Status QueueDelay(std::chrono::nanoseconds delay) override {
    if (word_) return FailedPreconditionError("QueueDelay: one delay per agent");
    HURRAY_ASSIGN_OR_RETURN(PinnedMemory word, PinnedMemory::Create(api_, sizeof(std::uint64_t),
                                                                    CU_MEMHOSTREGISTER_DEVICEMAP));
    CUdeviceptr address = 0;
    HURRAY_RETURN_IF_ERROR(
        CheckCuda(api_, "cuMemHostGetDevicePointer",
                  api_.MemHostGetDevicePointer(&address, word.bytes().data(), 0)));
    word_.emplace(std::move(word));
    HURRAY_RETURN_IF_ERROR(
        CheckCuda(api_, "cuStreamWaitValue64",
                  api_.StreamWaitValue64(stream_, address, 1, CU_STREAM_WAIT_VALUE_EQ)));
    auto* value = reinterpret_cast<std::uint64_t*>(word_->bytes().data());
    releaser_ = std::jthread([value, delay](const std::stop_token& stop) {
      std::mutex mutex;
      std::condition_variable_any woken;
      std::unique_lock lock(mutex);
      if (!woken.wait_for(lock, stop, delay, [] { return false; })) {
        if (!stop.stop_requested()) __atomic_store_n(value, 1, __ATOMIC_RELEASE);
      }
    });
    return {};
  }

  Status QueueFill(void* data, std::uint64_t bytes, std::uint64_t seed) override {
    HURRAY_ASSIGN_OR_RETURN(std::span<std::uint8_t> host, staging_->Take(bytes));
    WritePattern(host, seed);
    for (std::uint64_t offset = 0; offset < bytes; offset += kCopyChunkBytes) {
      HURRAY_RETURN_IF_ERROR(
          CheckCuda(api_, "cuMemcpyHtoDAsync",
                    extra_.MemcpyHtoDAsync(DeviceAddress(data) + offset, host.data() + offset,
                                           std::min(kCopyChunkBytes, bytes - offset), stream_)));
    }
    return {};
  }

  Status QueueCheck(const void* data, std::uint64_t bytes, std::uint64_t seed) override {
    HURRAY_ASSIGN_OR_RETURN(std::span<std::uint8_t> host, staging_->Take(bytes));
    for (std::uint64_t offset = 0; offset < bytes; offset += kCopyChunkBytes) {
      HURRAY_RETURN_IF_ERROR(
          CheckCuda(api_, "cuMemcpyDtoHAsync",
                    extra_.MemcpyDtoHAsync(host.data() + offset, DeviceAddress(data) + offset,
                                           std::min(kCopyChunkBytes, bytes - offset), stream_)));
    }
    pending_checks_.push_back({.bytes = host, .seed = seed});
    return {};
  }

  Result<std::uint64_t> ReadMismatches() override {
    HURRAY_RETURN_IF_ERROR(Synchronize());
    std::uint64_t mismatches = 0;
    for (const PendingCheck& check : pending_checks_) {
      mismatches += CountMismatches(check.bytes, check.seed);
    }
    pending_checks_.clear();
    staging_->Reset();
    return mismatches;
  }

  Status Synchronize() override {
    HURRAY_RETURN_IF_ERROR(CheckCuda(api_, "cuStreamSynchronize", api_.StreamSynchronize(stream_)));
    // Every copy has run: the staging memory is free again, unless checks still read it.
    if (pending_checks_.empty()) staging_->Reset();
    return {};
  }

  std::string DescribeAccess(const void* data) override {
    const CUmemLocation device0{.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    unsigned long long flags = 0;  // NOLINT(google-runtime-int): cuMemGetAccess's type.
    const CUresult result = extra_.MemGetAccess(&flags, &device0, DeviceAddress(data));
    if (result != CUDA_SUCCESS) {
      return "unknown: cuMemGetAccess failed with " + ErrorName(result) + " (not a VMM mapping?)";
    }
    switch (flags) {
      case CU_MEM_ACCESS_FLAGS_PROT_READ:
        return "read-only";
      case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
        return "read-write";
      default:
        return "unknown: flags " + std::to_string(flags);
    }
  }

  std::optional<std::string> WriteOneByte(void* data) override {
    CUresult result = extra_.MemsetD8Async(DeviceAddress(data), 0xA5, 1, stream_);
    if (result == CUDA_SUCCESS) result = api_.StreamSynchronize(stream_);
    if (result == CUDA_SUCCESS) return std::nullopt;
    return ErrorName(result);
  }

 private:
  struct PendingCheck {
    std::span<const std::uint8_t> bytes;  // Staging memory the stream copies the data into.
    std::uint64_t seed = 0;
  };

  DriverDevice(const DriverApi& api, const ExtraCalls& extra, CUdevice device)
      : api_(api), extra_(extra), device_(device), staging_(std::make_unique<Staging>(api)) {}

  [[nodiscard]] std::string ErrorName(CUresult result) const {
    const char* name = nullptr;
    if (api_.GetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
      return "CUresult " + std::to_string(result);
    }
    return name;
  }

  const DriverApi& api_;
  const ExtraCalls extra_;
  const CUdevice device_;
  CUstream stream_ = nullptr;
  std::unique_ptr<Staging> staging_;
  std::optional<PinnedMemory> word_;  // The word QueueDelay's wait reads.
  std::jthread releaser_;             // Sets the word once the delay has passed.
  std::vector<PendingCheck> pending_checks_;
};

}  // namespace
}  // namespace hurray::driver_agent

int main(int argc, char** argv) {
  return hurray::testing::RunAgent(argc, argv, hurray::driver_agent::DriverDevice::Create);
}
