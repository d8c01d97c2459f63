// hurray_cuda_agent: the separate processes of the GPU tests (cuda_exchange_test.cc), with
// the modes, arguments and lines of testing/agent_program.h. Its device fills and checks
// the pattern with kernels (device_kernels.h) on a stream of the CUDA runtime; the endless
// wait of hold-unreached is a kernel that keeps the stream busy for 10 minutes, and the
// write of write-into is a kernel that writes one byte.
#include <cuda.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cuda_testing.h"
#include "device_kernels.h"
#include "hurray/client.h"

namespace hurray::cuda_testing {
namespace {

// The access this process has to device 0's mapping at `data`, from the driver itself.
std::string DescribeMappingAccess(const void* data) {
  using GetAccess = decltype(&::cuMemGetAccess);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAccess", &entry, 12000, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return "unknown: the driver has no cuMemGetAccess";
  }
  const CUmemLocation device0{.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  unsigned long long flags = 0;  // NOLINT(google-runtime-int): cuMemGetAccess's type.
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): a driver entry point.
  const CUresult result =
      reinterpret_cast<GetAccess>(entry)(&flags, &device0, reinterpret_cast<CUdeviceptr>(data));
  if (result != CUDA_SUCCESS) {
    return "unknown: cuMemGetAccess failed with CUresult " + std::to_string(result) +
           " (not a VMM mapping?)";
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

// Device 0 through the CUDA runtime: a stream of its own and a mismatch counter on the device.
class KernelDevice final : public testing::AgentDevice {
 public:
  static Result<std::unique_ptr<testing::AgentDevice>> Create() {
    HURRAY_ASSIGN_OR_RETURN(DeviceStream stream, DeviceStream::Create());
    HURRAY_ASSIGN_OR_RETURN(MismatchCounter counter, MismatchCounter::Create());
    HURRAY_RETURN_IF_ERROR(counter.Reset(stream.get()));
    return std::make_unique<KernelDevice>(std::move(stream), std::move(counter));
  }
  KernelDevice(DeviceStream stream, MismatchCounter counter)
      : stream_(std::move(stream)), counter_(std::move(counter)) {}

  [[nodiscard]] CudaStream stream() const override { return stream_.get(); }
  Status QueueDelay(std::chrono::nanoseconds delay) override {
    if (end_early_ == nullptr) {
      void* host = nullptr;
      HURRAY_RETURN_IF_ERROR(CheckRuntime(
          cudaHostAlloc(&host, sizeof(std::uint32_t), cudaHostAllocMapped), "cudaHostAlloc"));
      end_early_ = static_cast<std::uint32_t*>(host);
      void* device = nullptr;
      HURRAY_RETURN_IF_ERROR(
          CheckRuntime(cudaHostGetDevicePointer(&device, host, 0), "cudaHostGetDevicePointer"));
      end_early_device_ = static_cast<const std::uint32_t*>(device);
    }
    return CheckRuntime(
        LaunchBusyWait(static_cast<std::uint64_t>(delay.count()), end_early_device_, stream_.get()),
        "BusyWait");
  }
  // The busy wait ends at its next look at the mapped word (within 0.1 ms).
  void EndDelay() override {
    if (end_early_ != nullptr) __atomic_store_n(end_early_, 1, __ATOMIC_RELEASE);
  }
  Status QueueFill(void* data, std::uint64_t bytes, std::uint64_t seed) override {
    return FillPattern(data, bytes, seed, stream_.get());
  }
  Status QueueCheck(const void* data, std::uint64_t bytes, std::uint64_t seed) override {
    return counter_.Add(data, bytes, seed, stream_.get());
  }
  Result<std::uint64_t> ReadMismatches() override { return counter_.Read(stream_.get()); }
  Status Synchronize() override { return stream_.Synchronize(); }
  std::string DescribeAccess(const void* data) override { return DescribeMappingAccess(data); }
  std::optional<std::string> WriteOneByte(void* data) override {
    const cudaError_t launched = LaunchWriteByte(data, stream_.get());
    const cudaError_t finished =
        launched == cudaSuccess ? cudaStreamSynchronize(stream_.get()) : launched;
    if (finished == cudaSuccess) return std::nullopt;
    return cudaGetErrorName(finished);
  }

 private:
  DeviceStream stream_;
  MismatchCounter counter_;
  // The word that ends QueueDelay's busy wait early: mapped host memory, made on first use
  // and kept for the process's life (a kernel may read it until it ends).
  std::uint32_t* end_early_ = nullptr;
  const std::uint32_t* end_early_device_ = nullptr;
};

}  // namespace
}  // namespace hurray::cuda_testing

int main(int argc, char** argv) {
  return hurray::testing::RunAgent(argc, argv, hurray::cuda_testing::KernelDevice::Create);
}
