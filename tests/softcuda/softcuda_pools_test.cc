// The GPU exchange's variants that cuda_exchange_test does not cover, on the software driver
// (softcuda): the legacy cuIpc path, two devices (one pool each, found by UUID whatever a
// process's CUDA_VISIBLE_DEVICES), eviction in a full CUDA pool, and a daemon restart (GPU
// tensors are lost, CPU tensors kept). The real hurrayd and real agent processes
// (hurray_driver_agent, testing/agent_program.h); where the agent cannot do what a case needs
// (allocate in cuda:1, publish evictable), this process is the client, with the hurray client
// library and the driver calls the agent makes (copies, no kernels).
//
// The software driver's settings come from the environment, read once per process at cuInit:
// this process, hurrayd and the agents see HURRAY_SOFTCUDA_DEVICES=2 (set by ctest, and by
// SetUpTestSuite when unset); a case's own settings (ScopedEnvironment) are set before it
// starts hurrayd and the agents, which inherit them. Each case skips unless this process's
// driver is softcuda. Waits are bounded; no assertion depends on how long anything takes.
#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "client_internal.h"
#include "hurray/buffer_handle.h"
#include "hurray/client.h"
#include "hurray/cuda/driver.h"
#include "testing/agent_program.h"
#include "testing/child_process.h"
#include "testing/daemon_expectations.h"
#include "testing/daemon_process.h"
#include "testing/daemon_stats.h"
#include "testing/status_matchers.h"

namespace hurray::softcuda_testing {
namespace {

using namespace std::chrono_literals;
using ::hurray::testing::ChildProcess;
using ::hurray::testing::DaemonProcess;
using ::hurray::testing::FetchDaemonStats;
using ::hurray::testing::FindPool;

constexpr std::uint64_t kTensorBytes = std::uint64_t{64} << 20;
constexpr std::uint64_t kSlabBytes = std::uint64_t{2} << 20;  // softcuda's granularity.
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr auto kLineTimeout = 120s;
// softcuda names its devices so (tests/softcuda/device_table.cc).
constexpr std::string_view kSoftcudaDeviceName = "hurray software CUDA device";

// The agents' byte pattern (device_kernels.h): byte i for `seed` is byte i % 8 of
// splitmix64(i / 8 + seed * golden ratio).
std::vector<std::uint8_t> Pattern(std::uint64_t bytes, std::uint64_t seed) {
  std::vector<std::uint8_t> pattern(bytes);
  for (std::uint64_t word = 0; word * 8 < bytes; ++word) {
    std::uint64_t z = word + seed * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    for (std::uint64_t i = word * 8; i < bytes && i < word * 8 + 8; ++i) {
      pattern[i] = static_cast<std::uint8_t>(z >> (8 * (i - word * 8)));
    }
  }
  return pattern;
}

// Sets environment variables of this process (inherited by the processes it starts) and
// restores them when destroyed. This process's own driver read its settings at cuInit,
// before any case ran: only the processes started meanwhile see the change.
class ScopedEnvironment {
 public:
  ScopedEnvironment() = default;
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;
  ~ScopedEnvironment() {
    // Last saved first: a name set twice gets its first saved value back.
    for (const auto& [name, value] : std::views::reverse(saved_)) {
      if (value) {
        (void)::setenv(name.c_str(), value->c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
      } else {
        (void)::unsetenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
      }
    }
  }

  void Set(const std::string& name, const std::string& value) {
    Save(name);
    (void)::setenv(name.c_str(), value.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  void Unset(const std::string& name) {
    Save(name);
    (void)::unsetenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
  }

 private:
  void Save(const std::string& name) {
    const char* value = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
    saved_.emplace_back(name, value == nullptr ? std::nullopt : std::optional<std::string>(value));
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The driver calls of this process's own device work that DriverApi lacks (product code
// never makes them), resolved as hurray_driver_agent resolves them.
struct CopyCalls {
  decltype(&::cuMemcpyHtoD_v2) MemcpyHtoD = nullptr;
};

Result<CopyCalls> ResolveCopyCalls() {
  CopyCalls calls;
  HURRAY_RETURN_IF_ERROR(cuda::ResolveDriverEntryPoint("cuMemcpyHtoD", calls.MemcpyHtoD));
  return calls;
}

// One device of this process: its primary context (current on this thread while the object
// lives) and a stream. For the main thread.
class TestDevice {
 public:
  static Result<std::unique_ptr<TestDevice>> Open(int ordinal) {
    HURRAY_ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::LoadDriver());
    HURRAY_ASSIGN_OR_RETURN(const CopyCalls copies, ResolveCopyCalls());
    auto device = std::unique_ptr<TestDevice>(new TestDevice(*api, copies));
    HURRAY_RETURN_IF_ERROR(
        cuda::CheckCuda(*api, "cuDeviceGet", api->DeviceGet(&device->device_, ordinal)));
    HURRAY_RETURN_IF_ERROR(
        cuda::CheckCuda(*api, "cuDevicePrimaryCtxRetain",
                        api->DevicePrimaryCtxRetain(&device->context_, device->device_)));
    HURRAY_RETURN_IF_ERROR(
        cuda::CheckCuda(*api, "cuCtxSetCurrent", api->CtxSetCurrent(device->context_)));
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
        *api, "cuStreamCreate", api->StreamCreate(&device->stream_, CU_STREAM_NON_BLOCKING)));
    return device;
  }
  TestDevice(const TestDevice&) = delete;
  TestDevice& operator=(const TestDevice&) = delete;
  ~TestDevice() {
    if (stream_ != nullptr) (void)api_.StreamDestroy(stream_);
    if (context_ != nullptr) {
      (void)api_.CtxSetCurrent(nullptr);
      (void)api_.DevicePrimaryCtxRelease(device_);
    }
  }

  [[nodiscard]] CudaStream stream() const { return stream_; }

  // Copies `bytes` to device memory at `data` (synchronously).
  [[nodiscard]] Status Write(void* data, std::span<const std::uint8_t> bytes) const {
    return cuda::CheckCuda(
        api_, "cuMemcpyHtoD",
        copies_.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(data), bytes.data(), bytes.size()));
  }
  // The `size` bytes of device memory at `data`, once the stream has run.
  [[nodiscard]] Result<std::vector<std::uint8_t>> Read(const void* data, std::uint64_t size) const {
    HURRAY_RETURN_IF_ERROR(
        cuda::CheckCuda(api_, "cuStreamSynchronize", api_.StreamSynchronize(stream_)));
    std::vector<std::uint8_t> bytes(size);
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
        api_, "cuMemcpyDtoH",
        api_.MemcpyDtoH(bytes.data(), reinterpret_cast<CUdeviceptr>(data), bytes.size())));
    return bytes;
  }
  [[nodiscard]] Status Synchronize() const {
    return cuda::CheckCuda(api_, "cuStreamSynchronize", api_.StreamSynchronize(stream_));
  }

