#include "testing/agent_program.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "hurray/buffer_handle.h"

namespace hurray::testing {
namespace {

using Arguments = std::vector<std::string>;

// hold-unreached's wait: longer than any test lets the agent live.
constexpr std::chrono::nanoseconds kEndless = std::chrono::minutes(10);
// exit-early's wait: the agent has closed its client long before it ends.
constexpr std::chrono::nanoseconds kEarlyExitDelay = std::chrono::milliseconds(500);

std::uint64_t ParseNumber(std::string_view text, std::string_view what) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    ExitWithError(fmt::format("{} \"{}\" is not a number", what, text));
  }
  return value;
}

[[noreturn]] void SleepUntilKilled() {
  while (true) ::pause();
}

// Client::Options::orphaned_fence_wait, from --orphaned-fence-wait-ms.
std::chrono::milliseconds orphaned_fence_wait = Client::Options().orphaned_fence_wait;

// What every mode starts with: a client named "<program> <mode>", then the device.
class Session {
 public:
  Session(const std::string& socket, std::string_view mode, AgentDeviceFactory make_device)
      : client_(ValueOrExit(Client::Connect({.socket_path = socket,
                                             .client_name = fmt::format(
                                                 "{} {}", program_invocation_short_name, mode),
                                             .orphaned_fence_wait = orphaned_fence_wait}),
                            "Connect")),
        device_(ValueOrExit(make_device(), "the device")) {}

  [[nodiscard]] Client& client() const { return *client_; }
  [[nodiscard]] AgentDevice& device() const { return *device_; }
  // Closes the client (its session) now, while the device and its stream live on.
  void CloseClient() { client_.reset(); }

 private:
  std::unique_ptr<Client> client_;
  // Destroyed first: its stream may still use the client's mappings.
  std::unique_ptr<AgentDevice> device_;
};

int Produce(const Arguments& args, AgentDeviceFactory make_device) {
  if (args.size() != 5) ExitWithError("usage: produce SOCKET NAME BYTES SEED STAGE");
  const std::string& name = args[1];
  const std::uint64_t bytes = ParseNumber(args[2], "BYTES");
  const std::uint64_t seed = ParseNumber(args[3], "SEED");
  const std::string& stage = args[4];
  Session session(args[0], "produce", make_device);
  AgentDevice& device = session.device();
  WritableTensor tensor = ValueOrExit(
      session.client().Allocate(ValueOrExit(EventTensor(bytes), "EventTensor"), kDevicePool),
      "Allocate");
  if (stage == "hold-unreached") OkOrExit(device.QueueDelay(kEndless), "queue the endless wait");
  if (stage == "exit-early") OkOrExit(device.QueueDelay(kEarlyExitDelay), "queue the delay");
  OkOrExit(device.QueueFill(tensor.data(0), bytes, seed), "queue the fill");
  if (stage == "hold-allocated") {
    OkOrExit(device.Synchronize(), "fill");
    std::printf("allocated\n");
    SleepUntilKilled();
  }
  const PublishedTensor published =
      ValueOrExit(tensor.PublishAfter(name, device.stream()), "PublishAfter");
  if (stage != "hold-unreached" && stage != "exit-early") {
    OkOrExit(device.Synchronize(), "fill and fence");
  }
  std::printf("published %llu\n", static_cast<unsigned long long>(published.version));
  if (stage == "synced") return 0;
  if (stage == "exit-early") {
    session.CloseClient();  // Waits for the fence (Client::Options::own_fence_wait).
    return 0;
  }
  if (stage != "hold-reached" && stage != "hold-unreached") ExitWithError("unknown STAGE " + stage);
  SleepUntilKilled();
}

