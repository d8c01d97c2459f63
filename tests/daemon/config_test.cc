#include "config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

TEST(ConfigTest, DefaultsNeedNoFile) {
  const Config config = DefaultConfig();
  EXPECT_FALSE(config.socket_path.empty());
  EXPECT_NE(config.socket_path.find("hurrayd.sock"), std::string::npos);
  EXPECT_GE(config.cpu_pool.capacity_bytes, std::uint64_t{64} << 20);
  EXPECT_EQ(config.cpu_pool.page_size, 4096u);
  EXPECT_EQ(config.log_level, "info");
}

TEST(ConfigTest, ByteSizesTakeBinaryUnits) {
  EXPECT_EQ(ParseByteSize("4096").value(), 4096u);
  EXPECT_EQ(ParseByteSize("4GiB").value(), std::uint64_t{4} << 30);
  EXPECT_EQ(ParseByteSize("512 MiB").value(), std::uint64_t{512} << 20);
  EXPECT_EQ(ParseByteSize("64M").value(), std::uint64_t{64} << 20);
  EXPECT_ERROR(ParseByteSize("12XB"), StatusCode::kInvalidArgument, {"unknown unit"});
  EXPECT_ERROR(ParseByteSize("GiB"), StatusCode::kInvalidArgument, {"not a size"});
  EXPECT_ERROR(ParseByteSize("-1"), StatusCode::kInvalidArgument);
  EXPECT_ERROR(ParseByteSize("17179869184TiB"), StatusCode::kInvalidArgument, {"overflows"});
}

TEST(ConfigTest, TomlOverridesDefaults) {
  auto config = ApplyToml(DefaultConfig(), R"(
      socket = "/tmp/x/d.sock"
      log_level = "debug"
      log_format = "json"
      session_quota = "1GiB"
      max_wait_ms = 5000
      [cpu_pool]
      capacity = "256MiB"
      segment_size = 67108864
      shm_prefix = "test"
  )",
                          "inline");
  ASSERT_OK(config);
  EXPECT_EQ(config->socket_path, "/tmp/x/d.sock");
  EXPECT_EQ(config->log_level, "debug");
  EXPECT_EQ(config->log_format, LogFormat::kJson);
  EXPECT_EQ(config->session_quota_bytes, std::uint64_t{1} << 30);
  EXPECT_EQ(config->max_wait_ms, 5000u);
  EXPECT_EQ(config->cpu_pool.capacity_bytes, std::uint64_t{256} << 20);
  EXPECT_EQ(config->cpu_pool.segment_bytes, std::uint64_t{64} << 20);
  EXPECT_EQ(config->cpu_pool.shm_prefix, "test");
}

TEST(ConfigTest, MistakesNameTheKey) {
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "sokcet = \"/x\"", "t"), StatusCode::kInvalidArgument,
               {"unknown setting sokcet"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cpu_pool]\ncapacity = true", "t"),
               StatusCode::kInvalidArgument, {"cpu_pool.capacity must be a size"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cpu_pool]\ncapacity = \"lots\"", "t"),
               StatusCode::kInvalidArgument, {"cpu_pool.capacity", "not a size"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "max_wait_ms = -4", "t"), StatusCode::kInvalidArgument,
               {"max_wait_ms"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "cpu_pool = 3", "t"), StatusCode::kInvalidArgument,
               {"cpu_pool must be a table"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "socket = ", "file.toml"), StatusCode::kInvalidArgument,
               {"file.toml:1:"});
  EXPECT_ERROR(ApplyTomlFile(DefaultConfig(), "/nonexistent/hurrayd.toml"), StatusCode::kNotFound,
               {"/nonexistent/hurrayd.toml"});
}

TEST(ConfigTest, PrintedConfigReadsBackTheSame) {
  Config config = DefaultConfig();
  config.socket_path = "/run/x.sock";
  config.cpu_pool.capacity_bytes = std::uint64_t{3} << 30;
  config.cpu_pool.huge_pages = HugePages::kAuto;
  auto again = ApplyToml(Config{}, ToToml(config), "printed");
  ASSERT_OK(again);
  EXPECT_EQ(again->socket_path, config.socket_path);
  EXPECT_EQ(again->cpu_pool.capacity_bytes, config.cpu_pool.capacity_bytes);
  EXPECT_EQ(again->cpu_pool.huge_pages, HugePages::kAuto);
  EXPECT_EQ(again->max_message_bytes, config.max_message_bytes);
  EXPECT_EQ(ToToml(*again), ToToml(config));  // Every setting.
  EXPECT_NE(ToToml(config).find("socket_mode = '0660'"), std::string::npos) << ToToml(config);
  EXPECT_NE(ToToml(config).find("huge_pages = 'auto'"), std::string::npos) << ToToml(config);
}