  // Holds the stream: work queued after this waits until Let() (a wait on a registered host
  // word of this object). Once per object.
  [[nodiscard]] Status Hold() {
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(
        api_, "cuMemHostRegister",
        api_.MemHostRegister(&hold_word_, kHoldPage, CU_MEMHOSTREGISTER_DEVICEMAP)));
    CUdeviceptr word = 0;
    HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(api_, "cuMemHostGetDevicePointer",
                                           api_.MemHostGetDevicePointer(&word, &hold_word_, 0)));
    return cuda::CheckCuda(api_, "cuStreamWaitValue64",
                           api_.StreamWaitValue64(stream_, word, 1, CU_STREAM_WAIT_VALUE_GEQ));
  }
  // Lets the held stream run on, and waits until it has.
  [[nodiscard]] Status Let() {
    std::atomic_ref(hold_word_[0]).store(1);
    HURRAY_RETURN_IF_ERROR(Synchronize());
    return cuda::CheckCuda(api_, "cuMemHostUnregister", api_.MemHostUnregister(&hold_word_));
  }

 private:
  static constexpr std::size_t kHoldPage = 4096;

  TestDevice(const cuda::DriverApi& api, CopyCalls copies) : api_(api), copies_(copies) {}

  const cuda::DriverApi& api_;
  CopyCalls copies_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  // The word Hold makes the stream wait on: a page of its own, as registration needs.
  alignas(kHoldPage) std::array<std::uint64_t, kHoldPage / 8> hold_word_{};
};

// Whether this process's driver is softcuda with at least one device; an error for a driver
// that fails otherwise than by having no device.
Result<bool> SoftcudaPresent() {
  if (::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE) == nullptr) return false;
  const Result<const cuda::DriverApi*> driver = cuda::LoadDriver();
  if (!driver) {
    if (driver.error().message().find("CUDA_ERROR_NO_DEVICE") != std::string::npos) return false;
    return std::unexpected(driver.error());
  }
  const cuda::DriverApi& api = **driver;
  int count = 0;
  HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(api, "cuDeviceGetCount", api.DeviceGetCount(&count)));
  if (count == 0) return false;
  CUdevice device = 0;
  HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(api, "cuDeviceGet", api.DeviceGet(&device, 0)));
  std::string name(256, '\0');
  HURRAY_RETURN_IF_ERROR(
      cuda::CheckCuda(api, "cuDeviceGetName",
                      api.DeviceGetName(name.data(), static_cast<int>(name.size()), device)));
  return name.starts_with(kSoftcudaDeviceName);
}

