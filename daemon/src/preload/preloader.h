// Preloader: the [[preload]] entries of the configuration, imported at start-up on a thread
// of its own while the daemon already serves.
//
// Each entry is a TensorImport (hurray/tensor_import.h, the algorithm of the client's import
// too) into a sink of the daemon's own session (Registry::OpenSession with the daemon's pid,
// uid and gid): TensorImport::Open checks every header first, each tensor gets an allocation
// in the entry's pool (CPU pools only), the daemon maps the allocations' segments read-write
// (GrantSegment), the file is read straight into them, and one PublishBatch makes every
// tensor of the entry visible at once, under prefix + its name.
// The session then ends, so whatever an entry that fails had allocated is freed: an entry
// is published whole or not at all. The session counts against session_quota like any
// other.
//
// Thread-safe: Stop may be called from any thread but the preloader's own (its callbacks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <thread>
#include <vector>

#include "config.h"
#include "hurray/error.h"
#include "pool/pool_set.h"
#include "registry/registry.h"

namespace hurray::daemon {

// What one entry brought in.
struct PreloadSummary {
  std::size_t tensors = 0;
  std::uint64_t bytes = 0;
};

// Imports `entry` now, on the calling thread (see Preloader). Each error names the file's
// path: NOT_FOUND for an unknown pool, FAILED_PRECONDITION for one that is not a CPU pool
// (both before the file is opened); the errors of TensorImport::Open (those of
// TensorFile::Open, naming file, tensor and field; INVALID_ARGUMENT for a file of no
// tensors, or naming a tensor whose prefixed name is not a tensor name, before anything is
// allocated) and of TensorImport::Run (the errors of Allocate, naming the tensor, of the
// read and of PublishBatch); CANCELLED when `stop` is requested before the tensors are
// published. On every error nothing is published and nothing stays allocated.
[[nodiscard]] Result<PreloadSummary> PreloadFile(Registry& registry, const PoolSet& pools,
                                                 const Config::Preload& entry,
                                                 const std::stop_token& stop = {});

class Preloader {
 public:
  struct Callbacks {
    // Before entry `index` (of `count`) is imported.
    std::function<void(const Config::Preload& entry, std::size_t index, std::size_t count)> loading;
    // Once every entry is in (or skipped: required = false, logged as a warning), or with
    // the error of the first required entry that failed (logged; the entries after it are
    // not imported). Not called after Stop.
    std::function<void(Status)> done;
  };

  // Starts importing `entries` in order on a new thread. `registry` and `pools` must
  // outlive the preloader. RESOURCE_EXHAUSTED when the thread cannot be started.
  [[nodiscard]] static Result<std::unique_ptr<Preloader>> Start(
      Registry& registry, const PoolSet& pools, std::vector<Config::Preload> entries,
      Callbacks callbacks);

  // Stop().
  ~Preloader();
  Preloader(const Preloader&) = delete;
  Preloader& operator=(const Preloader&) = delete;

  // Ends the import in progress between reads (it publishes nothing and frees what it
  // allocated; entries already in stay published), skips the rest, and waits for the thread.
  // Idempotent.
  void Stop();

 private:
  Preloader(Registry& registry, const PoolSet& pools, std::vector<Config::Preload> entries,
            Callbacks callbacks);
  // The thread: every entry, then callbacks_.done.
  void Run(const std::stop_token& stop);

  Registry& registry_;
  const PoolSet& pools_;
  const std::vector<Config::Preload> entries_;
  const Callbacks callbacks_;
  std::jthread thread_;
};

}  // namespace hurray::daemon
