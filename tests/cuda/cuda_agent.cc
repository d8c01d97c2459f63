// hurray_cuda_agent: the separate processes of the GPU tests (cuda_exchange_test.cc). Each
// mode is one role on device 0 and the daemon's pool cuda:0; errors go to stderr with exit
// status 1, results to stdout, one line each (line-buffered so a test can wait for them).
//
//   produce SOCKET NAME BYTES SEED STAGE
//       allocate an Event-mode tensor of BYTES, fill it with the pattern of SEED by a
//       kernel, and, by STAGE:
//         synced          PublishAfter, wait for the stream, print "published V", exit
//         hold-reached    as synced, then sleep until killed
//         hold-allocated  wait for the fill, print "allocated", sleep until killed (never
//                         publishes)
//         hold-unreached  queue a kernel that keeps the stream busy for 10 minutes before
//                         the fill, PublishAfter, print "published V", sleep until killed:
//                         the fence is not reached while the agent lives
//   produce-set SOCKET PREFIX COUNT BYTES SEED
//       COUNT tensors PREFIX000000.. of BYTES, tensor i with the pattern of SEED + i, each
//       published after its fill on one stream; waits for the stream; "published COUNT"
//   consume SOCKET NAME SEED WAIT_MS
//       acquire (waiting up to WAIT_MS), make a stream of its own wait for the data
//       (TensorView::WaitOn), queue the count of mismatching bytes, print "waiting", then
//       one outcome: "verified BYTES" (every byte is the pattern), "lost" (Ready() said
//       DATA_LOSS: the stream moved on, the bytes are not to be used), "absent CODE" (not
//       published in time), or "mismatches N" (exit 1)
//   consume-set SOCKET PREFIX SEED
//       BatchAcquire every name under PREFIX, wait for and verify each (member i with the
//       pattern of SEED + i); print "acquired COUNT", wait for a line on stdin (the test
//       reads the daemon's counters meanwhile), print "verified COUNT BYTES"
//   write-into SOCKET NAME
//       acquire; print "access ACCESS" (cuMemGetAccess of the mapping on device 0:
//       "read-only", "read-write", or "unknown: WHY"); launch a kernel that writes one
//       byte of buffer 0; print "write refused: ERROR" when the kernel fails, or
//       "write succeeded" (exit 1)
#include <cuda.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cuda_testing.h"
#include "device_kernels.h"
#include "hurray/client.h"

namespace hurray::cuda_testing {
namespace {

constexpr std::uint64_t kUnreachedBusyNanoseconds = std::uint64_t{600} * 1'000'000'000;

std::uint64_t ParseNumber(std::string_view text, std::string_view what) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    ExitWithError(std::string(what) + " \"" + std::string(text) + "\" is not a number");
  }
  return value;
}

[[noreturn]] void SleepUntilKilled() {
  while (true) ::pause();
}

std::unique_ptr<Client> ConnectTo(const std::string& socket, std::string_view role) {
  return ValueOrExit(Client::Connect({.socket_path = socket,
                                      .client_name = "hurray_cuda_agent " + std::string(role)}),
                     "Connect");
}

int Produce(const std::vector<std::string>& args) {
  if (args.size() != 5) ExitWithError("usage: produce SOCKET NAME BYTES SEED STAGE");
  const std::string& name = args[1];
  const std::uint64_t bytes = ParseNumber(args[2], "BYTES");
  const std::uint64_t seed = ParseNumber(args[3], "SEED");
  const std::string& stage = args[4];
  auto client = ConnectTo(args[0], "produce");
  DeviceStream stream = ValueOrExit(DeviceStream::Create(), "DeviceStream::Create");
  WritableTensor tensor = ValueOrExit(
      client->Allocate(ValueOrExit(EventTensor(bytes), "EventTensor"), kDevicePool), "Allocate");
  if (stage == "hold-unreached") {
    OkOrExit(CheckRuntime(LaunchBusyWait(kUnreachedBusyNanoseconds, stream.get()), "BusyWait"),
             "queue the busy wait");
  }
  OkOrExit(FillPattern(tensor.data(0), bytes, seed, stream.get()), "FillPattern");
  if (stage == "hold-allocated") {
    OkOrExit(stream.Synchronize(), "fill");
    std::printf("allocated\n");
    SleepUntilKilled();
  }
  const PublishedTensor published =
      ValueOrExit(tensor.PublishAfter(name, stream.get()), "PublishAfter");
  if (stage != "hold-unreached") OkOrExit(stream.Synchronize(), "fill and fence");
  std::printf("published %llu\n", static_cast<unsigned long long>(published.version));
  if (stage == "synced") return 0;
  if (stage != "hold-reached" && stage != "hold-unreached") ExitWithError("unknown STAGE " + stage);
  SleepUntilKilled();
}

