// [[preload]] in the daemon assembled in this process: the tensors of a preloaded file are
// served byte for byte, health says NOT_SERVING until the preload is in, a broken required
// file stops the daemon naming the tensor and the field, a broken optional one is skipped,
// and an import that is stopped publishes nothing and leaves nothing allocated.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "daemon.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "hurray/client.h"
#include "pool/cpu_pool.h"
#include "preload/preloader.h"
#include "testing/safetensors_writer.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

using grpc::health::v1::HealthCheckResponse;
using ::hurray::testing::PatternBytes;
using ::hurray::testing::SafetensorsTensorSpec;
using namespace std::chrono_literals;

class PreloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "preload_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    tensors_ = {{.name = "embed.weight", .dtype = "F32", .shape = {4, 8}, .bytes = {}},
                {.name = "layers.0.bias", .dtype = "BF16", .shape = {16}, .bytes = {}},
                {.name = "layers.0.mask", .dtype = "BOOL", .shape = {3}, .bytes = {}},
                {.name = "head.weight", .dtype = "I64", .shape = {2, 5}, .bytes = {}}};
    const std::size_t sizes[] = {4 * 8 * 4, 16 * 2, 3, 2 * 5 * 8};
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      tensors_[i].bytes = PatternBytes(sizes[i], static_cast<std::uint32_t>(i + 1));
    }
    ASSERT_OK(testing::WriteSafetensors(ModelPath(), tensors_));
  }
  // A stopped daemon keeps the segments of the tensors its journal holds: remove them too.
  void TearDown() override {
    std::filesystem::remove_all(directory_);
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
      if (entry.path().filename().string().starts_with(ShmPrefix() + "-")) {
        std::filesystem::remove(entry.path());
      }
    }
  }

  [[nodiscard]] static std::string ShmPrefix() {
    return "hurray-preload-test-" + std::to_string(::getpid());
  }

  [[nodiscard]] std::string ModelPath() const { return directory_ + "/model.safetensors"; }

  [[nodiscard]] Config SmallConfig(std::vector<Config::Preload> preload) const {
    Config config = DefaultConfig();
    config.socket_path = directory_ + "/d.sock";
    config.log_level = "off";
    config.cpu_pool.capacity_bytes = std::uint64_t{64} << 20;
    config.cpu_pool.shm_prefix = ShmPrefix();
    config.state_directory = directory_ + "/state";
    config.io_threads = 1;
    config.shutdown_grace_ms = 0;
    config.preload = std::move(preload);
    return config;
  }

  // The health status of `service`, or UNKNOWN when the call fails.
  [[nodiscard]] HealthCheckResponse::ServingStatus Health(const Config& config,
                                                          const std::string& service) const {
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel("unix:" + config.socket_path, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    if (!stub->Check(&context, request, &response).ok()) return HealthCheckResponse::UNKNOWN;
    return response.status();
  }

  // Polls until health "" is SERVING (at most 60 s).
  [[nodiscard]] bool EventuallyServing(const Config& config) const {
    for (int i = 0; i < 600; ++i) {
      if (Health(config, "") == HealthCheckResponse::SERVING) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  [[nodiscard]] static std::unique_ptr<Client> Connect(const Config& config) {
    auto client = Client::Connect(Client::Options{.socket_path = config.socket_path});
    EXPECT_OK(client);
    return client ? std::move(*client) : nullptr;
  }

  std::string directory_;
  std::vector<SafetensorsTensorSpec> tensors_;
};

TEST_F(PreloadTest, PreloadedTensorsAreServedByteForByte) {
  const Config config = SmallConfig({{.path = ModelPath(), .prefix = "llama/"}});
  ASSERT_OK_AND_ASSIGN(auto daemon, Daemon::Start(config));
  ASSERT_TRUE(EventuallyServing(config));
  EXPECT_EQ(Health(config, "hurray.v1.Exchange"), HealthCheckResponse::SERVING);
  auto client = Connect(config);
  ASSERT_NE(client, nullptr);
  ASSERT_OK_AND_ASSIGN(auto views, client->BatchAcquire({}, "llama/"));
  ASSERT_EQ(views.size(), tensors_.size());
  std::map<std::string, std::vector<std::byte>> served;
  for (const TensorView& view : views) {
    const auto bytes = view.buffer(0);
    served[view.name()] = std::vector<std::byte>(bytes.begin(), bytes.end());
  }
  for (const SafetensorsTensorSpec& tensor : tensors_) {
    EXPECT_EQ(served["llama/" + tensor.name], tensor.bytes) << tensor.name;
  }
  EXPECT_OK(views.Release());
  client.reset();
  daemon->Stop();
  EXPECT_OK(daemon->Wait());
}

TEST_F(PreloadTest, HealthIsNotServingUntilThePreloadIsIn) {
  // A FIFO: the preload waits in open() until this test opens the other end.
  const std::string fifo = directory_ + "/slow.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Config config = SmallConfig({{.path = fifo, .prefix = "slow/", .required = false}});
  ASSERT_OK_AND_ASSIGN(auto daemon, Daemon::Start(config));
  EXPECT_EQ(Health(config, ""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Health(config, "hurray.v1.Exchange"), HealthCheckResponse::NOT_SERVING);
  // An empty file: the entry fails, is skipped (required = false), and the daemon serves.
  const int writer = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(writer, 0);
  ::close(writer);
  ASSERT_TRUE(EventuallyServing(config));
  EXPECT_EQ(Health(config, "hurray.v1.Exchange"), HealthCheckResponse::SERVING);
  daemon->Stop();
  EXPECT_OK(daemon->Wait());
}

TEST_F(PreloadTest, ABrokenRequiredFileStopsTheDaemonNamingTensorAndField) {
  const std::string broken = directory_ + "/broken.safetensors";
  ASSERT_OK(testing::WriteFileBytes(
      broken,
      testing::RawSafetensorsBytes(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})",
                                   std::string(12, '\0'))));
  const Config config =
      SmallConfig({{.path = ModelPath(), .prefix = "ok/"}, {.path = broken, .prefix = "broken/"}});
  ASSERT_OK_AND_ASSIGN(auto daemon, Daemon::Start(config));
  // The daemon stops itself: Wait returns without a Stop.
  EXPECT_ERROR(daemon->Wait(), StatusCode::kInvalidArgument, {"preload[1]", broken, "\"w\""});
}

TEST_F(PreloadTest, ABrokenOptionalFileIsSkippedAndTheRestServed) {
  const std::string missing = directory_ + "/missing.safetensors";
  const Config config = SmallConfig({{.path = missing, .prefix = "gone/", .required = false},
                                     {.path = ModelPath(), .prefix = "m/"}});
  ASSERT_OK_AND_ASSIGN(auto daemon, Daemon::Start(config));
  ASSERT_TRUE(EventuallyServing(config));
  auto client = Connect(config);
  ASSERT_NE(client, nullptr);
  ASSERT_OK_AND_ASSIGN(auto stats, client->Stats());
  EXPECT_EQ(stats.tensor_count, tensors_.size());
  EXPECT_EQ(stats.pending_allocation_count, 0u);
  client.reset();
  daemon->Stop();
  EXPECT_OK(daemon->Wait());
}

// Writes a file whose dtype is nested 200,000 arrays deep (once a crash: the error message
// dumped the value, recursing as deep) and returns its path.
std::string WriteDeeplyNestedFile(const std::string& directory) {
  const std::string path = directory + "/deep.safetensors";
  EXPECT_OK(testing::WriteFileBytes(
      path, testing::RawSafetensorsBytes(R"({"w":{"dtype":)" + std::string(200'000, '[') + "1" +
                                             std::string(200'000, ']') +
                                             R"(,"shape":[4],"data_offsets":[0,4]}})",
                                         std::string(4, '\0'))));
  return path;
}

TEST_F(PreloadTest, AnOptionalFileNestedTooDeepIsSkippedAndTheRestServed) {
  const std::string deep = WriteDeeplyNestedFile(directory_);
  const Config config = SmallConfig({{.path = deep, .prefix = "deep/", .required = false},
                                     {.path = ModelPath(), .prefix = "m/"}});
  ASSERT_OK_AND_ASSIGN(auto daemon, Daemon::Start(config));
  ASSERT_TRUE(EventuallyServing(config));
  auto client = Connect(config);
  ASSERT_NE(client, nullptr);
  ASSERT_OK_AND_ASSIGN(auto views, client->BatchAcquire({}, "m/"));
  EXPECT_EQ(views.size(), tensors_.size());
  EXPECT_OK(views.Release());
  ASSERT_OK_AND_ASSIGN(auto stats, client->Stats());
  EXPECT_EQ(stats.tensor_count, tensors_.size());
  EXPECT_EQ(stats.pending_allocation_count, 0u);
  client.reset();
  daemon->Stop();
  EXPECT_OK(daemon->Wait());
}

// The registry and pool alone, for PreloadFile.
class PreloadFileTest : public PreloadTest {
 protected:
  void SetUp() override {
    PreloadTest::SetUp();
    auto pool = CpuPool::Create(
        CpuPool::Options{.name = "cpu",
                         .capacity_bytes = std::uint64_t{16} << 20,
                         .shm_prefix = "hurray-preload-file-test-" + std::to_string(::getpid())});
    ASSERT_OK(pool);
    pools_.Add(std::move(*pool));
    registry_ = std::make_unique<Registry>(pools_, io_, Registry::Options{});
  }

  // Nothing published, pending or used.
  void ExpectNothingLeft() const {
    const v1::StatsResponse stats = registry_->Stats();
    EXPECT_EQ(stats.tensor_count(), 0u);
    EXPECT_EQ(stats.pending_allocation_count(), 0u);
    EXPECT_EQ(pools_.Find("cpu")->Usage().used_bytes, 0u);
  }

  PoolSet pools_;
  boost::asio::io_context io_;
  std::unique_ptr<Registry> registry_;
};

TEST_F(PreloadFileTest, PublishesEveryTensorUnderThePrefix) {
  ASSERT_OK_AND_ASSIGN(const PreloadSummary summary,
                       PreloadFile(*registry_, pools_, {.path = ModelPath(), .prefix = "p/"}));
  EXPECT_EQ(summary.tensors, tensors_.size());
  EXPECT_EQ(registry_->Stats().tensor_count(), tensors_.size());
  EXPECT_EQ(registry_->Stats().pending_allocation_count(), 0u);
}

TEST_F(PreloadFileTest, AStopBeforeTheReadPublishesNothing) {
  std::stop_source stop;
  stop.request_stop();
  EXPECT_ERROR(
      PreloadFile(*registry_, pools_, {.path = ModelPath(), .prefix = "p/"}, stop.get_token()),
      StatusCode::kCancelled, {ModelPath()});
  ExpectNothingLeft();
}

TEST_F(PreloadFileTest, ABadPrefixedNameIsRefusedBeforeAnythingIsAllocated) {
  EXPECT_ERROR(PreloadFile(*registry_, pools_, {.path = ModelPath(), .prefix = ""}),
               StatusCode::kInvalidArgument, {"tensor \"embed.weight\"", "no namespace"});
  ExpectNothingLeft();
}

TEST_F(PreloadFileTest, AnUnknownPoolIsNotFound) {
  EXPECT_ERROR(
      PreloadFile(*registry_, pools_, {.path = ModelPath(), .prefix = "p/", .pool = "gpu"}),
      StatusCode::kNotFound, {"pool gpu"});
  ExpectNothingLeft();
}

TEST_F(PreloadFileTest, ATruncatedFileIsDataLossAndLeavesNothing) {
  std::string bytes = testing::SafetensorsBytes(tensors_);
  bytes.resize(bytes.size() - 1);
  const std::string truncated = directory_ + "/truncated.safetensors";
  ASSERT_OK(testing::WriteFileBytes(truncated, bytes));
  const auto result = PreloadFile(*registry_, pools_, {.path = truncated, .prefix = "p/"});
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message().find(truncated), std::string::npos)
      << result.error().ToString();
  ExpectNothingLeft();
}

TEST_F(PreloadFileTest, ADeeplyNestedFileIsRefusedNamingTheFileAndTheLimit) {
  const std::string deep = WriteDeeplyNestedFile(directory_);
  EXPECT_ERROR(PreloadFile(*registry_, pools_, {.path = deep, .prefix = "p/"}),
               StatusCode::kInvalidArgument,
               {deep, "JSON nested deeper than the maximum 64 levels"});
  ExpectNothingLeft();
}

}  // namespace
}  // namespace hurray::daemon
