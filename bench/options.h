// The harness's command line, and how much work each section does (full run or --quick).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "hurray/error.h"

namespace hurray::bench {

struct Options {
  // The hurrayd binary to benchmark.
  std::string hurrayd_path;
  // Where to write the JSON report; empty: none.
  std::string json_path;
  // A short smoke run: fewer repetitions, smaller tensors where the size is not the point.
  bool quick = false;
  // Run sections 1 and 2 again with cpu_pool.huge_pages on (when hurrayd has the option).
  bool huge_pages = false;
  // The mode written when the option is a string: "auto", "transparent" or "explicit".
  std::string huge_pages_mode = "auto";
  // The CPU of the pinned placement; -1: the last CPU the harness may use.
  int pin_cpu = -1;
  // Sections to run (1-11); empty: all.
  std::set<int> sections;
  // The CPU pool of the harness's hurrayd; 0: 4 GiB, less when /dev/shm is smaller.
  std::uint64_t pool_capacity_bytes = 0;
  // Section 7 runs on a software CUDA driver (tests/softcuda): its output says so ("software
  // driver: no GPU figure"), since nothing in the driver's API tells the benchmark.
  bool software_driver_label = false;
  // Section 7's one big tensor, in MiB (1 GiB by default; less for a smoke run on a driver
  // whose copies are the host's).
  std::uint64_t gpu_tensor_mib = 1024;
  // Keep the temporary directory (logs of hurrayd, redis-server and the servers).
  bool keep_work_directory = false;

  [[nodiscard]] bool Runs(int section) const {
    return sections.empty() || sections.contains(section);
  }
};

// Parses the harness's flags (not a worker's). INVALID_ARGUMENT with CLI11's message;
// --help prints the help and exits 0.
[[nodiscard]] Result<Options> ParseOptions(int argc, char** argv);

// How much each section does. A full run takes under 15 minutes on 2 cores.
struct Scale {
  // Section 1: tensor sizes; fresh processes per size (each gives one first-in-process
  // sample) and steady-state repetitions in each.
  std::vector<std::uint64_t> tensor_sizes;
  int processes_per_size = 0;
  int steady_repetitions_per_process = 0;
  // Section 2: the tensor read end to end, and how many fresh consumers read it.
  std::uint64_t read_bytes = 0;
  int read_repetitions = 0;
  // Sections 1, 3 and 5: round trips per latency figure (raw socket, gRPC, acquire+release).
  int round_trips = 0;
  // Section 4: seconds per throughput measurement, and how many rounds of each.
  double throughput_seconds = 0;
  int throughput_rounds = 0;
  // Section 5: small tensors held; samples of list/describe; full listings timed.
  int scale_tensor_count = 0;
  int inspect_samples = 0;
  int full_listings = 0;
  // Section 5: the model-like set and how many fresh consumers batch-acquire it.
  int model_tensor_count = 0;
  std::uint64_t model_total_bytes = 0;
  int model_repetitions = 0;
  // Section 8: the model-like .safetensors file (bytes, tensors) and runs of each figure.
  std::uint64_t file_bytes = 0;
  int file_tensor_count = 0;
  int file_repetitions = 0;
  // Section 10: tensor sizes compared between the sealed pool and the cpu pool (steady
  // repetitions as section 1's).
  std::vector<std::uint64_t> sealed_sizes;
  // Section 11: the victim's handover rounds with no attack and under each attack.
  int attack_rounds = 0;
};

[[nodiscard]] Scale ScaleFor(bool quick);

}  // namespace hurray::bench