std::string Bytes(std::uint64_t bytes) { return std::to_string(bytes); }

// How StartAgent starts an agent.
struct AgentOptions {
  // The agent's CUDA_VISIBLE_DEVICES; nullopt: none (every device, in the daemon's order).
  std::optional<std::string> visible_devices;
  bool stdin_pipe = false;
};

// What an agent printed and how it ended.
struct AgentRun {
  std::optional<int> status;  // As waitpid gives it; nullopt: still running (killed).
  std::string last_line;      // Its last line of stdout.
  std::string stderr_text;
  [[nodiscard]] bool Succeeded() const {
    return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
  }
};

class SoftcudaPoolsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // As ctest sets it, for a run by hand; before this process's driver reads it (SetUp).
    (void)::setenv("HURRAY_SOFTCUDA_DEVICES", "2", 0);  // NOLINT(concurrency-mt-unsafe)
  }

  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(const bool present, SoftcudaPresent());
    if (!present) GTEST_SKIP() << "skipped: this process's CUDA driver is not softcuda";
    // hurrayd and the agents see every device, in order, unless a case says otherwise.
    environment_.Unset("CUDA_VISIBLE_DEVICES");
  }

  void TearDown() override {
    agents_.clear();  // Kills what still runs.
    if (daemon_ != nullptr) {
      ::hurray::testing::ExpectStopsCleanly(*daemon_);
      if (HasFailure()) std::cerr << "hurrayd log:\n" << daemon_->Log(16384) << "\n";
    }
    daemon_.reset();
    stopped_daemons_.clear();  // Their segments and directories go last.
  }

  // Starts hurrayd with `cuda_pool_settings` ("key = value" lines of [cuda_pool]) on a fresh
  // directory, or on the directory and shm prefix of the daemon that ran before (`restart`).
  void StartDaemon(const std::vector<std::string>& cuda_pool_settings = {}, bool restart = false) {
    DaemonProcess::Options options{.binary = HURRAYD_PATH, .name = "hurray-softcuda-pools"};
    // DaemonProcess writes `settings` before its [cpu_pool] table: a table of their own.
    if (!cuda_pool_settings.empty()) {
      options.settings.emplace_back("[cuda_pool]");
      options.settings.insert(options.settings.end(), cuda_pool_settings.begin(),
                              cuda_pool_settings.end());
    }
    if (restart) {
      ASSERT_NE(daemon_, nullptr);
      options.directory = daemon_->directory();
      options.shm_prefix = daemon_->shm_prefix();
      stopped_daemons_.push_back(std::move(daemon_));
    }
    ASSERT_OK_AND_ASSIGN(daemon_, DaemonProcess::Start(options));
  }

  [[nodiscard]] DaemonProcess& daemon() const { return *daemon_; }
  [[nodiscard]] const std::string& socket() const { return daemon_->socket_path(); }

  [[nodiscard]] v1::StatsResponse Stats() const {
    auto stats = FetchDaemonStats(socket());
    EXPECT_OK(stats);
    return stats.value_or(v1::StatsResponse());
  }
  [[nodiscard]] v1::PoolStats Pool(std::string_view name) const {
    auto pool = FindPool(Stats(), name);
    EXPECT_OK(pool);
    return pool.value_or(v1::PoolStats());
  }

  // Waits (up to 60 s) until the daemon has `sessions` sessions: the ones of agents that
  // exited are gone, and with them their mappings' counts.
  void WaitForSessions(std::uint32_t sessions) const {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (Stats().session_count() != sessions) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << Stats().DebugString();
      std::this_thread::sleep_for(20ms);
    }
  }

  [[nodiscard]] Result<std::unique_ptr<Client>> Connect(std::string name) const {
    return Client::Connect({.socket_path = socket(), .client_name = std::move(name)});
  }

  // Starts `hurray_driver_agent MODE SOCKET ARGS...`; the fixture kills it at the end.
  ChildProcess& StartAgent(const std::string& mode, const std::vector<std::string>& args,
                           const AgentOptions& options = {}) {
    std::vector<std::string> argv = {HURRAY_DRIVER_AGENT_PATH, mode, socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess::Options child{
        .stderr_path = fmt::format("{}/agent-{}.stderr", daemon_->directory(), agents_.size()),
        .stdin_pipe = options.stdin_pipe};
    if (options.visible_devices) {
      child.environment.push_back("CUDA_VISIBLE_DEVICES=" + *options.visible_devices);
    }
    auto started = ChildProcess::Start(argv, child);
    EXPECT_OK(started);
    agents_.push_back(std::make_unique<ChildProcess>(std::move(*started)));
    stderr_paths_.push_back(child.stderr_path);
    return *agents_.back();
  }

  // The agent's next line; "" (and a test failure) when none comes in time.
  static std::string NextLine(ChildProcess& agent) {
    const std::optional<std::string> line = agent.ReadLine(kLineTimeout);
    EXPECT_TRUE(line.has_value()) << agent.command_line() << " printed nothing in time";
    return line.value_or("");
  }

  // Runs an agent to its end.
  AgentRun RunAgentToEnd(const std::string& mode, const std::vector<std::string>& args,
                         const AgentOptions& options = {}) {
    ChildProcess& agent = StartAgent(mode, args, options);
    const std::string stderr_path = stderr_paths_.back();
    const std::string out = agent.ReadToEnd(kLineTimeout).value_or("");
    AgentRun run{.status = agent.Wait(5s)};
    const std::size_t last = out.find_last_of('\n', out.size() >= 2 ? out.size() - 2 : 0);
    run.last_line = out.substr(last == std::string::npos ? 0 : last + 1);
    if (!run.last_line.empty() && run.last_line.back() == '\n') run.last_line.pop_back();
    std::ifstream file(stderr_path);
    run.stderr_text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    return run;
  }

  // Runs an agent to its end; expects exit 0 and returns its last line.
  std::string RunAgent(const std::string& mode, const std::vector<std::string>& args,
                       const AgentOptions& options = {}) {
    const AgentRun run = RunAgentToEnd(mode, args, options);
    EXPECT_TRUE(run.Succeeded()) << mode << ": "
                                 << (run.status ? testing::DescribeWaitStatus(*run.status)
                                                : "still running")
                                 << "; last line: " << run.last_line << "; stderr:\n"
                                 << run.stderr_text;
    return run.last_line;
  }

  // Allocates an Event tensor of `bytes` in `pool` with `client`, fills it on `device` with
  // the pattern of `seed`, and publishes it after the stream (evictable when asked).
  static Result<PublishedTensor> PublishPattern(Client& client, const TestDevice& device,
                                                std::string_view pool, const std::string& name,
                                                std::uint64_t bytes, std::uint64_t seed,
                                                bool evictable = false) {
    HURRAY_ASSIGN_OR_RETURN(const TensorDescriptor descriptor, testing::EventTensor(bytes));
    HURRAY_ASSIGN_OR_RETURN(WritableTensor tensor, client.Allocate(descriptor, pool));
    HURRAY_RETURN_IF_ERROR(device.Write(tensor.data(0), Pattern(bytes, seed)));
    HURRAY_ASSIGN_OR_RETURN(PublishedTensor published,
                            tensor.PublishAfter(name, device.stream(), {.evictable = evictable}));
    HURRAY_RETURN_IF_ERROR(device.Synchronize());
    return published;
  }

  // Expects `view` to hold the pattern of `seed`, read on `device` after WaitOn.
  static void ExpectPattern(const TensorView& view, const TestDevice& device, std::uint64_t seed) {
    ASSERT_OK(view.WaitOn(device.stream()));
    const std::uint64_t bytes = view.descriptor().buffers()[0].byte_size();
    ASSERT_OK_AND_ASSIGN(const std::vector<std::uint8_t> read, device.Read(view.data(0), bytes));
    EXPECT_TRUE(read == Pattern(bytes, seed)) << view.name() << " does not hold pattern " << seed;
  }

  ScopedEnvironment environment_;

 private:
  std::unique_ptr<DaemonProcess> daemon_;
  // Daemons stopped for a restart: kept until the end, their directory and segments in use.
  std::vector<std::unique_ptr<DaemonProcess>> stopped_daemons_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
  std::vector<std::string> stderr_paths_;
};

