// What the daemon reports about its tensors and itself, as Client's List, Describe, Stats
// and Watch return it: plain values of the client's own, so that a user needs none of the
// generated protobuf headers. Sizes are in bytes, times are std::chrono types (wall-clock
// times since the Unix epoch in nanoseconds, as the daemon records them). Every reply
// carries the daemon epoch it was answered in, which changes when the daemon restarts.
// Value types; thread-compatible (const access from many threads is safe).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hurray/buffer_handle.h"
#include "hurray/element_type.h"
#include "hurray/tensor_descriptor.h"

namespace hurray {

// A wall-clock time as the daemon records it: nanoseconds since the Unix epoch. The epoch
// itself (zero) stands for "not recorded".
using DaemonTime = std::chrono::sys_time<std::chrono::nanoseconds>;

// One name in a listing, with its latest version.
struct TensorSummary {
  std::string name;
  std::uint64_t latest_version = 0;
  // Live versions of the name: the latest plus superseded ones still leased.
  std::uint32_t version_count = 0;
  ElementType element_type = ElementType::kUint8;
  // Extent of each dimension, in elements.
  std::vector<std::uint64_t> shape;
  // Sum of the latest version's buffer sizes, in bytes.
  std::uint64_t byte_size = 0;
  // Leases held on all versions of the name.
  std::uint64_t lease_count = 0;
  DaemonTime published_at{};
  // The uid owning the name's namespace (its first publisher, under the default policy).
  std::uint32_t owner_uid = 0;

  friend bool operator==(const TensorSummary&, const TensorSummary&) = default;
};

// One page of Client::List: names in name order.
struct TensorListPage {
  std::vector<TensorSummary> tensors;
  // Pass to the next List call to get the next page; empty on the last page.
  std::string next_page_token;
  std::uint64_t daemon_epoch = 0;

  friend bool operator==(const TensorListPage&, const TensorListPage&) = default;
};

// Where one buffer of a published tensor lives: a byte range of a pool segment.
struct BufferLocation {
  // Unique within a daemon epoch.
  std::uint64_t segment_id = 0;
  // Size of the whole segment, in bytes.
  std::uint64_t segment_size = 0;
  // Offset of the buffer's first byte from the start of its segment, in bytes.
  std::uint64_t offset = 0;
  // Size of the buffer in bytes: the descriptor's byte_size for this buffer.
  std::uint64_t byte_size = 0;

  friend bool operator==(const BufferLocation&, const BufferLocation&) = default;
};

// A fence (Event sync mode): one 64-bit word in a daemon's fence segment; the data is ready
// once the word reaches `value` in the GPU's cyclic compare, and lost when it holds the
// poison 2^63 - 1 while the tensor was not ready (see hurray.v1.Fence).
struct FenceLocation {
  // The fence segment; 0 when there is no fence.
  std::uint64_t segment_id = 0;
  // Size of the whole fence segment, in bytes.
  std::uint64_t segment_size = 0;
  // Offset of the fence word in the segment, in bytes; a multiple of 8.
  std::uint64_t offset = 0;
  // The value the word reaches when the data is ready.
  std::uint64_t value = 0;

  friend bool operator==(const FenceLocation&, const FenceLocation&) = default;
};

// One live version of a name.
struct VersionSummary {
  std::uint64_t version = 0;
  std::uint64_t lease_count = 0;
  // True once a newer version was published (or this one deleted): it lives only until its
  // last lease ends.
  bool superseded = false;
  // Sum of the version's buffer sizes, in bytes.
  std::uint64_t byte_size = 0;
  DaemonTime published_at{};

