// hurrayd: parse the configuration, start the daemon, serve until told to stop.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "config.h"
#include "daemon.h"

int main(int argc, char** argv) {
  using hurray::daemon::Config;
  CLI::App app{"hurrayd: zero-copy tensor exchange between processes"};
  std::string config_file;
  std::string socket;
  std::string log_level;
  std::string capacity;
  std::string huge_pages;
  bool print_config = false;
  app.add_option("--config", config_file, "TOML configuration file");
  app.add_option("--socket", socket, "gRPC unix socket path (session socket: PATH.session)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off");
  app.add_option("--cpu-pool-capacity", capacity, "CPU pool size, e.g. 4GiB");
  app.add_option("--cpu-pool-huge-pages", huge_pages,
                 "Huge pages for the CPU pool: off, transparent, explicit or auto");
  app.add_flag("--print-config", print_config, "Print the effective configuration and exit");
  CLI11_PARSE(app, argc, argv);

  auto config = hurray::daemon::DefaultConfig();
  auto fail = [](const hurray::Error& error) {
    std::fprintf(stderr, "hurrayd: %s\n", error.ToString().c_str());
    return 1;
  };
  if (!config_file.empty()) {
    auto loaded = hurray::daemon::ApplyTomlFile(std::move(config), config_file);
    if (!loaded) return fail(loaded.error());
    config = std::move(*loaded);
  }
  if (!socket.empty()) config.socket_path = socket;
  if (!log_level.empty()) config.log_level = log_level;
  if (!capacity.empty()) {
    auto bytes = hurray::daemon::ParseByteSize(capacity);
    if (!bytes) return fail(bytes.error().WithContext("--cpu-pool-capacity"));
    config.cpu_pool.capacity_bytes = *bytes;
  }
  if (!huge_pages.empty()) {
    auto mode = hurray::daemon::ParseHugePages(huge_pages);
    if (!mode) return fail(mode.error().WithContext("--cpu-pool-huge-pages"));
    config.cpu_pool.huge_pages = *mode;
  }
  if (print_config) {
    std::fputs(hurray::daemon::ToToml(config).c_str(), stdout);
    return 0;
  }
  const auto level = spdlog::level::from_str(config.log_level);
  if (level == spdlog::level::off && config.log_level != "off") {
    return fail(hurray::Error(hurray::StatusCode::kInvalidArgument,
                              "log_level \"" + config.log_level + "\" is not a level"));
  }
  spdlog::set_level(level);

  auto daemon = hurray::daemon::Daemon::Start(std::move(config));
  if (!daemon) return fail(daemon.error());
  (*daemon)->Wait();
  return 0;
}