int ProduceSet(const std::vector<std::string>& args) {
  if (args.size() != 5) ExitWithError("usage: produce-set SOCKET PREFIX COUNT BYTES SEED");
  const std::uint64_t count = ParseNumber(args[2], "COUNT");
  const std::uint64_t bytes = ParseNumber(args[3], "BYTES");
  const std::uint64_t seed = ParseNumber(args[4], "SEED");
  auto client = ConnectTo(args[0], "produce-set");
  DeviceStream stream = ValueOrExit(DeviceStream::Create(), "DeviceStream::Create");
  const TensorDescriptor descriptor = ValueOrExit(EventTensor(bytes), "EventTensor");
  for (std::uint64_t i = 0; i < count; ++i) {
    WritableTensor tensor = ValueOrExit(client->Allocate(descriptor, kDevicePool), "Allocate");
    OkOrExit(FillPattern(tensor.data(0), bytes, seed + i, stream.get()), "FillPattern");
    ValueOrExit(tensor.PublishAfter(SetMemberName(args[1], i), stream.get()), "PublishAfter");
  }
  OkOrExit(stream.Synchronize(), "fills and fences");
  std::printf("published %llu\n", static_cast<unsigned long long>(count));
  return 0;
}

// Waits for `view`'s data on `stream` and counts its mismatching bytes against `seed`.
void QueueVerification(const TensorView& view, std::uint64_t seed, const DeviceStream& stream,
                       MismatchCounter& counter) {
  OkOrExit(view.WaitOn(stream.get()), "WaitOn");
  const std::uint64_t bytes = view.descriptor().buffers()[0].byte_size();
  OkOrExit(counter.Add(view.data(0), bytes, seed, stream.get()), "count mismatches");
}

int Consume(const std::vector<std::string>& args) {
  if (args.size() != 4) ExitWithError("usage: consume SOCKET NAME SEED WAIT_MS");
  const std::uint64_t seed = ParseNumber(args[2], "SEED");
  const auto wait = std::chrono::milliseconds(ParseNumber(args[3], "WAIT_MS"));
  auto client = ConnectTo(args[0], "consume");
  DeviceStream stream = ValueOrExit(DeviceStream::Create(), "DeviceStream::Create");
  MismatchCounter counter = ValueOrExit(MismatchCounter::Create(), "MismatchCounter::Create");
  OkOrExit(counter.Reset(stream.get()), "reset counter");
  auto view = client->Acquire(args[1], {.wait = wait});
  if (!view) {
    const StatusCode code = view.error().code();
    if (code != StatusCode::kNotFound && code != StatusCode::kDeadlineExceeded) {
      ExitWithError("Acquire: " + view.error().ToString());
    }
    std::printf("absent %s\n", std::string(StatusCodeName(code)).c_str());
    return 0;
  }
  QueueVerification(*view, seed, stream, counter);
  std::printf("waiting\n");
  const std::uint64_t mismatches = ValueOrExit(counter.Read(stream.get()), "read mismatch count");
  const Result<bool> ready = view->Ready();
  if (!ready && ready.error().code() == StatusCode::kDataLoss) {
    std::printf("lost\n");
    return 0;
  }
  if (!ValueOrExit(ready, "Ready")) ExitWithError("Ready() is false after the stream waited");
  if (mismatches != 0) {
    std::printf("mismatches %llu\n", static_cast<unsigned long long>(mismatches));
    return 1;
  }
  std::printf("verified %llu\n",
              static_cast<unsigned long long>(view->descriptor().buffers()[0].byte_size()));
  return 0;
}

