// hurray_bench: benchmarks hurrayd against real baselines (docs/performance.md).
//   hurray_bench --hurrayd PATH [--json FILE] [--quick] ...   a run (see --help)
//   hurray_bench worker ROLE ARGS...                          a measuring process (worker.h)
#include <cstdio>
#include <string_view>

#include "benchmark.h"
#include "options.h"
#include "worker.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "worker") {
    return hurray::bench::RunWorkerRole(argc - 2, argv + 2);
  }
  auto options = hurray::bench::ParseOptions(argc, argv);
  if (!options) {
    std::fprintf(stderr, "hurray_bench: %s\n", options.error().message().c_str());
    return 2;
  }
  return hurray::bench::RunBenchmark(*options);
}
