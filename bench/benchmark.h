// One run of the benchmark: every section in turn, then the report (table on stdout, JSON
// to --json). Progress goes to stderr.
#pragma once

#include "options.h"

namespace hurray::bench {

// 0 when every section ran; 1 when one failed (its error is in the report, the others
// still ran); 2 when the run could not start.
[[nodiscard]] int RunBenchmark(const Options& options);

}  // namespace hurray::bench