int ProduceSet(const Arguments& args, AgentDeviceFactory make_device) {
  if (args.size() != 5) ExitWithError("usage: produce-set SOCKET PREFIX COUNT BYTES SEED");
  const std::uint64_t count = ParseNumber(args[2], "COUNT");
  const std::uint64_t bytes = ParseNumber(args[3], "BYTES");
  const std::uint64_t seed = ParseNumber(args[4], "SEED");
  const Session session(args[0], "produce-set", make_device);
  AgentDevice& device = session.device();
  const TensorDescriptor descriptor = ValueOrExit(EventTensor(bytes), "EventTensor");
  for (std::uint64_t i = 0; i < count; ++i) {
    WritableTensor tensor =
        ValueOrExit(session.client().Allocate(descriptor, kDevicePool), "Allocate");
    OkOrExit(device.QueueFill(tensor.data(0), bytes, seed + i), "queue the fill");
    ValueOrExit(tensor.PublishAfter(SetMemberName(args[1], i), device.stream()), "PublishAfter");
  }
  OkOrExit(device.Synchronize(), "fills and fences");
  std::printf("published %llu\n", static_cast<unsigned long long>(count));
  return 0;
}

// Makes the stream wait for `view`'s data and queues the check of it against `seed`.
void QueueVerification(const TensorView& view, std::uint64_t seed, AgentDevice& device) {
  OkOrExit(view.WaitOn(device.stream()), "WaitOn");
  const std::uint64_t bytes = view.descriptor().buffers()[0].byte_size();
  OkOrExit(device.QueueCheck(view.data(0), bytes, seed), "queue the check");
}

int Consume(const Arguments& args, AgentDeviceFactory make_device) {
  if (args.size() != 4) ExitWithError("usage: consume SOCKET NAME SEED WAIT_MS");
  const std::uint64_t seed = ParseNumber(args[2], "SEED");
  const auto wait = std::chrono::milliseconds(ParseNumber(args[3], "WAIT_MS"));
  const Session session(args[0], "consume", make_device);
  AgentDevice& device = session.device();
  auto view = session.client().Acquire(args[1], {.wait = wait});
  if (!view) {
    const StatusCode code = view.error().code();
    if (code != StatusCode::kNotFound && code != StatusCode::kDeadlineExceeded) {
      ExitWithError("Acquire: " + view.error().ToString());
    }
    std::printf("absent %s\n", std::string(StatusCodeName(code)).c_str());
    return 0;
  }
  QueueVerification(*view, seed, device);
  std::printf("waiting\n");
  const std::uint64_t mismatches = ValueOrExit(device.ReadMismatches(), "read the mismatches");
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

// Queues the check of the tensor behind a delay of the stream, ends the lease in stream order
// (ReleaseAfter) and says "released"; at a line on stdin ends the delay, then waits for the
// check.
int ConsumeReleaseAfter(const Arguments& args, AgentDeviceFactory make_device) {
  if (args.size() != 4) ExitWithError("usage: consume-release-after SOCKET NAME SEED DELAY_MS");
  const std::uint64_t seed = ParseNumber(args[2], "SEED");
  const auto delay = std::chrono::milliseconds(ParseNumber(args[3], "DELAY_MS"));
  const Session session(args[0], "consume-release-after", make_device);
  AgentDevice& device = session.device();
  TensorView view = ValueOrExit(session.client().Acquire(args[1]), "Acquire");
  const std::uint64_t bytes = view.descriptor().buffers()[0].byte_size();
  OkOrExit(view.WaitOn(device.stream()), "WaitOn");
  OkOrExit(device.QueueDelay(delay), "queue the delay");
  OkOrExit(device.QueueCheck(view.data(0), bytes, seed), "queue the check");
  OkOrExit(view.ReleaseAfter(device.stream()), "ReleaseAfter");
  if (view.holds_lease()) ExitWithError("the view still holds its lease after ReleaseAfter");
  std::printf("released\n");
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) ExitWithError("stdin closed before the go-ahead");
  device.EndDelay();
  const std::uint64_t mismatches = ValueOrExit(device.ReadMismatches(), "read the mismatches");
  if (mismatches != 0) {
    std::printf("mismatches %llu\n", static_cast<unsigned long long>(mismatches));
    return 1;
  }
  std::printf("verified %llu\n", static_cast<unsigned long long>(bytes));
  return 0;
}

