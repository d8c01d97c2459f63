#include "device_kernels.h"

namespace hurray::cuda_testing {
namespace {

constexpr unsigned kThreads = 256;
// Enough blocks to fill an H200 several times over; the loops stride over the rest.
constexpr unsigned kMaxBlocks = 4096;

unsigned BlocksFor(std::uint64_t bytes) {
  const std::uint64_t wanted = (bytes + kThreads - 1) / kThreads;
  return wanted < kMaxBlocks ? static_cast<unsigned>(wanted == 0 ? 1 : wanted) : kMaxBlocks;
}

__device__ std::uint8_t DevicePatternByte(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = (index / 8) + seed * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<std::uint8_t>(z >> (8 * (index % 8)));
}

__global__ void FillPattern(std::uint8_t* data, std::uint64_t bytes, std::uint64_t seed) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < bytes;
       i += stride) {
    data[i] = DevicePatternByte(seed, i);
  }
}

__global__ void CountMismatches(const std::uint8_t* data, std::uint64_t bytes, std::uint64_t seed,
                                unsigned long long* count) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  unsigned long long local = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < bytes;
       i += stride) {
    local += data[i] != DevicePatternByte(seed, i) ? 1 : 0;
  }
  if (local != 0) atomicAdd(count, local);
}

__device__ std::uint64_t GlobalTimer() {
  std::uint64_t now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void BusyWait(std::uint64_t nanoseconds, const volatile std::uint32_t* end_early) {
  const std::uint64_t start = GlobalTimer();
  while (GlobalTimer() - start < nanoseconds && (end_early == nullptr || *end_early == 0)) {
    __nanosleep(100000);
  }
}

__global__ void WriteByte(std::uint8_t* data) { data[0] = 0xA5; }

}  // namespace

cudaError_t LaunchFillPattern(void* data, std::uint64_t bytes, std::uint64_t seed,
                              cudaStream_t stream) {
  FillPattern<<<BlocksFor(bytes), kThreads, 0, stream>>>(static_cast<std::uint8_t*>(data), bytes,
                                                         seed);
  return cudaGetLastError();
}

cudaError_t LaunchCountMismatches(const void* data, std::uint64_t bytes, std::uint64_t seed,
                                  std::uint64_t* device_count, cudaStream_t stream) {
  // atomicAdd counts in unsigned long long: the same 8 bytes as std::uint64_t.
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
  CountMismatches<<<BlocksFor(bytes), kThreads, 0, stream>>>(
      static_cast<const std::uint8_t*>(data), bytes, seed,
      reinterpret_cast<unsigned long long*>(device_count));
  return cudaGetLastError();
}

cudaError_t LaunchBusyWait(std::uint64_t nanoseconds, const std::uint32_t* end_early,
                           cudaStream_t stream) {
  BusyWait<<<1, 1, 0, stream>>>(nanoseconds, end_early);
  return cudaGetLastError();
}

cudaError_t LaunchWriteByte(void* data, cudaStream_t stream) {
  WriteByte<<<1, 1, 0, stream>>>(static_cast<std::uint8_t*>(data));
  return cudaGetLastError();
}

}  // namespace hurray::cuda_testing
