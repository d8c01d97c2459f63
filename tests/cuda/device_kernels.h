// The kernels of the GPU tests and demos (device_kernels.cu): fill device memory with a
// deterministic pattern, count the bytes that differ from it, hold a stream busy, and
// write one byte. Each launches on the caller's stream and returns at once with the launch's
// error; none synchronizes. Plain C++ (no hurray headers), so that nvcc compiles the .cu
// file in its own C++ dialect.
//
// The pattern: byte i for `seed` is a byte of splitmix64 of (i / 8 + seed * golden ratio),
// computed on the device. Thread-safe as CUDA launches are.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hurray::cuda_testing {

// Writes the pattern of `seed` into data[i] for every i below `bytes`.
cudaError_t LaunchFillPattern(void* data, std::uint64_t bytes, std::uint64_t seed,
                              cudaStream_t stream);

// Adds to *device_count (device memory, 8 bytes) the number of bytes of data[0, bytes) that
// differ from the pattern of `seed`.
cudaError_t LaunchCountMismatches(const void* data, std::uint64_t bytes, std::uint64_t seed,
                                  std::uint64_t* device_count, cudaStream_t stream);

// Keeps `stream` busy for `nanoseconds` (one thread spinning on the GPU's global timer), or
// until the word at `end_early` (the device address of mapped host memory; null: none)
// becomes nonzero: work queued after it waits that long.
cudaError_t LaunchBusyWait(std::uint64_t nanoseconds, const std::uint32_t* end_early,
                           cudaStream_t stream);

// Writes one byte (0xA5) to data[0]: through a read-only mapping, the kernel faults.
cudaError_t LaunchWriteByte(void* data, cudaStream_t stream);

}  // namespace hurray::cuda_testing
