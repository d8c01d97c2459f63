// The benchmark's sections, each in its own file, and the worker roles each starts (their
// targets: docs/performance.md, "Reading the run against the targets and Plasma"). A section
// measures its figures in both placements and adds them, with the ratios between them and its
// notes, to the harness's report. A section that fails returns the error; the run reports it
// and goes on with the next one.
//
//   1 section_size.cc        size independence: allocate+publish, acquire+map+release
//   2 section_bytes.cc       getting the bytes: hurray vs local memory, memcpy, gRPC, redis
//   3 section_control.cc     control plane: acquire+release vs an empty gRPC call vs a socket
//   4 section_throughput.cc  acquire+release pairs/s with 1, 4, 16 processes; publish rate
//   5 section_scale.cc       100k tensors: daemon memory, list, describe; a model-like set
//   6 section_huge_pages.cc  sections 1-2 again with huge pages (when hurrayd has them)
//   7 section_gpu.cc         GPU exchange: acquire+map of device memory vs cudaMemcpy
//   8 section_files.cc       model files: safetensors import and .hrry load vs cat, naive
//   9 section_startup.cc     time to serving: hurrayd with a 1, 8, 16 GiB pool vs fallocate
//  10 section_sealed.cc      sealed pool vs cpu pool: cost per tensor, as a ratio per size
//  11 section_attacks.cc     the victim under each attack of the security audit
//   peer_reference.cc        Plasma's figures beside ours (constants, measured elsewhere)
#pragma once

#include <optional>
#include <string>

#include "harness.h"
#include "report.h"
#include "worker.h"

namespace hurray::bench {

// One run of a section: sections 1 and 2 run again under section 6 with huge pages.
struct SectionRun {
  int section = 0;           // Where its figures are reported.
  std::string key_prefix;    // Put before every figure key: "" or "huge_pages.".
  std::string label_suffix;  // Put after every label: "" or " [huge pages]".
  bool huge_pages = false;   // The daemon's cpu_pool.huge_pages.
  bool baselines = true;     // Section 2: measure the baselines too (once is enough).
};

[[nodiscard]] Status RunSizeIndependence(Harness& harness, const SectionRun& run);
[[nodiscard]] Status RunGettingTheBytes(Harness& harness, const SectionRun& run);
[[nodiscard]] Status RunControlPlane(Harness& harness);
[[nodiscard]] Status RunThroughput(Harness& harness);
[[nodiscard]] Status RunScaleAndMemory(Harness& harness);
[[nodiscard]] Status RunHugePages(Harness& harness);
// Adds a note and measures nothing when this process sees no CUDA device.
[[nodiscard]] Status RunGpu(Harness& harness);
[[nodiscard]] Status RunModelFiles(Harness& harness);
// Stops the harness's daemon first: each size starts one of its own.
[[nodiscard]] Status RunTimeToServing(Harness& harness);
[[nodiscard]] Status RunSealedPool(Harness& harness);
// Stops the harness's daemon first: each attack gets a fresh one. Root only (a note otherwise).
[[nodiscard]] Status RunUnderAttack(Harness& harness);

// The TOML value that turns cpu_pool.huge_pages on, when `hurrayd_path --print-config`
// shows that option: `"MODE"` (`mode`, e.g. "auto": whichever huge pages the host allows,
// with the daemon's own fallback) when it prints a string, `true` when it prints a boolean.
// nullopt when the daemon has no such option. INTERNAL when the binary cannot be run.
[[nodiscard]] Result<std::optional<std::string>> HugePagesSetting(const std::string& hurrayd_path,
                                                                  const std::string& mode);

// Adds the peer's reference figures (constants, not measured here) beside ours.
void AddPeerReferences(Harness& harness);

// ---- Worker roles (the usage of each is in its section's file) ----

[[nodiscard]] int SizeProducerRole(const WorkerArgs& args);
[[nodiscard]] int SizeConsumerRole(const WorkerArgs& args);
[[nodiscard]] int BytesHurrayRole(const WorkerArgs& args);
[[nodiscard]] int BytesLocalRole(const WorkerArgs& args);
[[nodiscard]] int ControlAcquireReleaseRole(const WorkerArgs& args);
[[nodiscard]] int HandoffProducerRole(const WorkerArgs& args);
[[nodiscard]] int HandoffConsumerRole(const WorkerArgs& args);
[[nodiscard]] int ThroughputAcquireRole(const WorkerArgs& args);
[[nodiscard]] int ThroughputPublishRole(const WorkerArgs& args);
[[nodiscard]] int ScalePublishRole(const WorkerArgs& args);
[[nodiscard]] int ScaleInspectRole(const WorkerArgs& args);
[[nodiscard]] int ModelPublishRole(const WorkerArgs& args);
[[nodiscard]] int ModelBatchAcquireRole(const WorkerArgs& args);
[[nodiscard]] int GpuPublishRole(const WorkerArgs& args);
[[nodiscard]] int GpuAcquireRole(const WorkerArgs& args);
[[nodiscard]] int GpuCopyRole(const WorkerArgs& args);
[[nodiscard]] int FilesCatRole(const WorkerArgs& args);
[[nodiscard]] int FilesImportRole(const WorkerArgs& args);
[[nodiscard]] int FilesSaveRole(const WorkerArgs& args);
[[nodiscard]] int FilesBatchAcquireRole(const WorkerArgs& args);
[[nodiscard]] int FilesPopulateRole(const WorkerArgs& args);
[[nodiscard]] int SealedProducerRole(const WorkerArgs& args);
[[nodiscard]] int SealedConsumerRole(const WorkerArgs& args);
[[nodiscard]] int AttackVictimRole(const WorkerArgs& args);

}  // namespace hurray::bench