TEST(ConfigTest, NoPreloadUnlessEntriesAreGiven) {
  EXPECT_TRUE(DefaultConfig().preload.empty());
  EXPECT_EQ(ToToml(DefaultConfig()).find("preload"), std::string::npos);
}

TEST(ConfigTest, PreloadEntriesReadInOrderWithTheirDefaults) {
  auto config = ApplyToml(DefaultConfig(), R"(
[[preload]]
path = "/models/llama.safetensors.index.json"
prefix = "llama/"

[[preload]]
path = "/models/head.hrry"
pool = "cpu"
required = false
)",
                          "t");
  ASSERT_OK(config);
  ASSERT_EQ(config->preload.size(), 2u);
  EXPECT_EQ(config->preload[0].path, "/models/llama.safetensors.index.json");
  EXPECT_EQ(config->preload[0].prefix, "llama/");
  EXPECT_EQ(config->preload[0].pool, "cpu");
  EXPECT_TRUE(config->preload[0].required);
  EXPECT_EQ(config->preload[1].path, "/models/head.hrry");
  EXPECT_EQ(config->preload[1].prefix, "");
  EXPECT_FALSE(config->preload[1].required);
}

TEST(ConfigTest, PrintedPreloadEntriesReadBackTheSame) {
  Config config = DefaultConfig();
  config.preload = {{.path = "/m/a.safetensors", .prefix = "a/", .pool = "cpu", .required = true},
                    {.path = "/m/b.hrry", .prefix = "", .pool = "cpu", .required = false}};
  const std::string printed = ToToml(config);
  EXPECT_NE(printed.find("[[preload]]"), std::string::npos) << printed;
  auto again = ApplyToml(Config{}, printed, "printed");
  ASSERT_OK(again);
  ASSERT_EQ(again->preload.size(), 2u);
  EXPECT_EQ(again->preload[1].path, "/m/b.hrry");
  EXPECT_FALSE(again->preload[1].required);
  EXPECT_EQ(ToToml(*again), printed);
}

TEST(ConfigTest, PreloadMistakesNameTheEntryAndTheKey) {
  const std::pair<const char*, const char*> kMistakes[] = {
      {"[[preload]]\nprefix = \"a/\"", "preload[0].path is missing or empty"},
      {"[[preload]]\npath = \"\"", "preload[0].path is missing or empty"},
      {"[[preload]]\npath = \"f\"\n[[preload]]\npath = 1", "preload[1].path must be a string"},
      {"[[preload]]\npath = \"f\"\nprefix = \"nonamespace\"",
       "preload[0].prefix \"nonamespace\" is not the start of a tensor name"},
      {"[[preload]]\npath = \"f\"\nprefix = \"a//\"", "preload[0].prefix \"a//\" is not"},
      {"[[preload]]\npath = \"f\"\nprefix = \"a b/\"", "outside [A-Za-z0-9._-/]"},
      {"[[preload]]\npath = \"f\"\npool = \"\"", "preload[0].pool is empty"},
      {"[[preload]]\npath = \"f\"\nrequired = \"yes\"",
       "preload[0].required must be true or false"},
      {"[[preload]]\npath = \"f\"\nmandatory = true", "unknown setting preload[0].mandatory"},
      {"preload = \"f\"", "preload must be an array of tables"},
      {"preload = [1]", "preload[0] must be a table"},
  };
  for (const auto& [toml, words] : kMistakes) {
    EXPECT_ERROR(ApplyToml(DefaultConfig(), toml, "t"), StatusCode::kInvalidArgument, {words})
        << toml;
  }
}

TEST(ConfigTest, PreloadPrefixesAreStartsOfTensorNames) {
  for (const char* prefix : {"", "llama/", "llama/layers.", "org/llama/v1-"}) {
    EXPECT_TRUE(ValidatePreloadPrefix(prefix, "prefix").has_value()) << prefix;
  }
  for (const char* prefix : {"llama", "/llama/", "llama//", "./", "a/../"}) {
    EXPECT_ERROR(ValidatePreloadPrefix(prefix, "prefix"), StatusCode::kInvalidArgument,
                 {"prefix", prefix})
        << prefix;
  }
}

TEST(ConfigTest, HugePagesAreOffUnlessAModeIsNamed) {
  EXPECT_EQ(DefaultConfig().cpu_pool.huge_pages, HugePages::kOff);
  const std::pair<std::string, HugePages> kModes[] = {{"off", HugePages::kOff},
                                                      {"transparent", HugePages::kTransparent},
                                                      {"explicit", HugePages::kExplicit},
                                                      {"auto", HugePages::kAuto}};
  for (const auto& [text, mode] : kModes) {
    Config base = DefaultConfig();
    base.cpu_pool.huge_pages = mode == HugePages::kOff ? HugePages::kAuto : HugePages::kOff;
    auto config = ApplyToml(base, "[cpu_pool]\nhuge_pages = \"" + text + "\"", "t");
    ASSERT_OK(config);
    EXPECT_EQ(config->cpu_pool.huge_pages, mode) << text;
  }
}