// A device that cannot export POSIX file descriptors gets a pool of cuMemAlloc slabs shared
// as legacy IPC handles; the exchange works across processes as on the VMM path.
TEST_F(SoftcudaPoolsTest, LegacyIpcPoolExchangesAcrossProcesses) {
  environment_.Set("HURRAY_SOFTCUDA_ATTR_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED", "0");
  StartDaemon();
  const v1::StatsResponse stats = Stats();
  for (const std::string_view name : {"cuda:0", "cuda:1"}) {
    ASSERT_OK_AND_ASSIGN(const v1::PoolStats pool, FindPool(stats, name));
    EXPECT_EQ(pool.mechanism(), "legacy_ipc") << name;
  }
  EXPECT_NE(daemon().Log().find("legacy_ipc"), std::string::npos) << daemon().Log(4096);

  // The consumer waits for the name first: its stream, not its host, waits for the data.
  ChildProcess& consumer = StartAgent("consume", {"legacy/set000000", "41", "60000"});
  EXPECT_EQ(RunAgent("produce", {"legacy/set000000", Bytes(kTensorBytes), "41", "synced"}),
            "published 1");
  EXPECT_EQ(NextLine(consumer), "waiting");
  EXPECT_EQ(NextLine(consumer), "verified " + Bytes(kTensorBytes));

  // A fresh process, the data already ready, holding its mapping while the counters are read:
  // one mapping of the one slab, read-write (legacy handles open read-write only).
  WaitForSessions(0);
  const v1::PoolStats before = Pool("cuda:0");
  EXPECT_EQ(before.mechanism(), "legacy_ipc");
  EXPECT_EQ(before.segment_count(), 1U);
  ChildProcess& holder = StartAgent("consume-set", {"legacy/set", "41"}, {.stdin_pipe = true});
  EXPECT_EQ(NextLine(holder), "acquired 1");
  const v1::PoolStats holding = Pool("cuda:0");
  EXPECT_EQ(holding.slab_mappings(), before.slab_mappings() + 1);
  EXPECT_EQ(holding.read_only_slab_mappings(), before.read_only_slab_mappings());
  ASSERT_OK(holder.WriteLine("go"));
  EXPECT_EQ(NextLine(holder), "verified 1 " + Bytes(kTensorBytes));
}

