// The GPU tests' agent programs: the separate processes of the exchange tests, one role each
// on device 0 and the daemon's pool cuda:0. Two programs have these modes, arguments and
// lines: hurray_cuda_agent (tests/cuda: kernels and the CUDA runtime, a real GPU only) and
// hurray_driver_agent (tests/softcuda: driver calls only, so it runs the same on a real GPU
// and on the software driver). Both fill and check the same byte pattern (device_kernels.h),
// so that either may read what the other wrote. The modes are written once, here; each
// program supplies its AgentDevice, and RunAgent does the rest:
//
//   produce SOCKET NAME BYTES SEED STAGE
//       allocate an Event-mode tensor of BYTES, queue its fill with the pattern of SEED, and,
//       by STAGE:
//         synced          PublishAfter, wait for the stream, print "published V", exit
//         hold-reached    as synced, then sleep until killed
//         hold-allocated  wait for the fill, print "allocated", sleep until killed (never
//                         publishes)
//         hold-unreached  before the fill, queue a wait that does not end while the agent
//                         lives; PublishAfter, print "published V", sleep until killed: the
//                         fence is not reached while the agent lives
//         exit-early      before the fill, queue a wait of half a second; PublishAfter,
//                         print "published V" and close the client at once, the fence not
//                         reached yet (the close waits for it: own_fence_wait), then exit
//   produce-set SOCKET PREFIX COUNT BYTES SEED
//       COUNT tensors PREFIX000000.. of BYTES, tensor i with the pattern of SEED + i, each
//       published after its fill on one stream; waits for the stream; "published COUNT"
//   consume SOCKET NAME SEED WAIT_MS
//       acquire (waiting up to WAIT_MS), make the stream wait for the data
//       (TensorView::WaitOn), queue the check of every byte, print "waiting", then one
//       outcome: "verified BYTES" (every byte is the pattern), "lost" (Ready() said
//       DATA_LOSS: the stream moved on, the bytes are not to be used), "absent CODE" (not
//       published in time), or "mismatches N" (exit 1)
//   consume-set SOCKET PREFIX SEED
//       BatchAcquire every name under PREFIX, wait for and check each (member i with the
//       pattern of SEED + i); print "acquired COUNT", wait for a line on stdin (the test
//       reads the daemon's counters meanwhile), print "verified COUNT BYTES"
//   write-into SOCKET NAME
//       acquire; print "access ACCESS" (cuMemGetAccess of the mapping on device 0:
//       "read-only", "read-write", or "unknown: WHY"); write one byte of buffer 0 on the
//       device; print "write refused: ERROR" when the write fails, or "write succeeded"
//       (exit 1)
//
// Errors go to stderr ("<program>: <what>") with exit status 1; results go to stdout, one
// line each, line-buffered so that a test can wait for them. Not thread-safe: for a
// program's main thread. Needs no CUDA headers.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "hurray/client.h"
#include "hurray/error.h"
#include "hurray/tensor_descriptor.h"

namespace hurray::testing {

// The daemon's pool on device 0.
inline constexpr std::string_view kDevicePool = "cuda:0";

// What an agent does on device 0, on one stream of its own: the part the two programs do
// differently (kernels, or driver calls). Owns the stream and what its queued work uses,
// until destroyed. For one thread.
class AgentDevice {
 public:
  AgentDevice() = default;
  AgentDevice(const AgentDevice&) = delete;
  AgentDevice& operator=(const AgentDevice&) = delete;
  virtual ~AgentDevice() = default;

  // The stream, as hurray's API takes it (PublishAfter, WaitOn).
  [[nodiscard]] virtual CudaStream stream() const = 0;
  // Queues a wait of `delay` on the stream: nothing queued after it runs before. One longer
  // than the process lives does not end.
  [[nodiscard]] virtual Status QueueDelay(std::chrono::nanoseconds delay) = 0;
  // Ends the queued delay now (the stream goes on at once).
  virtual void EndDelay() = 0;
  // Queues the fill of the device memory data[0, bytes) with the pattern of `seed`.
  [[nodiscard]] virtual Status QueueFill(void* data, std::uint64_t bytes, std::uint64_t seed) = 0;
  // Queues the count of the bytes of data[0, bytes) that differ from the pattern of `seed`.
  [[nodiscard]] virtual Status QueueCheck(const void* data, std::uint64_t bytes,
                                          std::uint64_t seed) = 0;
  // Waits on the host for the stream; then the mismatches the checks queued since the last
  // ReadMismatches counted, in all.
  [[nodiscard]] virtual Result<std::uint64_t> ReadMismatches() = 0;
  // Waits on the host until everything queued on the stream ran.
  [[nodiscard]] virtual Status Synchronize() = 0;
  // "read-only", "read-write" or "unknown: WHY": the access device 0 has to the mapping at
  // `data`, from the driver (cuMemGetAccess).
  [[nodiscard]] virtual std::string DescribeAccess(const void* data) = 0;
  // Writes one byte at `data` on the stream and waits for it: nullopt when the write
  // succeeded, else the name of the error that refused it ("CUDA_ERROR_ILLEGAL_ADDRESS").
  [[nodiscard]] virtual std::optional<std::string> WriteOneByte(void* data) = 0;
};

// Makes the program's AgentDevice (called once a mode has connected to the daemon).
using AgentDeviceFactory = Result<std::unique_ptr<AgentDevice>> (*)();

// The agent's main: makes stdout line-buffered and runs the mode argv[1] names with the
// arguments after it (the modes above); returns the exit status. ExitWithError for a
// missing or unknown mode, wrong arguments and every failed call.
int RunAgent(int argc, char** argv, AgentDeviceFactory make_device);

// Prints "<program>: <what>" to stderr and exits 1.
[[noreturn]] void ExitWithError(std::string_view what);
// The value of `result`, or ExitWithError naming `call`.
template <typename T>
T ValueOrExit(Result<T> result, std::string_view call) {
  if (!result) ExitWithError(std::string(call) + ": " + result.error().ToString());
  return std::move(*result);
}
// Nothing when `status` is OK, or ExitWithError naming `call`.
void OkOrExit(const Status& status, std::string_view call);

// "<prefix><index, six digits>": the names of a set.
[[nodiscard]] std::string SetMemberName(std::string_view prefix, std::uint64_t index);

// A dense uint8 tensor of `bytes` bytes: one CUDA buffer, sync mode Event.
[[nodiscard]] Result<TensorDescriptor> EventTensor(std::uint64_t bytes);

}  // namespace hurray::testing
