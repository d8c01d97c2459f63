// LeasePage: one session's page of fast-path lease slots (ipc/.../fast_path_layout.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/fast_path_layout.h"
#include "hurray/ipc/shared_mapping.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::daemon::fast_path {

// The layout shared with clients.
using ::hurray::fast_path::kLeasePageBytes;
using ::hurray::fast_path::LeaseSlot;

// A memfd of kLeasePageBytes, sealed against shrinking, growing and further seals before
// any client sees it, so that the daemon's PROT_READ mapping of it can never fault. The
// client gets a read-write descriptor (TakeClientDescriptor) and writes what it likes; the
// daemon only ever reads the first `slot_count` slots, each once per scan, and trusts none
// of them: a value is a version identity or not.
//
// Move-only. Names() may be called from any thread; the rest is not thread-safe.
class LeasePage {
 public:
  // The most slots a page holds.
  static constexpr std::uint32_t kMaxSlots = kLeasePageBytes / sizeof(LeaseSlot);

  // A page of `slot_count` slots (1 to kMaxSlots), all clear. INVALID_ARGUMENT for a bad
  // count; other failures name the failed call.
  [[nodiscard]] static Result<LeasePage> Create(std::uint32_t slot_count);

  // The read-write descriptor for the client; invalid after the first call.
  [[nodiscard]] UniqueFd TakeClientDescriptor() { return std::move(client_fd_); }

  // Whether a slot names `version_id` (not 0).
  [[nodiscard]] bool Names(std::uint64_t version_id) const {
    return ::hurray::fast_path::Names(static_cast<const LeaseSlot*>(mapping_.data()), slot_count_,
                                      version_id);
  }

  // Every slot's value, each read once as Names reads it (0 for a clear slot).
  [[nodiscard]] std::vector<std::uint64_t> Values() const {
    const auto* slots = static_cast<const LeaseSlot*>(mapping_.data());
    std::vector<std::uint64_t> values(slot_count_);
    for (std::uint32_t i = 0; i < slot_count_; ++i) {
      values[i] = slots[i].version_id.load(std::memory_order_seq_cst);
    }
    return values;
  }

  [[nodiscard]] std::uint32_t slot_count() const { return slot_count_; }

 private:
  LeasePage(UniqueFd client_fd, SharedMapping mapping, std::uint32_t slot_count)
      : client_fd_(std::move(client_fd)), mapping_(std::move(mapping)), slot_count_(slot_count) {}

  UniqueFd client_fd_;
  SharedMapping mapping_;  // PROT_READ.
  std::uint32_t slot_count_;
};

}  // namespace hurray::daemon::fast_path
