// Pool: where tensor buffers live. A pool hands out byte ranges of its segments and passes
// segment file descriptors to clients; the daemon never touches the bytes.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hurray/buffer_handle.h"
#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/pool_name.h"

namespace hurray::daemon {

// A byte range of one segment. segment_id 0 is "no segment" (an empty buffer).
struct PoolRange {
  std::uint64_t segment_id = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;  // Bytes the caller asked for (the pool may reserve more).

  friend bool operator==(const PoolRange&, const PoolRange&) = default;
};

// What a segment is, and so how a client maps it (v1::SegmentKind on the session socket).
enum class SegmentKind : std::uint8_t {
  kShm,            // POSIX shared memory (or a hugetlbfs file): mmap the descriptor.
  kCudaVmm,        // A cuMemCreate slab: import the descriptor on the device.
  kCudaLegacyIpc,  // A cuMemAlloc slab: open legacy_ipc_handle; no descriptor.
  kSealedMemfd,    // One buffer's memfd (SealedPool): mmap the descriptor; never cache it.
};

// Access to a whole segment for a client: a fresh file descriptor for SCM_RIGHTS (for every
// kind but kCudaLegacyIpc), and what the client needs to map it.
struct SegmentAccess {
  UniqueFd fd;
  std::uint64_t segment_size = 0;
  bool writable = false;
  // The pool's page size in bytes (4096, or the huge page size with huge pages): clients
  // advise the kernel to map huge pages (MADV_HUGEPAGE) from 2 MiB on. For CUDA slabs, the
  // device's allocation granularity.
  std::uint64_t page_size = 0;
  SegmentKind kind = SegmentKind::kShm;
  // CUDA slabs: the GPU's UUID ("GPU-<uuid>", "MIG-<uuid>"); empty for kShm.
  std::string device_uuid;
  // kCudaLegacyIpc: the 64 bytes of the cudaIpcMemHandle_t, a capability that travels only
  // on the session socket (never logged); empty otherwise.
  std::string legacy_ipc_handle;
};

// What Stats reports of a pool.
struct PoolUsage {
  std::string name;
  std::string kind;  // "cpu", "cuda" or "sealed".
  std::uint64_t capacity_bytes = 0;
  std::uint64_t used_bytes = 0;  // Reserved by allocations, rounding included.
  std::uint64_t largest_free_bytes = 0;
  double fragmentation = 0.0;  // 1 - largest_free / free; 0 when nothing is free.
  std::uint32_t segment_count = 0;
  std::uint64_t allocation_count = 0;
  std::uint64_t page_size = 0;  // Bytes; the alignment and granule of every allocation.
  std::string huge_pages;       // In effect: "off", "transparent" or "explicit"; "" for cuda.
  // Bytes reserved so far (cpu: fallocate'd, capacity_bytes once done; cuda: the slabs).
  std::uint64_t reserved_bytes = 0;

  // CUDA pools only (empty or 0 for cpu), as PoolStats names them.
  std::string device_uuid;           // "GPU-<uuid>", or "MIG-<uuid>" for a MIG instance.
  std::string device_name;           // "NVIDIA H200".
  std::uint32_t device_ordinal = 0;  // The daemon's CUDA ordinal of the device.
  std::string mechanism;             // "vmm" or "legacy_ipc".
  std::uint64_t slab_bytes = 0;      // Bytes of a slab (a multiple of the granularity).
  bool gpu_direct_rdma = false;      // Slabs are allocated GPUDirect RDMA capable.
};

// Thread-safe: every method may be called from any thread.
class Pool {
 public:
  virtual ~Pool() = default;

  [[nodiscard]] virtual std::string_view name() const = 0;
  // The device tag every buffer in this pool carries (CPU for a CPU pool).
  [[nodiscard]] virtual DeviceTag device_tag() const = 0;
  // Alignment of every range's offset (and of each segment's mapping): 4096, or 2 MiB with
  // huge pages.
  [[nodiscard]] virtual std::uint64_t page_size() const = 0;

  // A range of `byte_size` (> 0) bytes at an offset that is a multiple of page_size().
  // RESOURCE_EXHAUSTED naming the pool, the size and the largest free range when nothing
  // fits; INVALID_ARGUMENT for size 0.
  [[nodiscard]] virtual Result<PoolRange> Allocate(std::uint64_t byte_size) = 0;

  // Returns a range from Allocate. Freeing a range twice, or one never allocated, is a bug
  // of the caller; the pool logs and ignores it rather than corrupt its free list.
  virtual void Free(const PoolRange& range) = 0;

  // Takes `range` as allocated: a range an earlier daemon allocated in the segments this pool
  // adopted from it (journal/), given as Allocate gave it. FAILED_PRECONDITION for a pool
  // whose memory does not outlive its daemon (the default), or a range that is not free.
  [[nodiscard]] virtual Status Adopt(const PoolRange& range);

  // A new descriptor on a segment: read-only (O_RDONLY, the kernel refuses writes through
  // any mapping of it) or read-write. NOT_FOUND for an unknown segment.
  [[nodiscard]] virtual Result<SegmentAccess> OpenSegment(std::uint64_t segment_id,
                                                          bool writable) const = 0;

  // Makes the bytes of `range` immutable before its allocation is published: the registry
  // calls it for every buffer at publish, before committing, and refuses the publish on an
  // error. Pools whose memory cannot be sealed accept it and change nothing (the default).
  [[nodiscard]] virtual Status Seal(const PoolRange& range) {
    static_cast<void>(range);
    return {};
  }

  // Size of a segment, if it belongs to this pool.
  [[nodiscard]] virtual std::optional<std::uint64_t> SegmentSize(
      std::uint64_t segment_id) const = 0;

  [[nodiscard]] virtual PoolUsage Usage() const = 0;
};

inline Status Pool::Adopt(const PoolRange& range) {
  return FailedPreconditionError(
      fmt::format("pool {}: segment {}: its memory did not outlive the daemon that allocated it",
                  name(), range.segment_id));
}

}  // namespace hurray::daemon
