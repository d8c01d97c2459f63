// gpu_demo_consumer: the other half of the two-process GPU demo (see gpu_demo_producer).
//
//   gpu_demo_consumer SOCKET [NAME [SEED [WAIT_MS]]]     (demo/gpu, 42, 60000)
//
// Acquires NAME (waiting up to WAIT_MS for it to be published), makes a stream of its own
// wait on the GPU for the producer's data (TensorView::WaitOn: the host never blocks on
// the producer), and counts on the device every byte that differs from the pattern of
// SEED. Prints "verified N bytes, 0 mismatches" and the timings, or the mismatch count
// (exit 1). Exits 77, printing "skipped: no CUDA device", without a device; 1 on error.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda_testing.h"
#include "hurray/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using hurray::Client;
using hurray::TensorView;
using hurray::cuda_testing::DeviceStream;
using hurray::cuda_testing::kSkippedExitStatus;
using hurray::cuda_testing::MillisecondsSince;
using hurray::cuda_testing::MismatchCounter;
using hurray::cuda_testing::OkOrExit;
using hurray::cuda_testing::PrintSkippedWithoutDevice;
using hurray::cuda_testing::ValueOrExit;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: gpu_demo_consumer SOCKET [NAME [SEED [WAIT_MS]]]\n");
    return 2;
  }
  if (PrintSkippedWithoutDevice()) return kSkippedExitStatus;
  const std::string name = argc > 2 ? argv[2] : "demo/gpu";
  const std::uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 42;
  const auto wait =
      std::chrono::milliseconds(argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 60000);

  auto client = ValueOrExit(
      Client::Connect({.socket_path = argv[1], .client_name = "gpu_demo_consumer"}), "Connect");
  DeviceStream stream = ValueOrExit(DeviceStream::Create(), "DeviceStream::Create");
  MismatchCounter counter = ValueOrExit(MismatchCounter::Create(), "MismatchCounter::Create");
  OkOrExit(counter.Reset(stream.get()), "reset the counter");
  OkOrExit(stream.Synchronize(), "set up the stream");

  auto acquire_start = Clock::now();
  TensorView view = ValueOrExit(client->Acquire(name, {.wait = wait}), "Acquire");
  const bool ready_at_acquire = ValueOrExit(view.Ready(), "Ready");
  // Includes any wait for the name to be published (the consumer may start first).
  const double acquire_ms = MillisecondsSince(acquire_start);

  const auto verify_start = Clock::now();
  const std::uint64_t bytes = view.descriptor().buffers()[0].byte_size();
  OkOrExit(view.WaitOn(stream.get()), "WaitOn");
  OkOrExit(counter.Add(view.data(0), bytes, seed, stream.get()), "count mismatches");
  const std::uint64_t mismatches = ValueOrExit(counter.Read(stream.get()), "read the count");
  const double verify_ms = MillisecondsSince(verify_start);
  if (auto ready = view.Ready(); !ready || !*ready) {
    std::printf("lost: the producer's data never became ready (%s)\n",
                ready ? "not ready" : ready.error().ToString().c_str());
    return 1;
  }

  acquire_start = Clock::now();
  TensorView again = ValueOrExit(client->Acquire(name), "Acquire again");
  const double steady_ms = MillisecondsSince(acquire_start);

  std::printf("verified %llu bytes, %llu mismatches\n", static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(mismatches));
  std::printf(
      "timing acquire+map %.3f ms (data ready at acquire: %s; includes waiting for the "
      "name), acquire again %.3f ms, stream wait+verify %.3f ms (%.1f GB/s)\n",
      acquire_ms, ready_at_acquire ? "yes" : "no", steady_ms, verify_ms,
      static_cast<double>(bytes) / (verify_ms * 1e6));
  return mismatches == 0 ? 0 : 1;
}