TEST(ConfigTest, HugePagesMistakesNameTheKeyAndTheValue) {
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cpu_pool]\nhuge_pages = \"on\"", "t"),
               StatusCode::kInvalidArgument,
               {"cpu_pool.huge_pages: \"on\" is not off, transparent, explicit or auto"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cpu_pool]\nhuge_pages = \"Transparent\"", "t"),
               StatusCode::kInvalidArgument, {"cpu_pool.huge_pages: \"Transparent\""});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cpu_pool]\nhuge_pages = true", "t"),
               StatusCode::kInvalidArgument, {"cpu_pool.huge_pages must be a string"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "huge_pages = \"auto\"", "t"),
               StatusCode::kInvalidArgument, {"unknown setting huge_pages"});
}

TEST(ConfigTest, CudaPoolsDefaultToHalfOfEachDeviceInSlabsOf2GiB) {
  const Config config = DefaultConfig();
  EXPECT_TRUE(config.cuda_pool.enabled);
  EXPECT_EQ(config.cuda_pool.capacity_bytes, 0u);  // Half of each device's memory.
  EXPECT_EQ(config.cuda_pool.slab_bytes, std::uint64_t{2} << 30);
  EXPECT_EQ(config.cuda_pool.idle_slab_release_ms, 60'000u);
}

TEST(ConfigTest, TomlSetsTheCudaPools) {
  auto config = ApplyToml(DefaultConfig(), R"(
      [cuda_pool]
      enabled = false
      capacity = "40GiB"
      slab_size = "512MiB"
      idle_slab_release_ms = 5000
  )",
                          "t");
  ASSERT_OK(config);
  EXPECT_FALSE(config->cuda_pool.enabled);
  EXPECT_EQ(config->cuda_pool.capacity_bytes, std::uint64_t{40} << 30);
  EXPECT_EQ(config->cuda_pool.slab_bytes, std::uint64_t{512} << 20);
  EXPECT_EQ(config->cuda_pool.idle_slab_release_ms, 5000u);
  auto again = ApplyToml(Config{}, ToToml(*config), "printed");
  ASSERT_OK(again);
  EXPECT_EQ(ToToml(*again), ToToml(*config));
}

TEST(ConfigTest, CudaPoolMistakesNameTheKey) {
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cuda_pool]\nenabled = \"yes\"", "t"),
               StatusCode::kInvalidArgument, {"cuda_pool.enabled must be true or false"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cuda_pool]\nslab_size = 0", "t"),
               StatusCode::kInvalidArgument, {"cuda_pool.slab_size must be above 0"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cuda_pool]\ncapacity = -1", "t"),
               StatusCode::kInvalidArgument, {"cuda_pool.capacity", "negative"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cuda_pool]\nidle_slab_release_ms = -5", "t"),
               StatusCode::kInvalidArgument, {"cuda_pool.idle_slab_release_ms"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[cuda_pool]\nslabs = 3", "t"),
               StatusCode::kInvalidArgument, {"unknown setting cuda_pool.slabs"});
}

TEST(ConfigTest, SealedPoolIsOffByDefaultAndTomlSetsItsCapacity) {
  EXPECT_EQ(DefaultConfig().sealed_pool.capacity_bytes, 0u);
  auto config = ApplyToml(DefaultConfig(), "[sealed_pool]\ncapacity = \"256MiB\"", "t");
  ASSERT_OK(config);
  EXPECT_EQ(config->sealed_pool.capacity_bytes, std::uint64_t{256} << 20);
  auto again = ApplyToml(Config{}, ToToml(*config), "printed");
  ASSERT_OK(again);
  EXPECT_EQ(again->sealed_pool.capacity_bytes, std::uint64_t{256} << 20);
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[sealed_pool]\ncapacity = -1", "t"),
               StatusCode::kInvalidArgument, {"sealed_pool.capacity", "negative"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[sealed_pool]\nsize = 3", "t"),
               StatusCode::kInvalidArgument, {"unknown setting sealed_pool.size"});
}

TEST(ConfigTest, ShippedExampleConfigParses) {
  std::ifstream file(HURRAY_SOURCE_DIR "/deploy/hurrayd.toml");
  ASSERT_TRUE(file) << "deploy/hurrayd.toml";
  auto config = ApplyTomlFile(DefaultConfig(), HURRAY_SOURCE_DIR "/deploy/hurrayd.toml");
  ASSERT_OK(config);
  EXPECT_EQ(config->cpu_pool.shm_prefix, "hurray");
  // The values the file shows are the embedded defaults.
  EXPECT_EQ(ToToml(*config), ToToml(DefaultConfig()));
}