// Two devices: one pool each, named after the daemon's ordinals and told apart by UUID; a
// process finds its own ordinal of a pool's GPU by the UUID, whatever its
// CUDA_VISIBLE_DEVICES, and one that does not see the GPU is refused.
TEST_F(SoftcudaPoolsTest, TwoDevicesServeAPoolEachFoundByUuid) {
  StartDaemon();
  const v1::StatsResponse stats = Stats();
  ASSERT_OK_AND_ASSIGN(const v1::PoolStats pool0, FindPool(stats, "cuda:0"));
  ASSERT_OK_AND_ASSIGN(const v1::PoolStats pool1, FindPool(stats, "cuda:1"));
  EXPECT_EQ(pool0.device_ordinal(), 0U);
  EXPECT_EQ(pool1.device_ordinal(), 1U);
  EXPECT_TRUE(pool0.device_uuid().starts_with("GPU-")) << pool0.device_uuid();
  EXPECT_TRUE(pool1.device_uuid().starts_with("GPU-")) << pool1.device_uuid();
  EXPECT_NE(pool0.device_uuid(), pool1.device_uuid());
  EXPECT_EQ(pool0.mechanism(), "vmm");
  EXPECT_EQ(pool1.mechanism(), "vmm");

  // cuda:0 by an agent (the agent's pool); cuda:1 by this process, on its device 1.
  EXPECT_EQ(RunAgent("produce", {"two/zero", Bytes(kTensorBytes), "31", "synced"}), "published 1");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client, Connect("two-devices"));
  {
    ASSERT_OK_AND_ASSIGN(const std::unique_ptr<TestDevice> device1, TestDevice::Open(1));
    ASSERT_OK_AND_ASSIGN(const TensorDescriptor descriptor, testing::EventTensor(kSlabBytes));
    ASSERT_OK_AND_ASSIGN(WritableTensor probe, client->Allocate(descriptor, "cuda:1"));
    EXPECT_EQ(probe.device().device_uuid, pool1.device_uuid());
    EXPECT_EQ(probe.device().device_ordinal, 1);
    ASSERT_OK(probe.Cancel());
    ASSERT_OK(PublishPattern(*client, *device1, "cuda:1", "two/one000000", kTensorBytes, 32));
  }
  EXPECT_GE(Pool("cuda:0").used_bytes(), kTensorBytes);
  EXPECT_GE(Pool("cuda:1").used_bytes(), kTensorBytes);

  // Consumers in other processes: in the daemon's order, reversed, and seeing device 1 only.
  // The agent computes on its device 0, which is the pool's GPU in each case below.
  EXPECT_EQ(RunAgent("consume", {"two/zero", "31", "0"}), "verified " + Bytes(kTensorBytes));
  EXPECT_EQ(RunAgent("consume", {"two/one000000", "32", "0"}, {.visible_devices = "1"}),
            "verified " + Bytes(kTensorBytes));
  {
    // Reversed, holding its mapping while the counters are read: it is cuda:1's.
    WaitForSessions(1);  // This process's.
    const v1::PoolStats before0 = Pool("cuda:0");
    const v1::PoolStats before1 = Pool("cuda:1");
    ChildProcess& reversed = StartAgent("consume-set", {"two/one", "32"},
                                        {.visible_devices = "1,0", .stdin_pipe = true});
    EXPECT_EQ(NextLine(reversed), "acquired 1");
    EXPECT_EQ(Pool("cuda:1").slab_mappings(), before1.slab_mappings() + 1);
    EXPECT_EQ(Pool("cuda:1").read_only_slab_mappings(), before1.read_only_slab_mappings() + 1);
    EXPECT_EQ(Pool("cuda:0").slab_mappings(), before0.slab_mappings());
    ASSERT_OK(reversed.WriteLine("go"));
    EXPECT_EQ(NextLine(reversed), "verified 1 " + Bytes(kTensorBytes));
  }
  // A process that does not see cuda:0's GPU cannot map its memory: Acquire says why, where
  // a mapping by the bare ordinal would have put the tensor on the wrong device.
  const AgentRun blind =
      RunAgentToEnd("consume", {"two/zero", "31", "0"}, {.visible_devices = "1"});
  EXPECT_FALSE(blind.Succeeded()) << blind.last_line;
  EXPECT_NE(blind.stderr_text.find("Acquire: FAILED_PRECONDITION"), std::string::npos)
      << blind.stderr_text;

  // This process (both devices, in order) reads each tensor on its pool's device.
  for (const auto& [name, pool, seed] :
       {std::tuple{"two/zero", pool0, 31}, std::tuple{"two/one000000", pool1, 32}}) {
    ASSERT_OK_AND_ASSIGN(const TensorView view, client->Acquire(name));
    EXPECT_EQ(view.device().device_uuid, pool.device_uuid()) << name;
    EXPECT_EQ(view.device().device_ordinal, static_cast<int>(pool.device_ordinal())) << name;
    ASSERT_OK_AND_ASSIGN(const std::unique_ptr<TestDevice> device,
                         TestDevice::Open(view.device().device_ordinal));
    ExpectPattern(view, *device, seed);
  }
}

