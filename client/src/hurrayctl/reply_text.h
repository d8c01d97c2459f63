// The parts of hurrayctl's text output rendered from daemon replies that a test checks
// without a daemon (or a GPU): the CUDA pools of `stats`, and a tensor's device and handoff
// in `describe`. Pure functions; thread-safe. Never prints a legacy IPC handle: no reply
// rendered here carries one.
#pragma once

#include <cstdint>
#include <string>

#include "hurray/buffer_handle.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::ctl {

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