TEST(ConfigTest, FastPathTableSetsItsFiveSettingsWithinTheirBounds) {
  const Config defaults = DefaultConfig();
  EXPECT_TRUE(defaults.fast_path.enabled);
  EXPECT_EQ(defaults.fast_path.directory_entries, 65536u);
  EXPECT_EQ(defaults.fast_path.lease_slots, 64u);
  EXPECT_EQ(defaults.fast_path.rescan_interval_ms, 1u);
  EXPECT_EQ(defaults.fast_path.max_entries_per_uid, 32768u);
  auto config = ApplyToml(DefaultConfig(), R"(
      [fast_path]
      enabled = false
      directory_entries = 16
      lease_slots = 512
      rescan_interval_ms = 5
      max_entries_per_uid = 8
  )",
                          "t");
  ASSERT_OK(config);
  EXPECT_FALSE(config->fast_path.enabled);
  EXPECT_EQ(config->fast_path.directory_entries, 16u);
  EXPECT_EQ(config->fast_path.lease_slots, 512u);
  EXPECT_EQ(config->fast_path.rescan_interval_ms, 5u);
  EXPECT_EQ(config->fast_path.max_entries_per_uid, 8u);
  EXPECT_NE(ToToml(*config).find("lease_slots = 512"), std::string::npos) << ToToml(*config);
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[fast_path]\nlease_slots = 513", "t"),
               StatusCode::kInvalidArgument, {"fast_path.lease_slots"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[fast_path]\ndirectory_entries = 0", "t"),
               StatusCode::kInvalidArgument, {"fast_path.directory_entries"});
}

TEST(ConfigTest, DaemonLimitsDefaultToTheirFormerFixedValues) {
  const Config config = DefaultConfig();
  EXPECT_EQ(config.io_threads, 2u);
  EXPECT_EQ(config.shutdown_grace_ms, 2000u);
  EXPECT_EQ(config.socket_mode, 0660u);
  EXPECT_EQ(config.session_socket_mode, 0660u);
  EXPECT_EQ(config.socket_directory_mode, 0755u);
  EXPECT_EQ(config.watch_queue_length, 65536u);
  EXPECT_EQ(config.max_batch_names, 100000u);
}

TEST(ConfigTest, TomlSetsTheDaemonLimits) {
  auto config = ApplyToml(DefaultConfig(), R"(
      io_threads = 8
      shutdown_grace_ms = 0
      socket_mode = "0600"
      session_socket_mode = 0o666
      socket_directory_mode = "750"
      watch_queue_length = 16
      max_batch_names = 1
  )",
                          "inline");
  ASSERT_OK(config);
  EXPECT_EQ(config->io_threads, 8u);
  EXPECT_EQ(config->shutdown_grace_ms, 0u);
  EXPECT_EQ(config->socket_mode, 0600u);
  EXPECT_EQ(config->session_socket_mode, 0666u);
  EXPECT_EQ(config->socket_directory_mode, 0750u);
  EXPECT_EQ(config->watch_queue_length, 16u);
  EXPECT_EQ(config->max_batch_names, 1u);
}

TEST(ConfigTest, DaemonLimitsOutOfRangeNameTheKey) {
  const std::pair<std::string_view, std::string_view> kMistakes[] = {
      {"io_threads = 0", "io_threads must be an integer from 1 to 1024"},
      {"io_threads = 1025", "io_threads must be an integer from 1 to 1024"},
      {"io_threads = \"2\"", "io_threads must be an integer"},
      {"shutdown_grace_ms = -1", "shutdown_grace_ms must be an integer from 0"},
      {"watch_queue_length = 0", "watch_queue_length must be an integer from 1"},
      {"max_batch_names = 0", "max_batch_names must be an integer from 1"},
      {"socket_mode = 660", "socket_mode: 660 is not a mode from 0 to 0777"},
      {"socket_mode = \"0999\"", "socket_mode: \"0999\" is not an octal mode"},
      {"session_socket_mode = \"01777\"", "session_socket_mode: \"01777\" is above 0777"},
      {"socket_directory_mode = \"\"", "socket_directory_mode: \"\" is not an octal mode"},
      {"socket_directory_mode = true", "socket_directory_mode must be a mode"},
      {"log_level = \"loud\"", "log_level: \"loud\" is not a level"},
      {"log_format = \"xml\"", "log_format: \"xml\" is not a log format: text or json"},
      {"\"cpu_pool.capacity\" = 1", "unknown setting cpu_pool.capacity"},
  };
  for (const auto& [toml, words] : kMistakes) {
    EXPECT_ERROR(ApplyToml(DefaultConfig(), toml, "t"), StatusCode::kInvalidArgument, {words})
        << toml;
  }
}