  friend bool operator==(const VersionSummary&, const VersionSummary&) = default;
};

// Client::Describe: one version of a tensor in full, and every live version of its name.
struct TensorDetails {
  std::string name;
  std::uint64_t version = 0;
  TensorDescriptor descriptor;
  // One location per buffer of the descriptor's buffer table, in table order; an empty
  // buffer has byte_size 0 and segment_id 0.
  std::vector<BufferLocation> buffers;
  // When the data may be read.
  SyncMode sync_mode = SyncMode::kProducerSynced;
  // SyncMode::kEvent: the fence that says when (segment_id 0 otherwise).
  FenceLocation fence;
  // SyncMode::kEvent: the daemon saw the fence reached when it answered.
  bool ready = false;
  // The pool the buffers live in.
  std::string pool;
  DaemonTime published_at{};
  // Every live version of the name, oldest first.
  std::vector<VersionSummary> versions;
  std::uint64_t daemon_epoch = 0;
  // The uid owning the name's namespace, and its user name on the daemon's host ("" if none).
  std::uint32_t owner_uid = 0;
  std::string owner_user;

  friend bool operator==(const TensorDetails&, const TensorDetails&) = default;
};

// One memory pool of the daemon.
struct PoolStats {
  std::string name;
  // "cpu" or "cuda".
  std::string kind;
  // Bytes reserved for the pool.
  std::uint64_t capacity_bytes = 0;
  // Bytes in allocations (pending, published or awaiting reclamation).
  std::uint64_t used_bytes = 0;
  // Size of the largest free range, in bytes: the biggest buffer that fits now.
  std::uint64_t largest_free_bytes = 0;
  // 1 - largest_free / free: 0 when all free space is one range.
  double fragmentation = 0;
  std::uint32_t segment_count = 0;
  // Buffers currently allocated.
  std::uint64_t allocation_count = 0;
  // Bytes of one page of the pool: the alignment and granule of every buffer in it.
  std::uint64_t page_size_bytes = 0;
  // Huge pages in effect: "off", "transparent" or "explicit"; empty for pools without
  // pages of their own (cuda).
  std::string huge_pages;

  // CUDA pools only (empty or 0 for cpu).
  // The GPU: "GPU-<uuid>", or "MIG-<uuid>" for a MIG instance. Pool names (cuda:N) follow the
  // daemon's device ordinals; a client finds its own ordinal of the GPU by this UUID.
  std::string device_uuid;
  // The device's name ("NVIDIA H200").
  std::string device_name;
  // The daemon's CUDA ordinal of the device.
  std::uint32_t device_ordinal = 0;
  // How slabs reach clients: "vmm" (file descriptors) or "legacy_ipc" (cudaIpc handles).
  std::string mechanism;
  // Bytes of each slab.
  std::uint64_t slab_bytes = 0;
  // Slabs are allocated GPUDirect RDMA capable: a tensor's memory may be registered with a
  // NIC (devices with CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED).
  bool gpu_direct_rdma = false;
  // Slab mappings sessions reported, and how many of them are read-only.
  std::uint64_t slab_mappings = 0;
  std::uint64_t read_only_slab_mappings = 0;
  // Fence words in use, and words retired for good (their producer ended before signalling).
  std::uint64_t fences_in_use = 0;
  std::uint64_t fences_retired = 0;
  // Bytes, and ranges, held out of use until the process of a session that could still write
  // them has exited (docs/architecture.md, "Failure behaviour"); counted in used_bytes too.
  std::uint64_t quarantined_bytes = 0;
  std::uint64_t quarantined_ranges = 0;
  // Bytes of the pool's memory reserved so far: the CPU pool reserves in the background
  // after the daemon starts, and this reaches capacity_bytes once done (cuda: the slabs).
  std::uint64_t reserved_bytes = 0;
  // Patterns of the tensor names the pool may hold; empty: any.
  std::vector<std::string> namespaces;

  friend bool operator==(const PoolStats&, const PoolStats&) = default;
};

// What one uid holds in the daemon, summed over its sessions (against its [uid_quota]).
struct UidUsage {
  std::uint32_t uid = 0;
  std::uint64_t pending_bytes = 0;    // Of its unpublished allocations.
  std::uint64_t published_bytes = 0;  // Of the versions it published that still hold memory.
  std::uint64_t leases = 0;
  std::uint32_t sessions = 0;

