// softcuda (the software CUDA driver in this directory), loaded as product code loads the
// real one: hurray::cuda::LoadDriver dlopens libcuda.so.1 from LD_LIBRARY_PATH, which ctest
// points at softcuda's directory. Behaviour that depends on the environment, faults and
// other processes runs in a child: this binary re-executed with "--softcuda-child <role>".
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "hurray/cuda/driver.h"

extern char** environ;

namespace {

using hurray::cuda::DriverApi;

constexpr std::size_t kGranularity = std::size_t{2} << 20;
constexpr int kPassedFd = 100;  // Where a child finds the descriptor its parent passes.

struct ChildResult {
  int status = 0;
  std::string stderr_text;
};

// Runs this binary as `role` with `arguments`, `environment` (NAME=value, ahead of ours) and
// `fd` (if not -1) at kPassedFd; returns its wait status and what it wrote to stderr.
ChildResult RunChild(const std::string& role, const std::vector<std::string>& arguments,
                     const std::vector<std::string>& environment, int fd = -1) {
  std::vector<std::string> argv_text{"/proc/self/exe", "--softcuda-child", role};
  argv_text.insert(argv_text.end(), arguments.begin(), arguments.end());
  // Faults are what some children show: the sanitizers must let them through as signals.
  std::vector<std::string> env_text{"ASAN_OPTIONS=handle_segv=0", "UBSAN_OPTIONS=handle_segv=0"};
  env_text.insert(env_text.end(), environment.begin(), environment.end());
  for (char** entry = environ; *entry != nullptr; ++entry) env_text.emplace_back(*entry);
  std::vector<char*> argv;
  argv.reserve(argv_text.size() + 1);
  for (std::string& text : argv_text) argv.push_back(text.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env_text.size() + 1);
  for (std::string& text : env_text) envp.push_back(text.data());
  envp.push_back(nullptr);
  std::array<int, 2> pipe_fds{};
  if (pipe2(pipe_fds.data(), O_CLOEXEC) != 0) return {.status = -1};
  const pid_t pid = fork();
  if (pid == 0) {
    (void)dup2(pipe_fds[1], STDERR_FILENO);
    if (fd >= 0) (void)dup2(fd, kPassedFd);  // dup2 clears close-on-exec.
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  (void)close(pipe_fds[1]);
  ChildResult result;
  std::array<char, 4096> buffer{};
  ssize_t got = 0;
  while ((got = read(pipe_fds[0], buffer.data(), buffer.size())) > 0) {
    result.stderr_text.append(buffer.data(), static_cast<std::size_t>(got));
  }
  (void)close(pipe_fds[0]);
  (void)waitpid(pid, &result.status, 0);
  return result;
}

int CountLines(const std::string& text, const std::string& prefix) {
  int count = 0;
  std::size_t at = 0;
  while ((at = text.find(prefix, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') ++count;
    at += prefix.size();
  }
  return count;
}

CUmemAllocationProp ExportableProperties(CUdevice device) {
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = device;
  properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return properties;
}

// An entry point of the loaded libcuda.so.1, by its exported name.
void* Symbol(const char* name) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return library == nullptr ? nullptr : dlsym(library, name);
}

// cuMemsetD8, which product code does not call (so DriverApi lacks it).
CUresult MemsetD8(CUdeviceptr address, unsigned char value, std::size_t count) {
  static auto* const memset_d8 =
      reinterpret_cast<decltype(&cuMemsetD8_v2)>(Symbol("cuMemsetD8_v2"));
  return memset_d8 == nullptr ? CUDA_ERROR_NOT_FOUND : memset_d8(address, value, count);
}

// cuMemGetAccess, which product code does not call: resolved as a caller of the real driver
// would, through cuGetProcAddress at the version that introduced it (CUDA 10.2).
CUresult MemGetAccess(unsigned long long* flags,  // NOLINT(google-runtime-int): cuda.h's type.
                      const CUmemLocation* location, CUdeviceptr address) {
  static auto* const get_access = [] {
    using GetProcAddress =
        CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    auto get = reinterpret_cast<GetProcAddress>(Symbol("cuGetProcAddress_v2"));
    void* function = nullptr;
    if (get == nullptr || get("cuMemGetAccess", &function, 10020, 0, nullptr) != CUDA_SUCCESS) {
      return static_cast<decltype(&cuMemGetAccess)>(nullptr);
    }
    return reinterpret_cast<decltype(&cuMemGetAccess)>(function);
  }();
  return get_access == nullptr ? CUDA_ERROR_NOT_FOUND : get_access(flags, location, address);
}

const DriverApi& Driver() {
  static const DriverApi* const api = [] {
    auto loaded = hurray::cuda::LoadDriver();
    if (!loaded) {
      std::fprintf(stderr, "LoadDriver: %s\n", loaded.error().ToString().c_str());
      std::abort();
    }
    return *loaded;
  }();
  return *api;
}

// The fixture: the driver loaded, device 0's primary context retained and current.
class SoftcudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(api_.DeviceGet(&device_, 0), CUDA_SUCCESS);
    ASSERT_EQ(api_.DevicePrimaryCtxRetain(&context_, device_), CUDA_SUCCESS);
    ASSERT_EQ(api_.CtxSetCurrent(context_), CUDA_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(api_.CtxSetCurrent(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(api_.DevicePrimaryCtxRelease(device_), CUDA_SUCCESS);
  }

  const DriverApi& api_ = Driver();
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

// A page-aligned 64-bit word registered for the device; unregistered at the end.
class RegisteredWord {
 public:
  explicit RegisteredWord(const DriverApi& api) : api_(api) {
    page_ = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    registered_ = api_.MemHostRegister(page_, 4096,
                                       CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
    if (registered_ == CUDA_SUCCESS) (void)api_.MemHostGetDevicePointer(&device_, page_, 0);
  }
  RegisteredWord(const RegisteredWord&) = delete;
  RegisteredWord& operator=(const RegisteredWord&) = delete;
  ~RegisteredWord() {
    (void)api_.MemHostUnregister(page_);
    (void)munmap(page_, 4096);
  }
  [[nodiscard]] CUresult registered() const { return registered_; }
  [[nodiscard]] CUdeviceptr device() const { return device_; }
  void Store(std::uint64_t value) {
    __atomic_store_n(static_cast<std::uint64_t*>(page_), value, __ATOMIC_RELEASE);
  }
  [[nodiscard]] std::uint64_t Load() const {
    return __atomic_load_n(static_cast<const std::uint64_t*>(page_), __ATOMIC_ACQUIRE);
  }

 private:
  const DriverApi& api_;
  void* page_ = nullptr;
  CUresult registered_ = CUDA_ERROR_UNKNOWN;
  CUdeviceptr device_ = 0;
};

TEST(SoftcudaLoad, EveryEntryPointResolvesThroughTheProductLoader) {
  auto loaded = hurray::cuda::LoadDriver();
  ASSERT_TRUE(loaded.has_value()) << loaded.error().ToString();
  const DriverApi& api = **loaded;
  EXPECT_EQ(api.driver_version, 13000);
  // DriverApi holds only function pointers after driver_version: none may be null.
  const auto* words = reinterpret_cast<void* const*>(&api.GetErrorName);
  const std::size_t count = (sizeof(DriverApi) - offsetof(DriverApi, GetErrorName)) / sizeof(void*);
  for (std::size_t i = 0; i < count; ++i) EXPECT_NE(words[i], nullptr) << "entry " << i;
  // cuDeviceGetUuid: the MIG-aware _v2 at 12.0, the old call at 11.0.
  EXPECT_NE(reinterpret_cast<void*>(api.DeviceGetUuid),
            reinterpret_cast<void*>(api.DeviceGetPhysicalUuid));
  EXPECT_EQ(reinterpret_cast<void*>(api.DeviceGetUuid), Symbol("cuDeviceGetUuid_v2"));
}

TEST(SoftcudaLoad, GetProcAddressKnowsBaseNamesAndVersionsOnly) {
  (void)Driver();
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(library, nullptr);
  using GetProcAddress =
      CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  ASSERT_NE(get, nullptr);
  void* function = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_EQ(get("cuNoSuchCall", &function, 12000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(get("cuMemAlloc_v2", &function, 12000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(get("cuMemCreate", &function, 10000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  ASSERT_EQ(get("cuDeviceGetUuid", &function, 11040, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(function, dlsym(library, "cuDeviceGetUuid_v2"));
  ASSERT_EQ(get("cuDeviceGetUuid", &function, 11030, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(function, dlsym(library, "cuDeviceGetUuid"));
}

TEST_F(SoftcudaTest, DeviceHasNameUuidMemoryAndAttributes) {
  int count = 0;
  ASSERT_EQ(api_.DeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 1);
  std::array<char, 64> name{};
  ASSERT_EQ(api_.DeviceGetName(name.data(), static_cast<int>(name.size()), device_), CUDA_SUCCESS);
  EXPECT_STREQ(name.data(), "hurray software CUDA device 0");
  CUuuid uuid{};
  CUuuid physical{};
  ASSERT_EQ(api_.DeviceGetUuid(&uuid, device_), CUDA_SUCCESS);
  ASSERT_EQ(api_.DeviceGetPhysicalUuid(&physical, device_), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(uuid.bytes, physical.bytes, sizeof uuid.bytes), 0);
  std::size_t total = 0;
  ASSERT_EQ(api_.DeviceTotalMem(&total, device_), CUDA_SUCCESS);
  EXPECT_EQ(total, std::size_t{1} << 30);
  int value = -1;
  ASSERT_EQ(api_.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                    device_),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 1);
  ASSERT_EQ(api_.DeviceGetAttribute(
                &value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device_),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 1);
  CUdevice missing = 0;
  EXPECT_EQ(api_.DeviceGet(&missing, 1), CUDA_ERROR_INVALID_DEVICE);
}

TEST(SoftcudaDevices, EnvironmentChoosesDevicesAndAttributes) {
  const ChildResult child =
      RunChild("devices", {},
               {"HURRAY_SOFTCUDA_DEVICES=3", "CUDA_VISIBLE_DEVICES=2,GPU-50f7cada,7,1",
                "HURRAY_SOFTCUDA_ATTR_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED=0"});
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  // "GPU-50f7cada" prefixes every UUID: ambiguous, it ends the list (as the real driver).
  EXPECT_NE(child.stderr_text.find("count=1 name=hurray software CUDA device 2 posix_fd=0"),
            std::string::npos)
      << child.stderr_text;
}

TEST_F(SoftcudaTest, ExportedMemoryIsReadOnlyInAnotherProcess) {
  const CUmemAllocationProp properties = ExportableProperties(device_);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(api_.MemCreate(&handle, kGranularity, &properties, 0), CUDA_SUCCESS);
  CUdeviceptr address = 0;
  ASSERT_EQ(api_.MemAddressReserve(&address, kGranularity, kGranularity, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(api_.MemMap(address, kGranularity, 0, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location = properties.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(api_.MemSetAccess(address, kGranularity, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(MemsetD8(address, 0xab, kGranularity), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(
      api_.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      CUDA_SUCCESS);
  const ChildResult child = RunChild("import", {std::to_string(kGranularity), "171"}, {}, fd);
  (void)close(fd);
  // The child read 0xab everywhere, said so, then died writing.
  EXPECT_NE(child.stderr_text.find("read ok"), std::string::npos) << child.stderr_text;
  ASSERT_TRUE(WIFSIGNALED(child.status)) << child.stderr_text;
  EXPECT_EQ(WTERMSIG(child.status), SIGSEGV);
  EXPECT_EQ(api_.MemUnmap(address, kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(api_.MemAddressFree(address, kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(api_.MemRelease(handle), CUDA_SUCCESS);
}

TEST_F(SoftcudaTest, SizeOffTheGranularityIsRefused) {
  const CUmemAllocationProp properties = ExportableProperties(device_);
  std::size_t granularity = 0;
  ASSERT_EQ(
      api_.MemGetAllocationGranularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      CUDA_SUCCESS);
  EXPECT_EQ(granularity, kGranularity);
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(api_.MemCreate(&handle, kGranularity / 2, &properties, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SoftcudaTest, GetAccessReportsWhatSetAccessSetForTheDevice) {
  const CUmemAllocationProp properties = ExportableProperties(device_);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(api_.MemCreate(&handle, kGranularity, &properties, 0), CUDA_SUCCESS);
  CUdeviceptr address = 0;
  ASSERT_EQ(api_.MemAddressReserve(&address, kGranularity, kGranularity, 0, 0), CUDA_SUCCESS);
  const CUmemLocation location = properties.location;
  unsigned long long flags = 99;  // NOLINT(google-runtime-int): cuMemGetAccess's type.
  // Reserved but not mapped: nothing to ask about.
  EXPECT_EQ(MemGetAccess(&flags, &location, address), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api_.MemMap(address, kGranularity, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(MemGetAccess(&flags, &location, address + 100), CUDA_SUCCESS);
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  CUmemAccessDesc access{.location = location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READ};
  ASSERT_EQ(api_.MemSetAccess(address, kGranularity, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(MemGetAccess(&flags, &location, address + kGranularity - 1), CUDA_SUCCESS);
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READ);
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(api_.MemSetAccess(address, kGranularity, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(MemGetAccess(&flags, &location, address), CUDA_SUCCESS);
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  // Misuse: past the mapping, null pointers, a location that is no visible device.
  EXPECT_EQ(MemGetAccess(&flags, &location, address + kGranularity), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MemGetAccess(nullptr, &location, address), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MemGetAccess(&flags, nullptr, address), CUDA_ERROR_INVALID_VALUE);
  const CUmemLocation missing{.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 64};
  EXPECT_EQ(MemGetAccess(&flags, &missing, address), CUDA_ERROR_INVALID_VALUE);
  const CUmemLocation host{.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  EXPECT_EQ(MemGetAccess(&flags, &host, address), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(api_.MemUnmap(address, kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(MemGetAccess(&flags, &location, address), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(api_.MemAddressFree(address, kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(api_.MemRelease(handle), CUDA_SUCCESS);
}

TEST_F(SoftcudaTest, WaitValueBlocksTheStreamNotTheHostWithTheCyclicCompare) {
  RegisteredWord word(api_);
  ASSERT_EQ(word.registered(), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(api_.StreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent event = nullptr;
  ASSERT_EQ(api_.EventCreate(&event, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ASSERT_EQ(api_.StreamWaitValue64(stream, word.device(), 5, CU_STREAM_WAIT_VALUE_GEQ),
            CUDA_SUCCESS);
  ASSERT_EQ(api_.EventRecord(event, stream), CUDA_SUCCESS);
  // The host got here: only the stream waits.
  EXPECT_EQ(api_.EventQuery(event), CUDA_ERROR_NOT_READY);
  // 2^64-1 is -1 to the cyclic compare: below 5, so it does not release the stream.
  word.Store(std::numeric_limits<std::uint64_t>::max());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(api_.EventQuery(event), CUDA_ERROR_NOT_READY);
  word.Store(5 + 2);
  ASSERT_EQ(api_.StreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(api_.EventQuery(event), CUDA_SUCCESS);
  // Across the wrap: 1 is 3 past 2^64-2.
  ASSERT_EQ(
      api_.StreamWaitValue64(stream, word.device(), std::numeric_limits<std::uint64_t>::max() - 1,
                             CU_STREAM_WAIT_VALUE_GEQ),
      CUDA_SUCCESS);
  ASSERT_EQ(api_.EventRecord(event, stream), CUDA_SUCCESS);
  word.Store(1);
  ASSERT_EQ(api_.StreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(api_.EventQuery(event), CUDA_SUCCESS);
  EXPECT_EQ(api_.EventDestroy(event), CUDA_SUCCESS);
  EXPECT_EQ(api_.StreamDestroy(stream), CUDA_SUCCESS);
}

TEST_F(SoftcudaTest, WriteValueHappensInStreamOrder) {
  RegisteredWord gate(api_);
  RegisteredWord flag(api_);
  ASSERT_EQ(gate.registered(), CUDA_SUCCESS);
  ASSERT_EQ(flag.registered(), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(api_.StreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(api_.StreamWaitValue64(stream, gate.device(), 1, CU_STREAM_WAIT_VALUE_EQ),
            CUDA_SUCCESS);
  ASSERT_EQ(api_.StreamWriteValue64(stream, flag.device(), 42, CU_STREAM_WRITE_VALUE_DEFAULT),
            CUDA_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(flag.Load(), 0U);
  gate.Store(1);
  ASSERT_EQ(api_.StreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(flag.Load(), 42U);
  EXPECT_EQ(api_.StreamDestroy(stream), CUDA_SUCCESS);
}

TEST_F(SoftcudaTest, HostRegistrationKeepsTheDocumentedRules) {
  RegisteredWord word(api_);
  ASSERT_EQ(word.registered(), CUDA_SUCCESS);
  // NOLINTNEXTLINE(performance-no-int-to-ptr): unified addresses.
  auto* host = reinterpret_cast<void*>(word.device());
  EXPECT_EQ(api_.MemHostRegister(host, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  // READ_ONLY_HOST_REGISTER_SUPPORTED is 0 by default, as on x86 hosts.
  void* other = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_EQ(api_.MemHostRegister(other, 4096, CU_MEMHOSTREGISTER_READ_ONLY),
            CUDA_ERROR_NOT_SUPPORTED);
  // Read-only memory without the flag is refused, as measured on real drivers.
  EXPECT_EQ(api_.MemHostRegister(other, 4096, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(api_.MemHostUnregister(other), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  (void)munmap(other, 4096);
}

TEST_F(SoftcudaTest, CopiesAndMemsetsReachDeviceMemory) {
  CUdeviceptr device_memory = 0;
  ASSERT_EQ(api_.MemAlloc(&device_memory, 1000), CUDA_SUCCESS);
  ASSERT_EQ(MemsetD8(device_memory, 7, 1000), CUDA_SUCCESS);
  std::vector<unsigned char> host(1000);
  ASSERT_EQ(api_.MemcpyDtoH(host.data(), device_memory, host.size()), CUDA_SUCCESS);
  EXPECT_EQ(host[0], 7);
  EXPECT_EQ(host[999], 7);
  std::size_t free_bytes = 0;
  std::size_t total = 0;
  auto get_info = reinterpret_cast<decltype(&cuMemGetInfo_v2)>(Symbol("cuMemGetInfo_v2"));
  ASSERT_NE(get_info, nullptr);
  ASSERT_EQ(get_info(&free_bytes, &total), CUDA_SUCCESS);
  EXPECT_LT(free_bytes, total);
  EXPECT_EQ(api_.MemFree(device_memory), CUDA_SUCCESS);
  EXPECT_EQ(api_.MemFree(device_memory), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SoftcudaTest, LegacyIpcOpensInAnotherProcessOnly) {
  CUdeviceptr device_memory = 0;
  ASSERT_EQ(api_.MemAlloc(&device_memory, 4096), CUDA_SUCCESS);
  ASSERT_EQ(MemsetD8(device_memory, 0x5a, 4096), CUDA_SUCCESS);
  CUipcMemHandle handle{};
  ASSERT_EQ(api_.IpcGetMemHandle(&handle, device_memory), CUDA_SUCCESS);
  CUdeviceptr opened = 0;
  EXPECT_EQ(api_.IpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);
  std::string hex;
  for (const char byte : handle.reserved) {
    std::array<char, 3> text{};
    (void)std::snprintf(text.data(), text.size(), "%02x", static_cast<unsigned char>(byte));
    hex += text.data();
  }
  const ChildResult child = RunChild("ipc", {hex}, {});
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  EXPECT_EQ(api_.MemFree(device_memory), CUDA_SUCCESS);
}

TEST(SoftcudaContexts, CallWithoutCurrentContextIsRefusedWithOneLine) {
  const ChildResult child = RunChild("no-context", {}, {});
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  EXPECT_EQ(CountLines(child.stderr_text, "softcuda: "), 1) << child.stderr_text;
  EXPECT_NE(child.stderr_text.find("softcuda: cuEventCreate: needs a current context"),
            std::string::npos)
      << child.stderr_text;
}

TEST(SoftcudaMemory, OutOfMemoryIsInjected) {
  const ChildResult child =
      RunChild("oom", {}, {"HURRAY_SOFTCUDA_OOM_AFTER_BYTES=" + std::to_string(2 * kGranularity)});
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  EXPECT_EQ(CountLines(child.stderr_text, "softcuda: cuMemCreate: injected"), 1)
      << child.stderr_text;
}

// --- The children. Each returns its exit status; it reports on stderr. ---

int Fail(const char* what, CUresult result) {
  std::fprintf(stderr, "child: %s returned %d\n", what, static_cast<int>(result));
  return 1;
}

int ChildDevices() {
  const DriverApi& api = Driver();
  int count = 0;
  int posix_fd = -1;
  std::array<char, 64> name{};
  if (CUresult r = api.DeviceGetCount(&count); r != CUDA_SUCCESS) return Fail("count", r);
  if (CUresult r = api.DeviceGetName(name.data(), 64, 0); r != CUDA_SUCCESS) return Fail("name", r);
  if (CUresult r = api.DeviceGetAttribute(
          &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0);
      r != CUDA_SUCCESS) {
    return Fail("attribute", r);
  }
  std::fprintf(stderr, "count=%d name=%s posix_fd=%d\n", count, name.data(), posix_fd);
  return 0;
}

int ChildImport(std::size_t size, int expected) {
  const DriverApi& api = Driver();
  CUmemGenericAllocationHandle handle = 0;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the API takes the descriptor in a pointer.
  void* shareable = reinterpret_cast<void*>(static_cast<std::intptr_t>(kPassedFd));
  if (CUresult r = api.MemImportFromShareableHandle(&handle, shareable,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      r != CUDA_SUCCESS) {
    return Fail("import", r);
  }
  CUdeviceptr address = 0;
  if (CUresult r = api.MemAddressReserve(&address, size, kGranularity, 0, 0); r != CUDA_SUCCESS) {
    return Fail("reserve", r);
  }
  if (CUresult r = api.MemMap(address, size, 0, handle, 0); r != CUDA_SUCCESS)
    return Fail("map", r);
  (void)api.MemRelease(handle);  // The mapping keeps the memory.
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  if (CUresult r = api.MemSetAccess(address, size, &access, 1); r != CUDA_SUCCESS) {
    return Fail("set access", r);
  }
  // NOLINTNEXTLINE(performance-no-int-to-ptr): unified addresses.
  auto* bytes = reinterpret_cast<volatile unsigned char*>(address);
  for (std::size_t i = 0; i < size; i += 4096) {
    if (bytes[i] != expected) return Fail("read", CUDA_ERROR_UNKNOWN);
  }
  std::fprintf(stderr, "read ok\n");
  bytes[0] = 1;  // Faults: the mapping is read-only.
  return 0;
}

int ChildIpc(const std::string& hex) {
  const DriverApi& api = Driver();
  CUcontext context = nullptr;
  if (CUresult r = api.DevicePrimaryCtxRetain(&context, 0); r != CUDA_SUCCESS)
    return Fail("retain", r);
  (void)api.CtxSetCurrent(context);
  CUipcMemHandle handle{};
  for (std::size_t i = 0; i < sizeof handle.reserved && 2 * i + 1 < hex.size(); ++i) {
    handle.reserved[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  CUdeviceptr address = 0;
  if (CUresult r = api.IpcOpenMemHandle(&address, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      r != CUDA_SUCCESS) {
    return Fail("open", r);
  }
  std::array<unsigned char, 16> host{};
  if (CUresult r = api.MemcpyDtoH(host.data(), address, host.size()); r != CUDA_SUCCESS) {
    return Fail("copy", r);
  }
  if (host[0] != 0x5a || host[15] != 0x5a) return Fail("contents", CUDA_ERROR_UNKNOWN);
  if (CUresult r = api.IpcCloseMemHandle(address); r != CUDA_SUCCESS) return Fail("close", r);
  return 0;
}

int ChildNoContext() {
  const DriverApi& api = Driver();
  CUevent event = nullptr;
  const CUresult result = api.EventCreate(&event, CU_EVENT_DISABLE_TIMING);
  return result == CUDA_ERROR_INVALID_CONTEXT ? 0 : Fail("cuEventCreate", result);
}

int ChildOom() {
  const DriverApi& api = Driver();
  const CUmemAllocationProp properties = ExportableProperties(0);
  std::array<CUmemGenericAllocationHandle, 3> handles{};
  for (std::size_t i = 0; i < 2; ++i) {
    if (CUresult r = api.MemCreate(&handles[i], kGranularity, &properties, 0); r != CUDA_SUCCESS) {
      return Fail("cuMemCreate within the budget", r);
    }
  }
  const CUresult over = api.MemCreate(&handles[2], kGranularity, &properties, 0);
  if (over != CUDA_ERROR_OUT_OF_MEMORY) return Fail("cuMemCreate over the budget", over);
  (void)api.MemRelease(handles[0]);
  if (CUresult r = api.MemCreate(&handles[2], kGranularity, &properties, 0); r != CUDA_SUCCESS) {
    return Fail("cuMemCreate after a release", r);
  }
  return 0;
}

int RunChildRole(int argc, char** argv) {
  const std::string role = argv[2];
  if (role == "devices") return ChildDevices();
  if (role == "import" && argc == 5) return ChildImport(std::stoul(argv[3]), std::stoi(argv[4]));
  if (role == "ipc" && argc == 4) return ChildIpc(argv[3]);
  if (role == "no-context") return ChildNoContext();
  if (role == "oom") return ChildOom();
  std::fprintf(stderr, "unknown child role %s\n", role.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--softcuda-child") return RunChildRole(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