// A full CUDA pool evicts evictable, unleased versions least recently used first; what is
// leased or not evictable stays, and an allocation that still does not fit is
// RESOURCE_EXHAUSTED (docs/operations.md, Eviction).
TEST_F(SoftcudaPoolsTest, FullCudaPoolEvictsLeastRecentlyUsedThenRefuses) {
  // Four slabs of one tensor each.
  StartDaemon(
      {fmt::format("capacity = {}", 4 * kSlabBytes), fmt::format("slab_size = {}", kSlabBytes)});
  EXPECT_EQ(Pool("cuda:0").capacity_bytes(), 4 * kSlabBytes);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client, Connect("eviction"));
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<TestDevice> device, TestDevice::Open(0));
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(PublishPattern(*client, *device, "cuda:0", fmt::format("evict/{}", i), kSlabBytes,
                             50 + i, /*evictable=*/true));
  }
  EXPECT_EQ(Pool("cuda:0").used_bytes(), 4 * kSlabBytes);
  // evict/0 is used again, and leased: evict/1 is now the least recently used.
  ASSERT_OK_AND_ASSIGN(const TensorView leased, client->Acquire("evict/0"));

  // Not evictable, from another process: evict/1 makes room for it.
  EXPECT_EQ(RunAgent("produce", {"keep/4", Bytes(kSlabBytes), "54", "synced"}), "published 1");
  EXPECT_ERROR(client->Acquire("evict/1"), StatusCode::kNotFound);
  EXPECT_EQ(Stats().evicted_tensor_count(), 1U);
  EXPECT_EQ(Stats().evicted_bytes_total(), kSlabBytes);
  EXPECT_EQ(RunAgent("consume", {"keep/4", "54", "0"}), "verified " + Bytes(kSlabBytes));
  for (const int i : {2, 3}) {
    EXPECT_EQ(RunAgent("consume", {fmt::format("evict/{}", i), Bytes(50 + i), "0"}),
              "verified " + Bytes(kSlabBytes));
  }

  // Two more: evict/2, then evict/3 (acquired by the consumers above in that order).
  ASSERT_OK(PublishPattern(*client, *device, "cuda:0", "keep/5", kSlabBytes, 55));
  EXPECT_ERROR(client->Acquire("evict/2"), StatusCode::kNotFound);
  EXPECT_OK(client->Acquire("evict/3"));
  ASSERT_OK(PublishPattern(*client, *device, "cuda:0", "keep/6", kSlabBytes, 56));
  EXPECT_ERROR(client->Acquire("evict/3"), StatusCode::kNotFound);
  EXPECT_EQ(Stats().evicted_tensor_count(), 3U);

  // Left: evict/0 (leased) and keep/4..6 (not evictable). Nothing more can go.
  ASSERT_OK_AND_ASSIGN(const TensorDescriptor descriptor, testing::EventTensor(kSlabBytes));
  EXPECT_ERROR(client->Allocate(descriptor, "cuda:0"), StatusCode::kResourceExhausted);
  const AgentRun refused = RunAgentToEnd("produce", {"keep/7", Bytes(kSlabBytes), "57", "synced"});
  EXPECT_FALSE(refused.Succeeded()) << refused.last_line;
  EXPECT_NE(refused.stderr_text.find("Allocate: RESOURCE_EXHAUSTED"), std::string::npos)
      << refused.stderr_text;
  EXPECT_EQ(Stats().evicted_tensor_count(), 3U);
  ExpectPattern(leased, *device, 50);
  for (const int i : {4, 5, 6}) {
    EXPECT_EQ(RunAgent("consume", {fmt::format("keep/{}", i), Bytes(50 + i), "0"}),
              "verified " + Bytes(kSlabBytes));
  }
}