int ConsumeSet(const Arguments& args, AgentDeviceFactory make_device) {
  if (args.size() != 3) ExitWithError("usage: consume-set SOCKET PREFIX SEED");
  const std::uint64_t seed = ParseNumber(args[2], "SEED");
  const Session session(args[0], "consume-set", make_device);
  AgentDevice& device = session.device();
  TensorViewBatch batch = ValueOrExit(session.client().BatchAcquire({}, args[1]), "BatchAcquire");
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    // BatchAcquire lists prefix matches in name order: member i is batch[i].
    if (batch[i].name() != SetMemberName(args[1], i)) {
      ExitWithError("unexpected name " + batch[i].name());
    }
    QueueVerification(batch[i], seed + i, device);
    bytes += batch[i].descriptor().buffers()[0].byte_size();
  }
  std::printf("acquired %zu\n", batch.size());
  std::string line;
  if (!std::getline(std::cin, line)) ExitWithError("stdin closed before the go-ahead");
  const std::uint64_t mismatches = ValueOrExit(device.ReadMismatches(), "read the mismatches");
  if (mismatches != 0) {
    std::printf("mismatches %llu\n", static_cast<unsigned long long>(mismatches));
    return 1;
  }
  std::printf("verified %zu %llu\n", batch.size(), static_cast<unsigned long long>(bytes));
  return 0;
}

int WriteInto(const Arguments& args, AgentDeviceFactory make_device) {
  if (args.size() != 2) ExitWithError("usage: write-into SOCKET NAME");
  const Session session(args[0], "write-into", make_device);
  AgentDevice& device = session.device();
  const TensorView view =
      ValueOrExit(session.client().Acquire(args[1], {.wait = std::chrono::seconds(30)}), "Acquire");
  OkOrExit(view.WaitOn(device.stream()), "WaitOn");
  OkOrExit(device.Synchronize(), "wait for the data");
  std::printf("access %s\n", device.DescribeAccess(view.data(0)).c_str());
  // The write goes through the consumer's own mapping: the pointer the view hands out.
  const std::optional<std::string> refused = device.WriteOneByte(const_cast<void*>(view.data(0)));
  if (!refused) {
    std::printf("write succeeded\n");
    return 1;
  }
  std::printf("write refused: %s\n", refused->c_str());
  return 0;
}

struct Mode {
  std::string_view name;
  int (*run)(const Arguments& args, AgentDeviceFactory make_device);
};

constexpr Mode kModes[] = {
    {"produce", Produce},      {"produce-set", ProduceSet},
    {"consume", Consume},      {"consume-set", ConsumeSet},
    {"write-into", WriteInto}, {"consume-release-after", ConsumeReleaseAfter},
};

}  // namespace

int RunAgent(int argc, char** argv, AgentDeviceFactory make_device) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  constexpr std::string_view kOrphanedWaitFlag = "--orphaned-fence-wait-ms=";
  int first = 1;
  if (argc > first && std::string_view(argv[first]).starts_with(kOrphanedWaitFlag)) {
    orphaned_fence_wait = std::chrono::milliseconds(
        ParseNumber(std::string(std::string_view(argv[first]).substr(kOrphanedWaitFlag.size())),
                    "--orphaned-fence-wait-ms"));
    ++first;
  }
  if (argc < first + 1) {
    ExitWithError(fmt::format("usage: {} [{}N] MODE ARGS...", program_invocation_short_name,
                              kOrphanedWaitFlag));
  }
  const Arguments args(argv + first + 1, argv + argc);
  const std::string_view mode = argv[first];
  for (const Mode& candidate : kModes) {
    if (candidate.name == mode) return candidate.run(args, make_device);
  }
  ExitWithError(fmt::format("unknown mode {}", mode));
}

void ExitWithError(std::string_view what) {
  std::fprintf(stderr, "%s: %.*s\n", program_invocation_short_name, static_cast<int>(what.size()),
               what.data());
  std::exit(1);
}

void OkOrExit(const Status& status, std::string_view call) {
  if (!status) ExitWithError(std::string(call) + ": " + status.error().ToString());
}

std::string SetMemberName(std::string_view prefix, std::uint64_t index) {
  return fmt::format("{}{:06}", prefix, index);
}

Result<TensorDescriptor> EventTensor(std::uint64_t bytes) {
  HURRAY_ASSIGN_OR_RETURN(
      BufferHandle buffer,
      BufferHandle::Create(bytes, kMinBufferAlignment, DeviceTag::Cuda(), SyncMode::kEvent));
  return TensorDescriptor::Create(
      {.element_type = ElementType::kUint8, .shape = {bytes}, .buffers = {buffer}});
}

}  // namespace hurray::testing