TEST(ConfigTest, ConnectionCapsAndUidQuotasHaveDefaultsAndReadFromToml) {
  const Config defaults = DefaultConfig();
  EXPECT_EQ(defaults.max_sessions, 4096u);
  EXPECT_EQ(defaults.max_sessions_per_uid, 1024u);
  EXPECT_EQ(defaults.hello_timeout_ms, 5000u);
  EXPECT_EQ(defaults.uid_quota.pending_bytes, 0u);
  EXPECT_EQ(defaults.uid_quota.published_bytes, 0u);
  EXPECT_EQ(defaults.uid_quota.leases, 0u);
  auto config = ApplyToml(DefaultConfig(), R"(
      max_sessions = 100
      max_sessions_per_uid = 10
      hello_timeout_ms = 250
      [uid_quota]
      pending_bytes = "1GiB"
      published_bytes = "4GiB"
      leases = 500
  )",
                          "inline");
  ASSERT_OK(config);
  EXPECT_EQ(config->max_sessions, 100u);
  EXPECT_EQ(config->max_sessions_per_uid, 10u);
  EXPECT_EQ(config->hello_timeout_ms, 250u);
  EXPECT_EQ(config->uid_quota.pending_bytes, std::uint64_t{1} << 30);
  EXPECT_EQ(config->uid_quota.published_bytes, std::uint64_t{4} << 30);
  EXPECT_EQ(config->uid_quota.leases, 500u);
  auto again = ApplyToml(Config{}, ToToml(*config), "printed");
  ASSERT_OK(again);
  EXPECT_EQ(ToToml(*again), ToToml(*config));
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[uid_quota]\nleases = -1", "t"),
               StatusCode::kInvalidArgument, {"uid_quota.leases must be an integer from 0"});
}

TEST(ConfigTest, SocketGroupIsEmptyByDefaultAndReadFromToml) {
  EXPECT_EQ(DefaultConfig().socket_group, "");
  auto config = ApplyToml(DefaultConfig(), "socket_group = \"inference\"", "inline");
  ASSERT_OK(config);
  EXPECT_EQ(config->socket_group, "inference");
  EXPECT_NE(ToToml(*config).find("socket_group = 'inference'"), std::string::npos)
      << ToToml(*config);
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "socket_group = 7", "t"), StatusCode::kInvalidArgument,
               {"socket_group must be a string"});
}

TEST(ConfigTest, FileModesAreOctal) {
  EXPECT_EQ(ParseFileMode("0660").value(), 0660u);
  EXPECT_EQ(ParseFileMode("755").value(), 0755u);
  EXPECT_EQ(ParseFileMode("0").value(), 0u);
  EXPECT_EQ(ParseFileMode("0777").value(), 0777u);
  EXPECT_ERROR(ParseFileMode("1000"), StatusCode::kInvalidArgument, {"above 0777"});
  EXPECT_ERROR(ParseFileMode("0o660"), StatusCode::kInvalidArgument, {"not an octal mode"});
  EXPECT_ERROR(ParseFileMode("rw-"), StatusCode::kInvalidArgument, {"not an octal mode"});
  EXPECT_ERROR(ParseFileMode("-1"), StatusCode::kInvalidArgument, {"not an octal mode"});
}

TEST(ConfigTest, MetricsAreOffUnlessAnAddressIsGiven) {
  EXPECT_EQ(DefaultConfig().metrics_address, "");
  ASSERT_OK_AND_ASSIGN(Config config,
                       ApplyToml(DefaultConfig(), "metrics_address = \"127.0.0.1:9470\"", "t"));
  EXPECT_EQ(config.metrics_address, "127.0.0.1:9470");
  EXPECT_NE(ToToml(config).find("metrics_address = '127.0.0.1:9470'"), std::string::npos)
      << ToToml(config);
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "metrics_address = \"127.0.0.1\"", "t"),
               StatusCode::kInvalidArgument, {"metrics_address \"127.0.0.1\"", "no port"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "metrics_address = 9470", "t"),
               StatusCode::kInvalidArgument, {"metrics_address"});
}

// The command line, as main() passes it.
Result<Invocation> Load(std::vector<std::string> args) {
  args.insert(args.begin(), "hurrayd");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& arg : args) argv.push_back(arg.c_str());
  return LoadConfig(static_cast<int>(argv.size()), argv.data());
}

class LoadConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "config_test_" + std::to_string(::getpid()) + ".toml";
  }
  void TearDown() override { std::remove(path_.c_str()); }

  void WriteFile(const std::string& text) {
    std::ofstream file(path_);
    file << text;
    ASSERT_TRUE(file) << path_;
  }

  std::string path_;
};