// The daemon releases an empty slab only once no process maps it: device memory stays
// allocated while mapped (cuMemRelease frees it when the last mapping goes), so releasing it
// earlier would count as free what the device still holds.
TEST_F(SoftcudaPoolsTest, AnEmptySlabStaysWhileAProcessMapsItAndGoesOnceUnmapped) {
  StartDaemon({fmt::format("slab_size = {}", kSlabBytes), "idle_slab_release_ms = 100"});
  EXPECT_EQ(RunAgent("produce", {"idle/t", Bytes(kSlabBytes), "70", "synced"}), "published 1");
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<TestDevice> device, TestDevice::Open(0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client, Connect("idle"));
  {
    ASSERT_OK_AND_ASSIGN(const TensorView view, client->Acquire("idle/t"));
    ExpectPattern(view, *device, 70);
  }
  // The view is gone, the slab stays mapped here for a later acquire; the tensor goes.
  ASSERT_OK(client->Delete("idle/t"));
  const auto emptied = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - emptied < 1s) {
    const v1::PoolStats pool = Pool("cuda:0");
    ASSERT_EQ(pool.used_bytes(), 0U);
    ASSERT_EQ(pool.segment_count(), 1U) << "released while this process maps it";
    ASSERT_EQ(pool.slab_mappings(), 1U);
    std::this_thread::sleep_for(50ms);
  }
  // Unmapped (the client closes), it goes.
  client.reset();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (Pool("cuda:0").segment_count() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(Pool("cuda:0").segment_count(), 0U);
  EXPECT_EQ(Pool("cuda:0").slab_mappings(), 0U);
}

// WritableTensor::CancelAfter: the allocation stays the producer's until the work queued on
// the stream so far is done (kernels still writing it never write memory handed to another
// tensor), then is freed; the call returns at once.
TEST_F(SoftcudaPoolsTest, CancelAfterFreesTheAllocationOnlyOnceTheStreamIsDone) {
  StartDaemon();
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<TestDevice> device, TestDevice::Open(0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client, Connect("cancel-after"));
  ASSERT_OK_AND_ASSIGN(const TensorDescriptor descriptor, testing::EventTensor(kTensorBytes));
  ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client->Allocate(descriptor, "cuda:0"));
  ASSERT_OK(device->Hold());
  ASSERT_OK(tensor.CancelAfter(device->stream()));
  const auto held = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - held < 300ms) {
    ASSERT_EQ(Pool("cuda:0").allocation_count(), 1U) << "freed while the stream was held";
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_OK(device->Let());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (Pool("cuda:0").allocation_count() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(Pool("cuda:0").allocation_count(), 0U);
  EXPECT_OK(tensor.CancelAfter(device->stream()));  // Empty now: nothing to do.
}

// Each ready event (the C client's buffer events) is recorded on a stream of its own
// (docs/gpu.md, "Waiting for a fence: the consumer's relay"). A tensor whose data is ready
// gets an event that completes at once, even while an earlier event of another tensor waits
// for a fence that is not reached.
TEST_F(SoftcudaPoolsTest, AReadyTensorsEventDoesNotWaitBehindAnotherTensorsFence) {
  StartDaemon();
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<TestDevice> device, TestDevice::Open(0));
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<TestDevice> held, TestDevice::Open(0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client, Connect("ready-events"));
  ASSERT_OK(PublishPattern(*client, *device, "cuda:0", "events/ready", kMiB, 91));
  ASSERT_OK_AND_ASSIGN(const TensorDescriptor descriptor, testing::EventTensor(kMiB));
  ASSERT_OK_AND_ASSIGN(WritableTensor pending, client->Allocate(descriptor, "cuda:0"));
  ASSERT_OK(held->Hold());
  ASSERT_OK(pending.PublishAfter("events/pending", held->stream()));

  ASSERT_OK_AND_ASSIGN(const TensorView waiting, client->Acquire("events/pending"));
  ASSERT_OK_AND_ASSIGN(const TensorView ready, client->Acquire("events/ready"));
  ASSERT_OK_AND_ASSIGN(const std::shared_ptr<void> waiting_event,
                       client_internal::TensorViewAccess::ReadyEvent(waiting));
  ASSERT_OK_AND_ASSIGN(const std::shared_ptr<void> ready_event,
                       client_internal::TensorViewAccess::ReadyEvent(ready));
  ASSERT_OK_AND_ASSIGN(const cuda::DriverApi* api, cuda::LoadDriver());
  const auto query = [&](const std::shared_ptr<void>& event) {
    return api->EventQuery(static_cast<CUevent>(event.get()));
  };
  const auto completes = [&](const std::shared_ptr<void>& event) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (query(event) == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    return query(event);
  };
  EXPECT_EQ(completes(ready_event), CUDA_SUCCESS)
      << "the ready tensor's event waits behind the other tensor's fence";
  EXPECT_EQ(query(waiting_event), CUDA_ERROR_NOT_READY);
  ASSERT_OK(held->Let());
  EXPECT_EQ(completes(waiting_event), CUDA_SUCCESS);
}