int ConsumeSet(const std::vector<std::string>& args) {
  if (args.size() != 3) ExitWithError("usage: consume-set SOCKET PREFIX SEED");
  const std::uint64_t seed = ParseNumber(args[2], "SEED");
  auto client = ConnectTo(args[0], "consume-set");
  DeviceStream stream = ValueOrExit(DeviceStream::Create(), "DeviceStream::Create");
  MismatchCounter counter = ValueOrExit(MismatchCounter::Create(), "MismatchCounter::Create");
  OkOrExit(counter.Reset(stream.get()), "reset counter");
  TensorViewBatch batch = ValueOrExit(client->BatchAcquire({}, args[1]), "BatchAcquire");
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    // BatchAcquire lists prefix matches in name order: member i is batch[i].
    if (batch[i].name() != SetMemberName(args[1], i))
      ExitWithError("unexpected name " + batch[i].name());
    QueueVerification(batch[i], seed + i, stream, counter);
    bytes += batch[i].descriptor().buffers()[0].byte_size();
  }
  std::printf("acquired %zu\n", batch.size());
  std::string line;
  if (!std::getline(std::cin, line)) ExitWithError("stdin closed before the go-ahead");
  const std::uint64_t mismatches = ValueOrExit(counter.Read(stream.get()), "read mismatch count");
  if (mismatches != 0) {
    std::printf("mismatches %llu\n", static_cast<unsigned long long>(mismatches));
    return 1;
  }
  std::printf("verified %zu %llu\n", batch.size(), static_cast<unsigned long long>(bytes));
  return 0;
}

// The access this process has to device 0's mapping at `data`, from the driver itself.
std::string DescribeAccess(const void* data) {
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

int WriteInto(const std::vector<std::string>& args) {
  if (args.size() != 2) ExitWithError("usage: write-into SOCKET NAME");
  auto client = ConnectTo(args[0], "write-into");
  DeviceStream stream = ValueOrExit(DeviceStream::Create(), "DeviceStream::Create");
  TensorView view =
      ValueOrExit(client->Acquire(args[1], {.wait = std::chrono::seconds(30)}), "Acquire");
  OkOrExit(view.WaitOn(stream.get()), "WaitOn");
  OkOrExit(stream.Synchronize(), "wait for the data");
  std::printf("access %s\n", DescribeAccess(view.data(0)).c_str());
  // The write goes through the consumer's own mapping: the pointer the view hands out.
  const cudaError_t launched = LaunchWriteByte(const_cast<void*>(view.data(0)), stream.get());
  const cudaError_t finished =
      launched == cudaSuccess ? cudaStreamSynchronize(stream.get()) : launched;
  if (finished == cudaSuccess) {
    std::printf("write succeeded\n");
    return 1;
  }
  std::printf("write refused: %s\n", cudaGetErrorName(finished));
  return 0;
}

struct Role {
  std::string_view name;
  int (*run)(const std::vector<std::string>& args);
};

constexpr Role kRoles[] = {
    {"produce", Produce},        {"produce-set", ProduceSet}, {"consume", Consume},
    {"consume-set", ConsumeSet}, {"write-into", WriteInto},
};

}  // namespace
}  // namespace hurray::cuda_testing

int main(int argc, char** argv) {
  using hurray::cuda_testing::kRoles;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) hurray::cuda_testing::ExitWithError("usage: hurray_cuda_agent MODE ARGS...");
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& role : kRoles) {
    if (role.name == argv[1]) return role.run(args);
  }
  hurray::cuda_testing::ExitWithError(std::string("unknown mode ") + argv[1]);
}
