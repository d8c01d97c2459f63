// What the GPU tests, their agent and the demos share: whether this process sees a CUDA
// device, the CUDA runtime's errors as hurray errors, and a stream and a device-side mismatch
// counter as move-only RAII values. The Event-mode tensors they exchange, the device pool and
// the programs' error exits come from testing/agent_program.h (shared with softcuda's
// driver-only agent), under the names they have here.
//
// Programs linking this use the CUDA runtime statically (CUDA::cudart_static), so that
// they start on a machine without the driver and skip there. Not thread-safe: each value
// belongs to one thread at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "testing/agent_program.h"

namespace hurray::cuda_testing {

using ::hurray::testing::EventTensor;
using ::hurray::testing::ExitWithError;
using ::hurray::testing::kDevicePool;
using ::hurray::testing::OkOrExit;
using ::hurray::testing::SetMemberName;
using ::hurray::testing::ValueOrExit;

// What a program prints, and a test's GTEST_SKIP says, when there is no device.
inline constexpr std::string_view kNoDeviceMessage = "skipped: no CUDA device";
// The exit status of a program that skipped (ctest's SKIP_RETURN_CODE of the demos).
inline constexpr int kSkippedExitStatus = 77;

// Devices this process sees: 0 when there is no driver (libcuda.so.1 does not load) or
// cudaGetDeviceCount says cudaErrorNoDevice. Any other failure is an error naming it, never
// "no device": e.g. cudaErrorInsufficientDriver, a driver older than the CUDA runtime these
// programs link statically, on a machine that has a GPU.
[[nodiscard]] Result<int> VisibleDeviceCount();

// For the demo programs: true, having printed kNoDeviceMessage, when this process sees no
// device (the program then exits with kSkippedExitStatus); exits 1 naming the error when the
// runtime cannot tell (VisibleDeviceCount's error).
[[nodiscard]] bool PrintSkippedWithoutDevice();

// Milliseconds from `start` to now, for the demos' timings.
[[nodiscard]] double MillisecondsSince(std::chrono::steady_clock::time_point start);

// OK for cudaSuccess; otherwise INTERNAL "<call>: cudaErrorX (description)".
[[nodiscard]] Status CheckRuntime(cudaError_t result, std::string_view call);

// A non-blocking stream of device 0. Move-only; destroyed with the object.
class DeviceStream {
 public:
  [[nodiscard]] static Result<DeviceStream> Create();
  DeviceStream(DeviceStream&& other) noexcept;
  DeviceStream& operator=(DeviceStream&& other) noexcept;
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  ~DeviceStream();

  [[nodiscard]] cudaStream_t get() const { return stream_; }
  // Waits on the host until everything queued on the stream ran; its error otherwise.
  [[nodiscard]] Status Synchronize() const;

 private:
  explicit DeviceStream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

// Eight bytes of device memory counting mismatching bytes (device_kernels.h). Move-only.
class MismatchCounter {
 public:
  [[nodiscard]] static Result<MismatchCounter> Create();
  MismatchCounter(MismatchCounter&& other) noexcept;
  MismatchCounter& operator=(MismatchCounter&& other) noexcept;
  MismatchCounter(const MismatchCounter&) = delete;
  MismatchCounter& operator=(const MismatchCounter&) = delete;
  ~MismatchCounter();

  // Zeroes the counter on `stream`.
  [[nodiscard]] Status Reset(cudaStream_t stream);
  // Queues, on `stream`, the count of bytes of data[0, bytes) that differ from the pattern
  // of `seed`, added to the counter.
  [[nodiscard]] Status Add(const void* data, std::uint64_t bytes, std::uint64_t seed,
                           cudaStream_t stream);
  // Synchronizes `stream` and returns the count.
  [[nodiscard]] Result<std::uint64_t> Read(cudaStream_t stream);

 private:
  explicit MismatchCounter(std::uint64_t* count) : count_(count) {}
  std::uint64_t* count_ = nullptr;
};

// Queues on `stream` the fill of data[0, bytes) with the pattern of `seed`.
[[nodiscard]] Status FillPattern(void* data, std::uint64_t bytes, std::uint64_t seed,
                                 cudaStream_t stream);

}  // namespace hurray::cuda_testing