  friend bool operator==(const UidUsage&, const UidUsage&) = default;
};

// The daemon's fast path (Stats): its directory, the sessions' lease pages, and the
// retired versions a lease-page slot keeps.
struct FastPathStats {
  // Directory entries in use (names that have one), and the directory's capacity.
  std::uint64_t directory_entries_used = 0;
  std::uint64_t directory_entries = 0;
  // Lease pages of the live sessions, and their slots in all (each counts as a lease of
  // its session's uid).
  std::uint64_t lease_pages = 0;
  std::uint64_t lease_slots = 0;
  // Superseded or deleted versions kept only because a lease-page slot names them, and
  // their bytes.
  std::uint64_t pinned_versions = 0;
  std::uint64_t pinned_bytes = 0;
  // Since the daemon started: scans of the lease pages, and names published while the
  // directory was full (no fast path for them).
  std::uint64_t scans = 0;
  std::uint64_t refused_names = 0;

  friend bool operator==(const FastPathStats&, const FastPathStats&) = default;
};

// Client::Stats: the daemon's pools, sessions, leases and tensors.
struct DaemonStats {
  std::vector<PoolStats> pools;
  std::uint32_t session_count = 0;
  std::uint64_t lease_count = 0;
  // Published names, and live versions across them.
  std::uint64_t tensor_count = 0;
  std::uint64_t version_count = 0;
  // Allocations not yet published.
  std::uint64_t pending_allocation_count = 0;
  std::uint64_t daemon_epoch = 0;
  // Time since the daemon started, in whole seconds.
  std::chrono::seconds uptime{0};
  // Since the daemon started: bytes of every version published, and of versions returned to
  // their pool (superseded or deleted, after their last lease ended).
  std::uint64_t published_bytes_total = 0;
  std::uint64_t reclaimed_bytes_total = 0;
  // Since the daemon started: sessions that ended, and what they still held then (leases
  // released, unpublished allocations freed, and those allocations' bytes).
  std::uint64_t closed_session_count = 0;
  std::uint64_t closed_session_lease_count = 0;
  std::uint64_t closed_session_allocation_count = 0;
  std::uint64_t closed_session_allocation_bytes = 0;
  // Since the daemon started: evictable versions evicted to make room, and their bytes.
  std::uint64_t evicted_tensor_count = 0;
  std::uint64_t evicted_bytes_total = 0;
  // Each uid that holds something now, by uid.
  std::vector<UidUsage> uids;
  // Since the daemon started: session connections refused at max_sessions or
  // max_sessions_per_uid.
  std::uint64_t refused_connection_count = 0;
  // At this daemon's start: tensors its journal kept that could not be served again (GPU
  // tensors), and tensors served again under the same names and versions.
  std::uint64_t lost_tensor_count = 0;
  std::uint64_t adopted_tensor_count = 0;
  // The fast path (docs/fast-path.md); all 0 when it is off.
  FastPathStats fast_path;
  // Retired versions whose memory stays out of use because clients of an earlier daemon on
  // this state directory may still map them, and their bytes (docs/reliability.md).
  std::uint64_t earlier_epoch_held_versions = 0;
  std::uint64_t earlier_epoch_held_bytes = 0;
  // Ended sessions whose ranges stay held until their process has exited.
  std::uint64_t quarantined_sessions = 0;

  friend bool operator==(const DaemonStats&, const DaemonStats&) = default;
};

// A publish, delete or eviction under a watched prefix (Client::Watch).
struct WatchEvent {
  enum class Kind : std::uint8_t {
    kPublished,  // A new version was published.
    kDeleted,    // A version was deleted.
    kEvicted,    // An evictable version was evicted to make room in its pool.
  };
  Kind kind = Kind::kPublished;
  std::string name;
  std::uint64_t version = 0;
  std::uint64_t daemon_epoch = 0;

  friend bool operator==(const WatchEvent&, const WatchEvent&) = default;
};

}  // namespace hurray
