// CudaPool: the pool of one CUDA device's memory that device tensors live in.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "pool/pool.h"
#include "pool/range_allocator.h"
#include "pool/slab_memory.h"

namespace hurray::daemon {

// A Pool over slabs of device memory from a SlabMemory. Slabs are made on demand, when no
// slab has room for a buffer, while the slabs' total stays within the capacity; each is
// sub-allocated with a RangeAllocator of 4096-byte granules (page_size()), best fit inside
// the first slab (in id order) that has room. A slab is slab_bytes, or, for a buffer larger
// than that, a slab of its own of the buffer's size rounded up to the granularity (whose
// tail serves small buffers too); when less than slab_bytes of the capacity is left, the
// last slab takes what is left.
//
// Slab ids count up from Options::first_segment_id and are never reused (a client's cached
// import of a released slab can never be taken for a newer one). A slab with live ranges is
// never released; one that has been empty for idle_slab_release is returned to the device
// by ReleaseIdleSlabs, which the daemon calls from a timer. The daemon never maps a slab;
// clients import what OpenSegment exports. Destroying the pool releases every slab.
//
// Thread-safe: every method may be called from any thread. Calls into the SlabMemory are
// made with the pool's mutex held, so an export never races the release of its slab.
class CudaPool final : public Pool {
 public:
  struct Options {
    std::string name;  // "cuda:0": names the pool in Usage and in messages. Required.
    // Most bytes of all slabs together (at least the SlabMemory's granularity).
    std::uint64_t capacity_bytes = 0;
    // Bytes of a slab (> 0); rounded up to the SlabMemory's granularity.
    std::uint64_t slab_bytes = 0;
    // Id of the first slab (> 0); ids below first_segment_id + 2^32 are the pool's.
    std::uint64_t first_segment_id = 0;
    // How long a slab stays empty before ReleaseIdleSlabs returns it.
    std::chrono::milliseconds idle_slab_release{60'000};
    // The device, for Usage and for clients (SegmentAccess::device_uuid).
    std::string device_uuid;
    std::string device_name;
    std::uint32_t device_ordinal = 0;
  };

  // Page size: the alignment and granule of every range.
  static constexpr std::uint64_t kPageSize = 4096;

  // Validates `options` against `memory` (INVALID_ARGUMENT naming the field and value: an
  // empty name or device_uuid, a capacity below one granule, slab size 0, a granularity that is not
  // a power of two of at least kPageSize, first_segment_id 0). Creates no slab.
  [[nodiscard]] static Result<std::unique_ptr<CudaPool>> Create(Options options,
                                                                std::unique_ptr<SlabMemory> memory);

  CudaPool(const CudaPool&) = delete;
  CudaPool& operator=(const CudaPool&) = delete;
  ~CudaPool() override;

  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] DeviceTag device_tag() const override { return DeviceTag::Cuda(); }
  [[nodiscard]] std::uint64_t page_size() const override { return kPageSize; }

  // INVALID_ARGUMENT for byte_size 0. RESOURCE_EXHAUSTED "pool cuda:0: no room for N bytes:
  // slabs hold H of capacity C, ..." when no slab has room and a new one would exceed the
  // capacity; the SlabMemory's error (RESOURCE_EXHAUSTED when the device is full) when a new
  // slab cannot be made.
  [[nodiscard]] Result<PoolRange> Allocate(std::uint64_t byte_size) override;

  // A range with segment_id 0 is ignored; a range not live in this pool is logged and
  // ignored. A slab left empty starts its idle time.
  void Free(const PoolRange& range) override;

  // The slab's export: kind kCudaVmm with a fresh descriptor, or kCudaLegacyIpc with the
  // handle's bytes (and no descriptor); page_size is the granularity. `writable` is only
  // recorded: device memory carries no access mode, the client maps a read-only grant
  // read-only. NOT_FOUND "segment 7 is not in pool cuda:0" for an unknown or released slab;
  // the SlabMemory's error, naming the pool and slab, when the export fails.
  [[nodiscard]] Result<SegmentAccess> OpenSegment(std::uint64_t segment_id,
                                                  bool writable) const override;

  [[nodiscard]] std::optional<std::uint64_t> SegmentSize(std::uint64_t segment_id) const override;

  // Capacity, used bytes and allocations as for any pool; segment_count is the number of
  // slabs; largest_free_bytes is the largest buffer that fits now (in a slab, or in a new
  // slab of what the capacity has left); fragmentation is of the free space inside slabs.
  [[nodiscard]] PoolUsage Usage() const override;

  // Releases the slabs that have been empty since before `now - idle_slab_release`, but
  // none in `mapped` (slabs a client process still maps: Registry::MappedSlabs), and
  // returns how many. Safe to call at any time, from any thread.
  std::size_t ReleaseIdleSlabs(std::chrono::steady_clock::time_point now,
                               const std::set<std::uint64_t>& mapped = {});

  [[nodiscard]] SlabMechanism mechanism() const { return mechanism_; }
  [[nodiscard]] std::uint64_t slab_bytes() const { return slab_bytes_; }
  [[nodiscard]] std::uint64_t granularity() const { return granularity_; }
  [[nodiscard]] std::chrono::milliseconds idle_slab_release() const { return idle_slab_release_; }

 private:
  struct Slab {
    std::uint64_t handle = 0;  // The SlabMemory's.
    RangeAllocator allocator;
    // Set while the slab has no live range: since when.
    std::optional<std::chrono::steady_clock::time_point> empty_since;
  };

  CudaPool(Options options, std::unique_ptr<SlabMemory> memory, std::uint64_t slab_bytes);

  // A range of `byte_size` in a slab that has room, if any. Requires mutex_.
  [[nodiscard]] std::optional<PoolRange> AllocateInSlabsLocked(std::uint64_t byte_size);
  // A new slab with room for `byte_size`, and a range of it. Requires mutex_.
  [[nodiscard]] Result<PoolRange> AllocateInNewSlabLocked(std::uint64_t byte_size);
  // The RESOURCE_EXHAUSTED of a buffer that fits nowhere. Requires mutex_.
  [[nodiscard]] Error NoRoomLocked(std::uint64_t byte_size, std::uint64_t slab_size) const;
  // The largest range a new slab could hold now. Requires mutex_.
  [[nodiscard]] std::uint64_t NewSlabRoomLocked() const;

  // Immutable after construction: read without the lock.
  const std::string name_;
  const std::string device_uuid_;
  const std::string device_name_;
  const std::uint32_t device_ordinal_;
  const std::uint64_t capacity_;
  const std::uint64_t granularity_;
  const std::uint64_t slab_bytes_;
  const std::uint64_t first_segment_id_;
  const std::chrono::milliseconds idle_slab_release_;
  const SlabMechanism mechanism_;

  mutable std::mutex mutex_;
  // Calls into it are made with mutex_ held.
  const std::unique_ptr<SlabMemory> memory_;
  // The live slabs by id. Guarded by mutex_.
  std::map<std::uint64_t, Slab> slabs_;
  // Bytes of all live slabs. Guarded by mutex_.
  std::uint64_t slab_total_bytes_ = 0;
  // The id the next slab gets. Guarded by mutex_.
  std::uint64_t next_segment_id_;
};

}  // namespace hurray::daemon
