// hurrayctl: the operator's tool for hurrayd. Parses the command line and runs one command
// (hurrayctl_commands.h). Exit status: 0 success; 1 an error from the daemon or a file,
// reported on stderr as "hurrayctl: <CODE>: <message>"; 2 a usage error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "hurrayctl/hurrayctl_commands.h"

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

// What the command line says: the command chosen (each pointer tests true when it was) and
// the values of its arguments.
struct CommandLine {
  hurray::ctl::GlobalOptions global;
  std::string prefix;
  std::string name;
  std::string file;
  std::string pool;  // Empty: the daemon's default pool.
  std::uint64_t version = 0;
  std::uint32_t wait_ms = 0;
  double interval_seconds = 1.0;  // top's refresh interval.
  hurray::ctl::TransferFlags transfer;
  CLI::App* ls = nullptr;
  CLI::App* describe = nullptr;
  CLI::App* stats = nullptr;
  CLI::App* health = nullptr;
  CLI::App* watch = nullptr;
  CLI::App* top = nullptr;
  CLI::App* rm = nullptr;
  CLI::App* put = nullptr;
  CLI::App* get = nullptr;
  CLI::App* import = nullptr;
  CLI::App* save = nullptr;
  CLI::App* load = nullptr;
};

// A command's --version option, bound to `version`.
void AddVersionOption(CLI::App& command, std::uint64_t& version, const std::string& what) {
  command.add_option("--version", version, what)->type_name("N")->check(kVersionNumber);
}

// The file-transfer commands: import, save, load.
void DefineTransferCommands(CLI::App& app, CommandLine& line) {
  const std::string pool_help = "Pool to allocate from (default: the daemon's default, cpu)";
  const std::string quiet_help = "No progress line on stderr";
  line.import = app.add_subcommand(
      "import", "Publish every tensor of a .safetensors file (or sharded index) at once");
  line.import->add_option("FILE", line.file, "FILE.safetensors or MODEL.safetensors.index.json")
      ->required();
  line.import->add_option("--prefix", line.prefix, "Prepended to each tensor's name (model/)")
      ->required();
  line.import->add_option("--pool", line.pool, pool_help);
  line.import->add_flag("--quiet", line.transfer.quiet, quiet_help);

  line.save = app.add_subcommand("save", "Write every tensor under PREFIX to a .hrry file");
  line.save->add_option("PREFIX", line.prefix, "Names starting with PREFIX")->required();
  line.save->add_option("FILE", line.file, ".hrry file to write (replaced if it exists)")
      ->required();
  line.save->add_flag("--quiet", line.transfer.quiet, quiet_help);

  line.load = app.add_subcommand("load", "Publish every tensor of a .hrry file at once");
  line.load->add_option("FILE", line.file, ".hrry file to read")->required();
  line.load->add_option("--prefix", line.prefix, "Prepended to each saved name (default: none)");
  line.load->add_option("--pool", line.pool, pool_help);
  line.load->add_flag("--quiet", line.transfer.quiet, quiet_help);
}

