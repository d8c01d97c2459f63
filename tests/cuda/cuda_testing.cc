#include "cuda_testing.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdio>
#include <utility>

#include "device_kernels.h"

namespace hurray::cuda_testing {

Result<int> VisibleDeviceCount() {
  // RTLD_NODELETE: the runtime loads the same library; this handle is never closed.
  if (::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE) == nullptr) return 0;
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result == cudaSuccess) return count;
  (void)cudaGetLastError();  // Clears the error, so that later calls do not report it.
  if (result == cudaErrorNoDevice) return 0;
  return std::unexpected(
      Error(StatusCode::kFailedPrecondition,
            fmt::format("cudaGetDeviceCount: {} ({}): a driver is installed, but the CUDA "
                        "runtime these programs link cannot use it",
                        cudaGetErrorName(result), cudaGetErrorString(result))));
}

Status CheckRuntime(cudaError_t result, std::string_view call) {
  if (result == cudaSuccess) return {};
  return InternalError(
      fmt::format("{}: {} ({})", call, cudaGetErrorName(result), cudaGetErrorString(result)));
}

Result<DeviceStream> DeviceStream::Create() {
  cudaStream_t stream = nullptr;
  HURRAY_RETURN_IF_ERROR(CheckRuntime(cudaSetDevice(0), "cudaSetDevice(0)"));
  HURRAY_RETURN_IF_ERROR(CheckRuntime(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                      "cudaStreamCreateWithFlags"));
  return DeviceStream(stream);
}

DeviceStream::DeviceStream(DeviceStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

DeviceStream& DeviceStream::operator=(DeviceStream&& other) noexcept {
  std::swap(stream_, other.stream_);
  return *this;
}

DeviceStream::~DeviceStream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Status DeviceStream::Synchronize() const {
  return CheckRuntime(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

Result<MismatchCounter> MismatchCounter::Create() {
  void* count = nullptr;
  HURRAY_RETURN_IF_ERROR(
      CheckRuntime(cudaMalloc(&count, sizeof(std::uint64_t)), "cudaMalloc(mismatch counter)"));
  return MismatchCounter(static_cast<std::uint64_t*>(count));
}

MismatchCounter::MismatchCounter(MismatchCounter&& other) noexcept
    : count_(std::exchange(other.count_, nullptr)) {}

MismatchCounter& MismatchCounter::operator=(MismatchCounter&& other) noexcept {
  std::swap(count_, other.count_);
  return *this;
}

MismatchCounter::~MismatchCounter() {
  if (count_ != nullptr) (void)cudaFree(count_);
}

Status MismatchCounter::Reset(cudaStream_t stream) {
  return CheckRuntime(cudaMemsetAsync(count_, 0, sizeof(*count_), stream), "cudaMemsetAsync");
}

Status MismatchCounter::Add(const void* data, std::uint64_t bytes, std::uint64_t seed,
                            cudaStream_t stream) {
  return CheckRuntime(LaunchCountMismatches(data, bytes, seed, count_, stream),
                      "CountMismatches launch");
}

Result<std::uint64_t> MismatchCounter::Read(cudaStream_t stream) {
  std::uint64_t count = 0;
  HURRAY_RETURN_IF_ERROR(
      CheckRuntime(cudaMemcpyAsync(&count, count_, sizeof(count), cudaMemcpyDeviceToHost, stream),
                   "cudaMemcpyAsync(mismatch count)"));
  HURRAY_RETURN_IF_ERROR(CheckRuntime(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  return count;
}

Status FillPattern(void* data, std::uint64_t bytes, std::uint64_t seed, cudaStream_t stream) {
  return CheckRuntime(LaunchFillPattern(data, bytes, seed, stream), "FillPattern launch");
}

bool PrintSkippedWithoutDevice() {
  const Result<int> count = VisibleDeviceCount();
  if (!count) ExitWithError(count.error().ToString());
  if (*count != 0) return false;
  std::printf("%.*s\n", static_cast<int>(kNoDeviceMessage.size()), kNoDeviceMessage.data());
  return true;
}

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace hurray::cuda_testing