TEST_F(LoadConfigTest, NoFlagsGiveTheDefaults) {
  auto invocation = Load({});
  ASSERT_OK(invocation);
  EXPECT_FALSE(invocation->output.has_value());
  EXPECT_EQ(ToToml(invocation->config), ToToml(DefaultConfig()));
}

TEST_F(LoadConfigTest, FlagsOverrideTheFile) {
  WriteFile(R"(
      socket = "/tmp/from-file.sock"
      log_level = "debug"
      io_threads = 3
      [cpu_pool]
      capacity = "128MiB"
      huge_pages = "auto"
  )");
  auto invocation = Load({"--config", path_, "--socket", "/tmp/from-flag.sock", "--log-level",
                          "warn", "--cpu-pool-capacity", "96MiB", "--cpu-pool-huge-pages", "off"});
  ASSERT_OK(invocation);
  const Config& config = invocation->config;
  EXPECT_EQ(config.socket_path, "/tmp/from-flag.sock");
  EXPECT_EQ(config.log_level, "warn");
  EXPECT_EQ(config.cpu_pool.capacity_bytes, std::uint64_t{96} << 20);
  EXPECT_EQ(config.cpu_pool.huge_pages, HugePages::kOff);
  EXPECT_EQ(config.io_threads, 3u);  // The file's, where no flag speaks.
}

TEST_F(LoadConfigTest, TheFileOverridesTheDefaults) {
  WriteFile("socket = \"/tmp/from-file.sock\"\n");
  auto invocation = Load({"--config", path_});
  ASSERT_OK(invocation);
  EXPECT_EQ(invocation->config.socket_path, "/tmp/from-file.sock");
  EXPECT_EQ(invocation->config.cpu_pool.capacity_bytes, DefaultConfig().cpu_pool.capacity_bytes);
}

TEST_F(LoadConfigTest, BadFlagValuesNameTheFlag) {
  EXPECT_ERROR(Load({"--cpu-pool-capacity", "lots"}), StatusCode::kInvalidArgument,
               {"--cpu-pool-capacity: \"lots\" is not a size"});
  EXPECT_ERROR(Load({"--cpu-pool-huge-pages", "on"}), StatusCode::kInvalidArgument,
               {"--cpu-pool-huge-pages: \"on\""});
  EXPECT_ERROR(Load({"--log-level", "loud"}), StatusCode::kInvalidArgument,
               {"--log-level: \"loud\" is not a level"});
  EXPECT_ERROR(Load({"--socket"}), StatusCode::kInvalidArgument, {"--socket"});
  EXPECT_ERROR(Load({"--sokcet", "/x"}), StatusCode::kInvalidArgument, {"--sokcet"});
}

TEST_F(LoadConfigTest, FileMistakesStopTheLoad) {
  EXPECT_ERROR(Load({"--config", "/nonexistent/hurrayd.toml"}), StatusCode::kNotFound,
               {"/nonexistent/hurrayd.toml"});
  WriteFile("io_threads = 0\n");
  EXPECT_ERROR(Load({"--config", path_}), StatusCode::kInvalidArgument, {"io_threads"});
}

TEST_F(LoadConfigTest, PrintConfigAndHelpAreOutputs) {
  auto printed = Load({"--print-config", "--socket", "/tmp/p.sock"});
  ASSERT_OK(printed);
  ASSERT_TRUE(printed->output.has_value());
  EXPECT_EQ(*printed->output, ToToml(printed->config));
  EXPECT_NE(printed->output->find("/tmp/p.sock"), std::string::npos);

  auto help = Load({"--help"});
  ASSERT_OK(help);
  ASSERT_TRUE(help->output.has_value());
  EXPECT_NE(help->output->find("--cpu-pool-capacity"), std::string::npos) << *help->output;
}

