// gpu_demo_producer: one half of the two-process GPU demo (gpu_demo_consumer is the other).
//
//   gpu_demo_producer SOCKET [NAME [BYTES [SEED]]]     (demo/gpu, 1 GiB, 42)
//
// Allocates BYTES in the daemon's pool cuda:0, fills them with a kernel (the pattern of
// SEED, device_kernels.h), publishes with an Event handoff right after queuing the kernel
// (PublishAfter: the daemon's fence is signalled by the GPU when the kernel is done), and
// only then waits for its stream, so that the data is ready before it exits. Prints what it
// did and how long each step took. Exits 77, printing "skipped: no CUDA device", without a
// device; 1 on error.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda_testing.h"
#include "hurray/client.h"

namespace {

using hurray::Client;
using hurray::PublishedTensor;
using hurray::TensorDescriptor;
using hurray::WritableTensor;
using hurray::cuda_testing::DeviceStream;
using hurray::cuda_testing::EventTensor;
using hurray::cuda_testing::FillPattern;
using hurray::cuda_testing::kDevicePool;
using hurray::cuda_testing::kSkippedExitStatus;
using hurray::cuda_testing::MillisecondsSince;
using hurray::cuda_testing::OkOrExit;
using hurray::cuda_testing::PrintSkippedWithoutDevice;
using hurray::cuda_testing::ValueOrExit;
using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: gpu_demo_producer SOCKET [NAME [BYTES [SEED]]]\n");
    return 2;
  }
  if (PrintSkippedWithoutDevice()) return kSkippedExitStatus;
  const std::string name = argc > 2 ? argv[2] : "demo/gpu";
  const std::uint64_t bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : (1ULL << 30);
  const std::uint64_t seed = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 42;

  auto client = ValueOrExit(
      Client::Connect({.socket_path = argv[1], .client_name = "gpu_demo_producer"}), "Connect");
  DeviceStream stream = ValueOrExit(DeviceStream::Create(), "DeviceStream::Create");
  const TensorDescriptor descriptor = ValueOrExit(EventTensor(bytes), "EventTensor");

  const auto allocate_start = Clock::now();
  WritableTensor tensor = ValueOrExit(client->Allocate(descriptor, kDevicePool), "Allocate");
  const double allocate_ms = MillisecondsSince(allocate_start);

  const auto publish_start = Clock::now();
  OkOrExit(FillPattern(tensor.data(0), bytes, seed, stream.get()), "FillPattern");
  const PublishedTensor published =
      ValueOrExit(tensor.PublishAfter(name, stream.get()), "PublishAfter");
  const double publish_ms = MillisecondsSince(publish_start);
  OkOrExit(stream.Synchronize(), "wait for the fill");
  const double ready_ms = MillisecondsSince(publish_start);

  std::printf("published %s v%llu: %llu bytes on cuda:0\n", published.name.c_str(),
              static_cast<unsigned long long>(published.version),
              static_cast<unsigned long long>(bytes));
  std::printf(
      "timing allocate+map %.3f ms, fill queued+publish %.3f ms, data ready %.3f ms "
      "after the fill was queued\n",
      allocate_ms, publish_ms, ready_ms);
  return 0;
}
