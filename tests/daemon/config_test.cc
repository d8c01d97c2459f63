#include "config.h"

#include <gtest/gtest.h>

#include <fstream>

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
      session_quota = "1GiB"
      max_wait_ms = 5000
      [cpu_pool]
      capacity = "256MiB"
      segment_size = 67108864
      shm_prefix = "test"
  )", "inline");
  ASSERT_OK(config);
  EXPECT_EQ(config->socket_path, "/tmp/x/d.sock");
  EXPECT_EQ(config->log_level, "debug");
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
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "max_wait_ms = -4", "t"),
               StatusCode::kInvalidArgument, {"max_wait_ms"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "cpu_pool = 3", "t"), StatusCode::kInvalidArgument,
               {"cpu_pool must be a table"});
  EXPECT_ERROR(ApplyToml(DefaultConfig(), "socket = ", "file.toml"),
               StatusCode::kInvalidArgument, {"file.toml:1:"});
  EXPECT_ERROR(ApplyTomlFile(DefaultConfig(), "/nonexistent/hurrayd.toml"),
               StatusCode::kNotFound, {"/nonexistent/hurrayd.toml"});
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
  EXPECT_NE(ToToml(config).find("huge_pages = 'auto'"), std::string::npos) << ToToml(config);
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

TEST(ConfigTest, ShippedExampleConfigParses) {
  std::ifstream file(HURRAY_SOURCE_DIR "/deploy/hurrayd.toml");
  ASSERT_TRUE(file) << "deploy/hurrayd.toml";
  auto config = ApplyTomlFile(DefaultConfig(), HURRAY_SOURCE_DIR "/deploy/hurrayd.toml");
  ASSERT_OK(config);
  EXPECT_EQ(config->cpu_pool.shm_prefix, "hurray");
}

}  // namespace
}  // namespace hurray::daemon
