// The parts of hurrayctl's text output rendered from daemon replies that a test checks
// without a daemon (or a GPU): the pool tables of `stats` and `top`, the tensor rows of `ls`
// and `top`, and a tensor's device and handoff in `describe`. Pure functions; thread-safe. Never
// prints a legacy IPC handle: no reply rendered here carries one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/buffer_handle.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::ctl {

// The lower-case name of a hurray.v1.ElementType value ("float32"), or "type N".
[[nodiscard]] std::string ElementTypeLabel(int value);

// Who owns a namespace, as ls -l shows a file's owner: `user` when not empty, else the
// uid's name on this host, else the uid.
[[nodiscard]] std::string OwnerLabel(std::uint32_t uid, std::string_view user);

// The columns of `ls` and `top`'s tensors: NAME VERSION TYPE SHAPE SIZE LEASES PUBLISHED.
[[nodiscard]] std::vector<std::string> TensorColumns();

// One row of TensorColumns for `summary`; PUBLISHED is its age at `now_nanos` ("3m 07s ago").
[[nodiscard]] std::vector<std::string> TensorRow(const v1::TensorSummary& summary,
                                                 std::int64_t now_nanos);

// `stats`' and `top`'s table of every pool: POOL KIND CAPACITY USED LARGEST FREE
// FRAGMENTATION SEGMENTS ALLOCATIONS, each line starting with `indent`.
[[nodiscard]] std::string RenderPoolTable(const v1::StatsResponse& stats, std::string_view indent);

// `stats`' table of CUDA pools, "cuda pools:\n" and one row per pool of kind "cuda": POOL
// GPU (uuid) DEVICE (name, daemon ordinal) MECHANISM SLAB SLAB MAPPINGS (read-only of all)
// FENCES (in use, retired). Empty when the daemon has no CUDA pool.
[[nodiscard]] std::string RenderCudaPools(const v1::StatsResponse& stats);

// `describe`'s "device:" and "handoff:" lines of a tensor whose descriptor declares
// `device_tag`: "device:     cuda" (or "cpu"), and "handoff:    producer_synced", or
// "handoff:    event (fence segment S offset O value V, ready)" ("not ready" when the daemon
// did not see the fence reached).
[[nodiscard]] std::string RenderDeviceAndHandoff(const v1::TensorInfo& tensor,
                                                 DeviceTag device_tag);

// The name of a sync mode byte ("producer-synced", "event"), or "sync mode N".
[[nodiscard]] std::string SyncModeLabel(std::uint32_t value);

}  // namespace hurray::ctl
