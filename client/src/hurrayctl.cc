// hurrayctl: the operator's tool for hurrayd. Parses the command line and runs one command
// (hurrayctl_commands.h). Exit status: 0 success; 1 an error from the daemon or a file,
// reported on stderr as "hurrayctl: <CODE>: <message>"; 2 a usage error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "hurrayctl_commands.h"

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// Digits only: CLI11 would otherwise read "-1" as 2^64 - 1 for an unsigned option.
const CLI::Validator kUnsignedNumber(
    [](const std::string& text) -> std::string {
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
        return fmt::format("\"{}\" is not a non-negative integer", text);
      }
      return {};
    },
    "", "unsigned number");

// Versions start at 1; 0 (which the daemon reads as "the latest") is spelled by omitting
// --version.
const CLI::Validator kVersionNumber(
    [](const std::string& text) -> std::string {
      if (std::string error = kUnsignedNumber(text); !error.empty()) return error;
      if (text.find_first_not_of('0') == std::string::npos) {
        return "versions start at 1 (omit --version for the latest)";
      }
      return {};
    },
    "", "version number");

}  // namespace

int main(int argc, char** argv) {
  using namespace hurray::ctl;  // NOLINT(google-build-using-namespace): main's own commands.
  CLI::App app{"hurrayctl: inspect hurrayd and move tensors between it and .npy files"};
  app.require_subcommand(1);
  app.fallthrough();  // Global options may follow the command too.
  GlobalOptions global;
  app.add_option("--socket", global.socket_path,
                 "hurrayd's gRPC socket (default: $HURRAY_SOCKET, then the usual locations)");
  app.add_flag("--json", global.json, "Print JSON instead of text");

  std::string prefix;
  std::string name;
  std::string file;
  std::string pool;  // Empty: the daemon's default pool.
  std::uint64_t version = 0;
  std::uint32_t wait_ms = 0;

  CLI::App* ls = app.add_subcommand("ls", "List published tensors (latest versions)");
  ls->add_option("PREFIX", prefix, "Only names starting with PREFIX");

  CLI::App* describe = app.add_subcommand("describe", "Describe a tensor and its versions");
  describe->add_option("NAME", name, "Tensor name (namespace/name)")->required();
  describe->add_option("--version", version, "Version to describe (default: the latest)")
      ->type_name("N")
      ->check(kVersionNumber);

  CLI::App* stats = app.add_subcommand("stats", "Pools, sessions, leases and tensors");

  CLI::App* watch =
      app.add_subcommand("watch", "Print publish and delete events until interrupted");
  watch->add_option("PREFIX", prefix, "Only names starting with PREFIX");

  CLI::App* rm = app.add_subcommand("rm", "Delete a tensor (every version, or one)");
  rm->add_option("NAME", name, "Tensor name (namespace/name)")->required();
  rm->add_option("--version", version, "Only this version (default: every version)")
      ->type_name("N")
      ->check(kVersionNumber);

  CLI::App* put = app.add_subcommand("put", "Publish a .npy file as a tensor");
  put->add_option("NAME", name, "Tensor name (namespace/name)")->required();
  put->add_option("FILE", file, ".npy file to read")->required();
  put->add_option("--pool", pool, "Pool to allocate from (default: the daemon's default, cpu)");

  CLI::App* get = app.add_subcommand("get", "Write a tensor to a .npy file");
  get->add_option("NAME", name, "Tensor name (namespace/name)")->required();
  get->add_option("FILE", file, ".npy file to write (replaced if it exists)")->required();
  get->add_option("--version", version, "Version to get (default: the latest)")
      ->type_name("N")
      ->check(kVersionNumber);
  get->add_option("--wait", wait_ms, "Wait up to MS milliseconds for the tensor to appear")
      ->type_name("MS")
      ->check(kUnsignedNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // CLI11 reports an unknown command as a missing one; name it instead.
    if (app.get_subcommands().empty() && !app.remaining().empty() && error.get_exit_code() != 0) {
      std::fprintf(stderr,
                   "hurrayctl: unknown command \"%s\"\nRun with --help for more information.\n",
                   app.remaining().front().c_str());
      return kExitUsage;
    }
    // Prints help for --help, and the message otherwise.
    const int exit_code = app.exit(error);
    return exit_code == 0 ? 0 : kExitUsage;
  }

  hurray::Status status;
  if (*ls) {
    status = ListCommand(global, prefix);
  } else if (*describe) {
    status = DescribeCommand(global, name, version);
  } else if (*stats) {
    status = StatsCommand(global);
  } else if (*watch) {
    status = WatchCommand(global, prefix);
  } else if (*rm) {
    status = RemoveCommand(global, name, version);
  } else if (*put) {
    status = PutCommand(global, name, file, pool);
  } else if (*get) {
    status = GetCommand(global, name, file, version, std::chrono::milliseconds(wait_ms));
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    std::fputs("hurrayctl: UNKNOWN: writing the output failed\n", stderr);
    return kExitError;
  }
  if (!status) {
    std::fprintf(stderr, "hurrayctl: %s\n", status.error().ToString().c_str());
    return kExitError;
  }
  return 0;
}