TEST_F(LoadConfigTest, CheckConfigExplainsTheNamespaceRules) {
  WriteFile(R"(
      [cpu_pool]
      namespaces = ["team-a/**"]
      [[namespace]]
      pattern = "team-a/**"
      publish = ["user:root", "uid:1001"]
      read = ["any"]
      [[namespace]]
      pattern = "shared/*"
      delete = ["group:root"]
  )");
  auto invocation = Load({"--config", path_, "--check-config"});
  ASSERT_OK(invocation);
  ASSERT_EQ(invocation->config.namespace_rules.size(), 2u);
  EXPECT_EQ(invocation->config.namespace_rules[1].remove, std::vector<std::string>{"group:root"});
  ASSERT_TRUE(invocation->output.has_value());
  const std::string& text = *invocation->output;
  EXPECT_NE(text.find("2 [[namespace]] rules"), std::string::npos) << text;
  EXPECT_NE(
      text.find("rule 1: names matching \"team-a/**\"\n  publish: user:root (uid 0); uid:1001"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("rule 2: names matching \"shared/*\"\n  publish: nobody"), std::string::npos)
      << text;
  EXPECT_NE(text.find("pool cpu holds only names matching [team-a/**]"), std::string::npos) << text;
  // The rules survive --print-config.
  auto again = ApplyToml(Config{}, ToToml(invocation->config), "printed");
  ASSERT_OK(again);
  EXPECT_EQ(ToToml(*again), ToToml(invocation->config));
}

TEST_F(LoadConfigTest, NamespaceRuleMistakesNameTheKey) {
  WriteFile("[[namespace]]\npattern = \"a/**\"\nread = [\"user:no-such-user-here\"]\n");
  EXPECT_ERROR(Load({"--config", path_}), StatusCode::kInvalidArgument,
               {"namespace[0].read[0]", "does not exist"});
  WriteFile("[[namespace]]\nread = [\"any\"]\n");
  EXPECT_ERROR(Load({"--config", path_}), StatusCode::kInvalidArgument,
               {"namespace[0].pattern is missing"});
  WriteFile("[[namespace]]\npattern = \"a/**\"\nwrite = [\"any\"]\n");
  EXPECT_ERROR(Load({"--config", path_}), StatusCode::kInvalidArgument,
               {"unknown setting namespace[0].write"});
}

TEST(ConfigTest, MaxWaitsPerUidDefaultsTo4096AndZeroLiftsIt) {
  EXPECT_EQ(DefaultConfig().max_waits_per_uid, 4096u);
  auto config = ApplyToml(DefaultConfig(), "max_waits_per_uid = 0", "t");
  ASSERT_OK(config);
  EXPECT_EQ(config->max_waits_per_uid, 0u);
  EXPECT_NE(ToToml(*config).find("max_waits_per_uid = 0"), std::string::npos) << ToToml(*config);
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "max_waits_per_uid = -1", "t"),
               StatusCode::kInvalidArgument, {"max_waits_per_uid"});
}

TEST(ConfigTest, GrpcConnectionAndWatchLimitsHaveDefaultsAndReadFromToml) {
  const Config defaults = DefaultConfig();
  EXPECT_EQ(defaults.max_grpc_connections, 4096u);
  EXPECT_EQ(defaults.max_grpc_connections_per_uid, 1024u);
  EXPECT_EQ(defaults.reserved_descriptors, 128u);
  EXPECT_EQ(defaults.watch_queue_bytes, std::uint64_t{1} << 20);
  EXPECT_EQ(defaults.max_watchers, 256u);
  EXPECT_EQ(defaults.max_watchers_per_uid, 32u);
  ASSERT_OK_AND_ASSIGN(Config config, ApplyToml(DefaultConfig(), R"(
      max_grpc_connections = 100
      max_grpc_connections_per_uid = 0
      reserved_descriptors = 64
      watch_queue_bytes = "64KiB"
      max_watchers = 10
      max_watchers_per_uid = 2
      tcp_address = "[::1]:7470"
  )",
                                                "inline"));
  EXPECT_EQ(config.max_grpc_connections, 100u);
  EXPECT_EQ(config.max_grpc_connections_per_uid, 0u);
  EXPECT_EQ(config.reserved_descriptors, 64u);
  EXPECT_EQ(config.watch_queue_bytes, 65536u);
  EXPECT_EQ(config.max_watchers, 10u);
  EXPECT_EQ(config.max_watchers_per_uid, 2u);
  EXPECT_EQ(config.tcp_address, "[::1]:7470");
  ASSERT_OK_AND_ASSIGN(Config again, ApplyToml(Config{}, ToToml(config), "printed"));
  EXPECT_EQ(ToToml(again), ToToml(config));
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "watch_queue_bytes = 0", "t"),
               StatusCode::kInvalidArgument, {"watch_queue_bytes must be above 0"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "max_watchers = -1", "t"), StatusCode::kInvalidArgument,
               {"max_watchers must be an integer from 0"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "max_grpc_connections_per_uid = \"10\"", "t"),
               StatusCode::kInvalidArgument, {"max_grpc_connections_per_uid"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "tcp_address = \"localhost\"", "t"),
               StatusCode::kInvalidArgument, {"tcp_address \"localhost\"", "no port"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "tcp_address = \"grpc.example:7470\"", "t"),
               StatusCode::kInvalidArgument, {"tcp_address", "grpc.example"});
}

