// The parts of hurrayctl's text output rendered from what the daemon reports (the client's
// values, hurray/inspection.h) that a test checks without a daemon (or a GPU): the pool tables of
// `stats` and `top`, the tensor rows of `ls` and `top`, and a tensor's device and handoff in
// `describe`. Pure functions; thread-safe. Never prints a legacy IPC handle: no reply rendered here
// carries one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/buffer_handle.h"
#include "hurray/inspection.h"

namespace hurray::ctl {

// `time` as hurrayctl_format.h's functions take it: nanoseconds since the Unix epoch.
[[nodiscard]] inline std::int64_t UnixNanos(DaemonTime time) {
  return time.time_since_epoch().count();
}

// Who owns a namespace, as ls -l shows a file's owner: `user` when not empty, else the
// uid's name on this host, else the uid.
[[nodiscard]] std::string OwnerLabel(std::uint32_t uid, std::string_view user);

// The columns of `ls` and `top`'s tensors: NAME VERSION TYPE SHAPE SIZE LEASES PUBLISHED.
[[nodiscard]] std::vector<std::string> TensorColumns();

// One row of TensorColumns for `summary`; PUBLISHED is its age at `now_nanos` ("3m 07s ago").
[[nodiscard]] std::vector<std::string> TensorRow(const TensorSummary& summary,
                                                 std::int64_t now_nanos);

// `stats`' and `top`'s table of every pool: POOL KIND CAPACITY USED LARGEST FREE
// FRAGMENTATION SEGMENTS ALLOCATIONS, each line starting with `indent`.
[[nodiscard]] std::string RenderPoolTable(const DaemonStats& stats, std::string_view indent);

// `stats`' table of CUDA pools, "cuda pools:\n" and one row per pool of kind "cuda": POOL
// GPU (uuid) DEVICE (name, daemon ordinal) MECHANISM SLAB SLAB MAPPINGS (read-only of all)
// FENCES (in use, retired). Empty when the daemon has no CUDA pool.
[[nodiscard]] std::string RenderCudaPools(const DaemonStats& stats);

// `describe`'s "device:" and "handoff:" lines of a tensor: the device its descriptor
// declares, "device:     cuda" (or "cpu"), and "handoff:    producer_synced", or
// "handoff:    event (fence segment S offset O value V, ready)" ("not ready" when the daemon
// did not see the fence reached).
[[nodiscard]] std::string RenderDeviceAndHandoff(const TensorDetails& tensor);

}  // namespace hurray::ctl