// GPU tensors do not survive a restart (docs/reliability.md, guarantee 8): after SIGTERM and
// a new daemon on the same directory, the CPU tensor is served byte for byte, the GPU tensor
// is reported lost (NOT_FOUND), and a new GPU exchange works.
TEST_F(SoftcudaPoolsTest, RestartKeepsCpuTensorsAndLosesGpuTensors) {
  StartDaemon();
  const std::vector<std::uint8_t> cpu_bytes = Pattern(std::uint64_t{1} << 20, 61);
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client, Connect("restart-producer"));
    ASSERT_OK_AND_ASSIGN(const BufferHandle buffer,
                         BufferHandle::Create(cpu_bytes.size(), kMinBufferAlignment,
                                              DeviceTag::Cpu(), SyncMode::kProducerSynced));
    ASSERT_OK_AND_ASSIGN(const TensorDescriptor descriptor,
                         TensorDescriptor::Create({.element_type = ElementType::kUint8,
                                                   .shape = {cpu_bytes.size()},
                                                   .buffers = {buffer}}));
    ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client->Allocate(descriptor, "cpu"));
    std::memcpy(tensor.buffer(0).data(), cpu_bytes.data(), cpu_bytes.size());
    ASSERT_OK(tensor.Publish("restart/cpu"));
  }
  EXPECT_EQ(RunAgent("produce", {"restart/gpu", Bytes(kTensorBytes), "62", "synced"}),
            "published 1");
  EXPECT_EQ(RunAgent("consume", {"restart/gpu", "62", "0"}), "verified " + Bytes(kTensorBytes));

  ASSERT_OK(daemon().Stop());
  StartDaemon({}, /*restart=*/true);

  EXPECT_GE(Stats().lost_tensor_count(), 1U);
  EXPECT_EQ(Pool("cuda:0").used_bytes(), 0U);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client, Connect("restart-consumer"));
  {
    ASSERT_OK_AND_ASSIGN(const TensorView view, client->Acquire("restart/cpu"));
    ASSERT_EQ(view.buffer(0).size(), cpu_bytes.size());
    EXPECT_EQ(std::memcmp(view.buffer(0).data(), cpu_bytes.data(), cpu_bytes.size()), 0);
  }
  EXPECT_ERROR(client->Acquire("restart/gpu"), StatusCode::kNotFound,
               {"did not survive the restart"});
  EXPECT_EQ(RunAgent("consume", {"restart/gpu", "62", "0"}), "absent NOT_FOUND");

  ChildProcess& consumer = StartAgent("consume", {"restart/gpu-new", "63", "60000"});
  EXPECT_EQ(RunAgent("produce", {"restart/gpu-new", Bytes(kTensorBytes), "63", "synced"}),
            "published 1");
  EXPECT_EQ(NextLine(consumer), "waiting");
  EXPECT_EQ(NextLine(consumer), "verified " + Bytes(kTensorBytes));
}

}  // namespace
}  // namespace hurray::softcuda_testing
