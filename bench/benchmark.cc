#include "benchmark.h"

#include <cstdio>
#include <functional>
#include <iostream>

#include "client_transport.h"
#include "harness.h"
#include "sections.h"
#include "system_info.h"

namespace hurray::bench {

int RunBenchmark(const Options& options) {
  auto created = Harness::Create(options);
  if (!created) {
    std::fprintf(stderr, "hurray_bench: %s\n", created.error().ToString().c_str());
    return 2;
  }
  Harness& harness = **created;
  Report& report = harness.report();

  report.SetRunFact("benchmark", options.quick ? "hurray_bench --quick (a smoke run: few "
                                                 "repetitions, smaller tensors)"
                                               : "hurray_bench (full run)");
  for (const auto& [key, value] : DescribeMachine()) report.SetRunFact(key, value);
  report.SetRunFact("hurrayd", options.hurrayd_path);
  report.SetRunFact("pool_capacity", FormatBytes(harness.pool_capacity_bytes()));
  report.SetRunFact("placements", "pinned: CPU " + std::to_string(harness.cpus().pinned.front()) +
                                      " for the daemon, the servers and the clients; unpinned: " +
                                      std::to_string(harness.cpus().unpinned.size()) + " CPUs");
  const double load = LoadAverage();
  const auto usable = harness.cpus().unpinned.size();
  if (load > 0.5 * static_cast<double>(usable)) {
    char busy[200];
    std::snprintf(busy, sizeof(busy),
                  "the machine was busy when the run started (load average %.1f on %zu CPUs): "
                  "figures are slower and noisier than on an idle machine; ratios of the same "
                  "run still compare like with like",
                  load, usable);
    report.AddNote(0, busy);
  }
  report.SetRunFact("client_transport", DescribeDefaultClientPath());

  report.SetSectionTitle(0, "Setup");
  report.SetSectionTitle(1,
                         "Size independence: hand over a tensor at 4 KiB ... 1 GiB "
                         "(target: 1 GiB / 4 KiB <= 1.5)");
  report.SetSectionTitle(2,
                         "Getting the bytes: read every byte of a just-published tensor "
                         "(targets: <= 1.3x local memory; >= 20x faster than gRPC or Redis)");
  report.SetSectionTitle(3,
                         "Control plane: acquire+release vs an empty gRPC call vs a raw "
                         "unix-socket round trip");
  report.SetSectionTitle(4,
                         "Throughput: acquire+release pairs/s from 1, 4 and 16 processes; "
                         "publish rate of small tensors");
  report.SetSectionTitle(5, "Scale and memory: many published tensors; a model-like set");
  report.SetSectionTitle(6, "Huge pages: sections 1-2 with cpu_pool.huge_pages");
  report.SetSectionTitle(7,
                         "GPU exchange: acquire+map of device memory (1 GiB; a 1,000-tensor "
                         "set) vs a device copy of the same bytes");
  report.SetSectionTitle(8,
                         "Model files: a safetensors model imported from the page cache, "
                         "and a .hrry load (target: import <= 1.3x cat)");
  report.SetSectionTitle(9,
                         "Time to serving: hurrayd with a 1, 8, 16 GiB cpu pool, exec to "
                         "serving and to fully reserved, vs fallocate of the same size");
  report.SetSectionTitle(10,
                         "Sealed pool: cost per tensor of a memfd sealed at publish vs the "
                         "shared-segment cpu pool, sealed / cpu per size");
  report.SetSectionTitle(11,
                         "Under attack: a victim's publish and acquire while another uid runs "
                         "each attack of the security audit");

  struct Step {
    int section;
    std::function<Status()> run;
  };
  // Sections 1-4 and 10 share one daemon; 6 restarts it with huge pages; 5, 7 and 8 need
  // fresh ones; 9 starts its own, 11 one per attack.
  const Step steps[] = {
      {1, [&] { return RunSizeIndependence(harness, SectionRun{.section = 1}); }},
      {2, [&] { return RunGettingTheBytes(harness, SectionRun{.section = 2}); }},
      {3, [&] { return RunControlPlane(harness); }},
      {4, [&] { return RunThroughput(harness); }},
      {10, [&] { return RunSealedPool(harness); }},
      {6, [&] { return RunHugePages(harness); }},
      {5, [&] { return RunScaleAndMemory(harness); }},
      {7, [&] { return RunGpu(harness); }},
      {8, [&] { return RunModelFiles(harness); }},
      {9, [&] { return RunTimeToServing(harness); }},
      {11, [&] { return RunUnderAttack(harness); }},
  };
  int failures = 0;
  for (const Step& step : steps) {
    if (!options.Runs(step.section)) continue;
    harness.Progress("section " + std::to_string(step.section));
    if (auto ran = step.run(); !ran) {
      ++failures;
      harness.Progress("section " + std::to_string(step.section) +
                       " FAILED: " + ran.error().ToString());
      report.AddNote(step.section, "FAILED: " + ran.error().ToString());
    }
  }
  (void)harness.StopDaemon();
  char load_at_end[32];
  std::snprintf(load_at_end, sizeof(load_at_end), "%.2f", LoadAverage());
  report.SetRunFact("load_average_at_end", load_at_end);
  AddPeerReferences(harness);

  report.Print(std::cout);
  if (!options.json_path.empty()) {
    if (auto written = report.WriteJson(options.json_path); !written) {
      std::fprintf(stderr, "hurray_bench: %s\n", written.error().ToString().c_str());
      return 1;
    }
    harness.Progress("wrote " + options.json_path);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace hurray::bench
