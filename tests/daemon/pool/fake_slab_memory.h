// FakeSlabMemory: SlabMemory for tests, with memfd files standing in for device memory.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"
#include "pool/slab_memory.h"

namespace hurray::daemon::testing {

// Each slab is a memfd of the slab's size; Export gives a fresh descriptor of it (kVmm) or
// 64 bytes that name it (kLegacyIpc). Failures are injected by the test: Create fails with
// RESOURCE_EXHAUSTED while `create_failures` is above 0 (counting down), Export fails with
// INTERNAL while `fail_exports` holds. Counts what was done, for the test to check.
//
// Thread-safe: every method may be called from any thread; the test reads and sets State
// with State::mutex held.
class FakeSlabMemory final : public SlabMemory {
 public:
  // The state a test sets and reads; shared with the test after the pool owns the fake.
  struct State {
    mutable std::mutex mutex;
    int create_failures = 0;
    bool fail_exports = false;
    std::uint64_t creates = 0;
    std::uint64_t releases = 0;
    std::uint64_t exports = 0;
    std::map<std::uint64_t, UniqueFd> slabs;  // Live slabs: handle -> memfd.
  };

  FakeSlabMemory(State& state, SlabMechanism mechanism, std::uint64_t granularity,
                 bool gpu_direct_rdma = false)
      : state_(state),
        mechanism_(mechanism),
        granularity_(granularity),
        gpu_direct_rdma_(gpu_direct_rdma) {}

  [[nodiscard]] SlabMechanism mechanism() const override { return mechanism_; }
  [[nodiscard]] std::uint64_t granularity() const override { return granularity_; }
  [[nodiscard]] bool gpu_direct_rdma() const override { return gpu_direct_rdma_; }
  // INVALID_ARGUMENT for a size that is 0 or not a multiple of the granularity (a bug of
  // the pool); RESOURCE_EXHAUSTED when a failure was injected.
  [[nodiscard]] Result<std::uint64_t> Create(std::uint64_t bytes) override;
  [[nodiscard]] Result<SlabExport> Export(std::uint64_t handle) const override;
  void Release(std::uint64_t handle) override;

 private:
  State& state_;
  const SlabMechanism mechanism_;
  const std::uint64_t granularity_;
  const bool gpu_direct_rdma_;
  // Handles count up from 1. Guarded by state_.mutex.
  std::uint64_t next_handle_ = 1;
};

}  // namespace hurray::daemon::testing
