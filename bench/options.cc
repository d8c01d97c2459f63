#include "options.h"

#include <CLI/CLI.hpp>

namespace hurray::bench {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kGiB = 1024 * kMiB;

Result<Options> ParseOptions(int argc, char** argv) {
  Options options;
  CLI::App app{
      "hurray_bench: hurrayd against real baselines (raw unix socket, gRPC, redis-server), "
      "every latency pinned to one CPU and unpinned. See docs/performance.md."};
  app.add_option("--hurrayd", options.hurrayd_path, "hurrayd binary to benchmark")->required();
  app.add_option("--json", options.json_path, "Also write the report as JSON to this file");
  app.add_flag("--quick", options.quick, "Short smoke run (fewer repetitions, smaller tensors)");
  app.add_flag("--huge-pages", options.huge_pages,
               "Also run sections 1-2 with cpu_pool.huge_pages on (when hurrayd has it)");
  app.add_option("--huge-pages-mode", options.huge_pages_mode,
                 "cpu_pool.huge_pages mode for --huge-pages (default auto)");
  app.add_option("--pin-cpu", options.pin_cpu, "CPU of the pinned placement (default: the last)");
  app.add_option("--sections", options.sections, "Sections to run, e.g. --sections 1 3 (1-11)")
      ->check(CLI::Range(1, 11));
  app.add_option("--pool-capacity-mib", options.pool_capacity_bytes,
                 "CPU pool of the benchmark's hurrayd in MiB (default 4096, less when /dev/shm "
                 "is smaller)");
  app.add_flag("--software-driver-label", options.software_driver_label,
               "Section 7 runs on a software CUDA driver: label its output \"software driver: "
               "no GPU figure\"");
  app.add_option("--gpu-tensor-mib", options.gpu_tensor_mib,
                 "Section 7's one big tensor in MiB (default 1024)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("--keep-work-dir", options.keep_work_directory,
               "Keep the temporary directory with every server's log");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    // NOLINTNEXTLINE(concurrency-mt-unsafe): options are parsed before any thread starts.
    std::exit(0);
  } catch (const CLI::ParseError& error) {
    return InvalidArgumentError(error.what());
  }
  options.pool_capacity_bytes *= kMiB;
  return options;
}

Scale ScaleFor(bool quick) {
  if (quick) {
    return Scale{.tensor_sizes = {4 * kKiB, 1 * kMiB, 64 * kMiB, 1 * kGiB},
                 .processes_per_size = 2,
                 .steady_repetitions_per_process = 20,
                 .read_bytes = 256 * kMiB,
                 .read_repetitions = 2,
                 .round_trips = 300,
                 .throughput_seconds = 0.3,
                 .throughput_rounds = 1,
                 .scale_tensor_count = 5000,
                 .inspect_samples = 30,
                 .full_listings = 1,
                 .model_tensor_count = 1000,
                 .model_total_bytes = 256 * kMiB,
                 .model_repetitions = 2,
                 .file_bytes = 128 * kMiB,
                 .file_tensor_count = 100,
                 .file_repetitions = 2,
                 .sealed_sizes = {4 * kKiB, 1 * kMiB, 64 * kMiB},
                 .attack_rounds = 200};
  }
  return Scale{.tensor_sizes = {4 * kKiB, 1 * kMiB, 64 * kMiB, 1 * kGiB},
               .processes_per_size = 10,
               .steady_repetitions_per_process = 100,
               .read_bytes = 1 * kGiB,
               .read_repetitions = 7,
               .round_trips = 10000,
               .throughput_seconds = 2.0,
               .throughput_rounds = 5,
               .scale_tensor_count = 100000,
               .inspect_samples = 300,
               .full_listings = 3,
               .model_tensor_count = 1000,
               .model_total_bytes = 2 * kGiB,
               .model_repetitions = 5,
               .file_bytes = 2 * kGiB,
               .file_tensor_count = 500,
               .file_repetitions = 3,
               .sealed_sizes = {4 * kKiB, 1 * kMiB, 64 * kMiB},
               .attack_rounds = 2000};
}

}  // namespace hurray::bench