TEST(ConfigTest, FrameTimeoutAndSealedBuffersHaveDefaultsAndReadFromToml) {
  EXPECT_EQ(DefaultConfig().frame_timeout_ms, 10'000u);
  EXPECT_EQ(DefaultConfig().sealed_pool.max_buffers, 16'384u);
  ASSERT_OK_AND_ASSIGN(Config config, ApplyToml(DefaultConfig(), R"(
      frame_timeout_ms = 0
      [sealed_pool]
      capacity = "1MiB"
      max_buffers = 7
  )",
                                                "inline"));
  EXPECT_EQ(config.frame_timeout_ms, 0u);
  EXPECT_EQ(config.sealed_pool.max_buffers, 7u);
  const std::string printed = ToToml(config);
  EXPECT_NE(printed.find("frame_timeout_ms = 0"), std::string::npos) << printed;
  EXPECT_NE(printed.find("max_buffers = 7"), std::string::npos) << printed;
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "[sealed_pool]\nmax_buffers = 0", "t"),
               StatusCode::kInvalidArgument, {"sealed_pool.max_buffers"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "frame_timeout_ms = -5", "t"),
               StatusCode::kInvalidArgument, {"frame_timeout_ms"});
}

// The warnings of `config` that contain `text`.
std::vector<std::string> WarningsWith(const Config& config, std::string_view text) {
  std::vector<std::string> found;
  for (const std::string& warning : ConfigWarnings(config)) {
    if (warning.find(text) != std::string::npos) found.push_back(warning);
  }
  return found;
}

TEST(ConfigWarningsTest, AddressesThatAreNotLoopbackAreWarnedOf) {
  Config config = DefaultConfig();
  config.tcp_address = "127.0.0.1:7470";
  config.metrics_address = "[::1]:9470";
  EXPECT_TRUE(ConfigWarnings(config).empty());
  config.tcp_address = "0.0.0.0:7470";
  config.metrics_address = "192.0.2.1:9470";
  const std::vector<std::string> tcp = WarningsWith(config, "tcp_address");
  ASSERT_EQ(tcp.size(), 1u);
  EXPECT_NE(tcp[0].find("tcp_address 0.0.0.0:7470 is not a loopback address: anyone who "
                        "reaches it may call the gRPC service"),
            std::string::npos)
      << tcp[0];
  EXPECT_EQ(WarningsWith(config, "metrics_address 192.0.2.1:9470 is not a loopback").size(), 1u);
}

TEST(ConfigWarningsTest, APoolHoldingNamespacesWithDifferentReadRulesIsWarnedOf) {
  Config config = DefaultConfig();
  config.cuda_pool.enabled = false;
  config.namespace_rules = {{.pattern = "secret/**", .publish = {"uid:1001"}, .read = {"uid:1001"}},
                            {.pattern = "open/**", .publish = {"any"}, .read = {"any"}}};
  const std::vector<std::string> cpu = WarningsWith(config, "the cpu pool");
  ASSERT_EQ(cpu.size(), 1u) << ::testing::PrintToString(ConfigWarnings(config));
  EXPECT_NE(cpu[0].find("namespace[0] \"secret/**\" read [uid:1001]; namespace[1] \"open/**\" "
                        "read [any]"),
            std::string::npos)
      << cpu[0];
  EXPECT_NE(cpu[0].find("a pool is one trust domain"), std::string::npos) << cpu[0];
  // The CUDA pools hold every namespace too, when they are on.
  config.cuda_pool.enabled = true;
  EXPECT_EQ(WarningsWith(config, "the cuda pool").size(), 1u);

  // The same readers, however written in order: one trust domain, nothing to warn of.
  config.namespace_rules[1].read = {"uid:1001"};
  config.namespace_rules[0].read = {"uid:1001", "uid:1001"};
  EXPECT_TRUE(WarningsWith(config, "trust domain").empty());

  // The pool holds only one of the namespaces: the other's rule places nothing in it.
  config.namespace_rules[1].read = {"any"};
  config.cuda_pool.enabled = false;
  config.cpu_pool.namespaces = {"secret/**"};
  EXPECT_TRUE(WarningsWith(config, "trust domain").empty());
  // The default policy (no rules) lets everyone read: one domain.
  config.cpu_pool.namespaces.clear();
  config.namespace_rules.clear();
  EXPECT_TRUE(ConfigWarnings(config).empty());
}

TEST_F(LoadConfigTest, CheckConfigPrintsTheWarnings) {
  WriteFile(R"(
      tcp_address = "0.0.0.0:7470"
      [cuda_pool]
      enabled = false
      [[namespace]]
      pattern = "secret/**"
      read = ["uid:1001"]
      [[namespace]]
      pattern = "**"
      read = ["any"]
  )");
  ASSERT_OK_AND_ASSIGN(Invocation invocation, Load({"--config", path_, "--check-config"}));
  ASSERT_TRUE(invocation.output.has_value());
  const std::string& text = *invocation.output;
  EXPECT_TRUE(
      text.starts_with("configuration OK\nwarning: tcp_address 0.0.0.0:7470 is not a "
                       "loopback address"))
      << text;
  EXPECT_NE(text.find("\nwarning: the cpu pool holds names of rules whose read lists differ"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("access policy:"), std::string::npos) << text;
}

}  // namespace
}  // namespace hurray::daemon
