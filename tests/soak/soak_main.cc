// hurray_soak: the soak (soak_run.h) from the command line; `make soak` runs it.
//
//   hurray_soak [--duration SECONDS] [--producers N] [--consumers M]
//               [--client-kill-ms MS] [--daemon-kills] [--daemon-kill-ms MS] [--fast-path]
//               [--seed N] [--pool-mib MIB] [--hurrayd PATH] [--worker PATH]
//
// Prints the soak's figures and exits 0, or prints the first failure and exits 1.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "soak_run.h"

namespace hurray::soak {
namespace {

int Usage(std::string_view wrong) {
  std::fprintf(stderr,
               "hurray_soak: %.*s\n"
               "usage: hurray_soak [--duration SECONDS] [--producers N] [--consumers M]\n"
               "                   [--client-kill-ms MS] [--daemon-kills] [--daemon-kill-ms MS]\n"
               "                   [--fast-path]\n"
               "                   [--seed N] [--pool-mib MIB] [--hurrayd PATH] [--worker PATH]\n",
               static_cast<int>(wrong.size()), wrong.data());
  return 2;
}

// Sets `options` from the arguments; an empty string, or the argument that is wrong.
std::string Parse(const std::vector<std::string>& args, SoakOptions& options) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--daemon-kills") {
      options.daemon_kills = true;
      continue;
    }
    if (flag == "--fast-path") {
      options.fast_path = true;
      continue;
    }
    if (i + 1 == args.size()) return fmt::format("{} needs a value", flag);
    const std::string& value = args[++i];
    char* end = nullptr;
    const std::uint64_t number = std::strtoull(value.c_str(), &end, 10);
    const bool numeric = !value.empty() && *end == '\0';
    if (flag == "--hurrayd") {
      options.hurrayd = value;
    } else if (flag == "--worker") {
      options.worker = value;
    } else if (!numeric || number == 0) {
      return fmt::format("{} {}: not a positive number", flag, value);
    } else if (flag == "--duration") {
      options.duration = std::chrono::seconds(number);
    } else if (flag == "--producers") {
      options.producers = static_cast<int>(number);
    } else if (flag == "--consumers") {
      options.consumers = static_cast<int>(number);
    } else if (flag == "--client-kill-ms") {
      options.client_kill_interval = std::chrono::milliseconds(number);
    } else if (flag == "--daemon-kill-ms") {
      options.daemon_kill_interval = std::chrono::milliseconds(number);
    } else if (flag == "--seed") {
      options.seed = number;
    } else if (flag == "--pool-mib") {
      options.pool_capacity_bytes = number << 20;
    } else {
      return fmt::format("unknown flag {}", flag);
    }
  }
  return {};
}

}  // namespace
}  // namespace hurray::soak

int main(int argc, char** argv) {
  hurray::soak::SoakOptions options{.hurrayd = HURRAYD_PATH, .worker = HURRAY_SOAK_WORKER_PATH};
  if (const std::string wrong = hurray::soak::Parse({argv, argv + argc}, options); !wrong.empty()) {
    return hurray::soak::Usage(wrong);
  }
  const auto figures = hurray::soak::RunSoak(options);
  if (!figures) {
    std::fprintf(stderr, "hurray_soak: FAILED: %s\n", figures.error().ToString().c_str());
    return 1;
  }
  std::printf("hurray_soak: %s\n", hurray::soak::DescribeSoak(options, *figures).c_str());
  return 0;
}