// Adds every command and option to `app`, bound to the fields of `line`.
void DefineCommands(CLI::App& app, CommandLine& line) {
  app.require_subcommand(1);
  app.fallthrough();  // Global options may follow the command too.
  app.add_option("--socket", line.global.socket_path,
                 "hurrayd's gRPC socket (default: $HURRAY_SOCKET, then the usual locations)");
  app.add_flag("--json", line.global.json, "Print JSON instead of text");

  line.ls = app.add_subcommand("ls", "List published tensors (latest versions)");
  line.ls->add_option("PREFIX", line.prefix, "Only names starting with PREFIX");

  line.describe = app.add_subcommand("describe", "Describe a tensor and its versions");
  line.describe->add_option("NAME", line.name, "Tensor name (namespace/name)")->required();
  AddVersionOption(*line.describe, line.version, "Version to describe (default: the latest)");

  line.stats = app.add_subcommand("stats", "Pools, sessions, leases and tensors");

  line.health =
      app.add_subcommand("health", "Whether the daemon serves (exit status 0 only when SERVING)");
  line.health->add_option("SERVICE", line.name, "A gRPC service (default: the daemon as a whole)");

  line.watch = app.add_subcommand("watch", "Print publish and delete events until interrupted");
  line.watch->add_option("PREFIX", line.prefix, "Only names starting with PREFIX");

  line.top = app.add_subcommand("top", "Live view of pools, tensors and sessions (q quits)");
  line.top->add_option("--interval", line.interval_seconds, "Seconds between refreshes")
      ->type_name("SECONDS")
      ->default_val(1.0)
      ->check(CLI::Range(0.1, 3600.0));

  line.rm = app.add_subcommand("rm", "Delete a tensor (every version, or one)");
  line.rm->add_option("NAME", line.name, "Tensor name (namespace/name)")->required();
  AddVersionOption(*line.rm, line.version, "Only this version (default: every version)");

  line.put = app.add_subcommand("put", "Publish a .npy file as a tensor");
  line.put->add_option("NAME", line.name, "Tensor name (namespace/name)")->required();
  line.put->add_option("FILE", line.file, ".npy file to read")->required();
  line.put->add_option("--pool", line.pool,
                       "Pool to allocate from (default: the daemon's default, cpu)");
  line.put->add_flag("--quiet", line.transfer.quiet, "No progress line on stderr");

  line.get = app.add_subcommand("get", "Write a tensor to a .npy file");
  line.get->add_option("NAME", line.name, "Tensor name (namespace/name)")->required();
  line.get->add_option("FILE", line.file, ".npy file to write (replaced if it exists)")->required();
  AddVersionOption(*line.get, line.version, "Version to get (default: the latest)");
  line.get
      ->add_option("--wait", line.wait_ms, "Wait up to MS milliseconds for the tensor to appear")
      ->type_name("MS")
      ->check(kUnsignedNumber);
  line.get->add_flag("--quiet", line.transfer.quiet, "No progress line on stderr");
  DefineTransferCommands(app, line);
}

// Runs the command the line chose.
hurray::Status RunCommand(const CommandLine& line) {
  using namespace hurray::ctl;  // NOLINT(google-build-using-namespace): the commands.
  if (*line.ls) return ListCommand(line.global, line.prefix);
  if (*line.describe) return DescribeCommand(line.global, line.name, line.version);
  if (*line.stats) return StatsCommand(line.global);
  if (*line.health) return HealthCommand(line.global, line.name);
  if (*line.watch) return WatchCommand(line.global, line.prefix);
  if (*line.top) {
    return TopCommand(line.global,
                      std::chrono::milliseconds(std::llround(line.interval_seconds * 1000)));
  }
  if (*line.rm) return RemoveCommand(line.global, line.name, line.version);
  if (*line.put) return PutCommand(line.global, line.transfer, line.name, line.file, line.pool);
  if (*line.import)
    return ImportCommand(line.global, line.transfer, line.file, line.prefix, line.pool);
  if (*line.save) return SaveCommand(line.global, line.transfer, line.prefix, line.file);
  if (*line.load) return LoadCommand(line.global, line.transfer, line.file, line.prefix, line.pool);
  return GetCommand(line.global, line.transfer, line.name, line.file, line.version,
                    std::chrono::milliseconds(line.wait_ms));
}

int Run(int argc, char** argv) {
  CLI::App app{
      "hurrayctl: inspect hurrayd and move tensors between it and .npy, .safetensors and "
      ".hrry files"};
  CommandLine line;
  DefineCommands(app, line);
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
  const hurray::Status status = RunCommand(line);
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

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& exception) {  // Out of memory, at worst.
    std::fprintf(stderr, "hurrayctl: INTERNAL: %s\n", exception.what());
    return kExitError;
  }
}
