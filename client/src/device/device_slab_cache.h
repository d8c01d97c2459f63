// DeviceSlabCache: the CUDA slabs this process has mapped, shared by every tensor and view
// of one connection. Pure logic over a DeviceMemoryMapper (tested with a fake).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>

#include "device/device_memory_mapper.h"
#include "hurray/error.h"
#include "session_connection.h"

namespace hurray::client_internal {

class DeviceSlabCache;

// A tensor's hold on a mapped slab: while any reference lives the slab stays mapped. Move-
// only; the cache must outlive it. For one thread at a time.
class SlabReference {
 public:
  SlabReference() = default;
  SlabReference(SlabReference&& other) noexcept { *this = std::move(other); }
  SlabReference& operator=(SlabReference&& other) noexcept;
  ~SlabReference() { Reset(); }

  // The slab's device address (0 for an empty reference) and what was granted.
  [[nodiscard]] DeviceAddress address() const { return slab_.address; }
  [[nodiscard]] const MappedSlab& slab() const { return slab_; }
  [[nodiscard]] explicit operator bool() const { return cache_ != nullptr; }
  void Reset();

 private:
  friend class DeviceSlabCache;
  using Key = std::pair<std::uint64_t, bool>;
  SlabReference(DeviceSlabCache* cache, Key key, MappedSlab slab)
      : cache_(cache), key_(std::move(key)), slab_(std::move(slab)) {}
  DeviceSlabCache* cache_ = nullptr;
  Key key_{0, false};
  MappedSlab slab_;
};

// One import per slab per process, never per tensor: a slab is imported on first use and
// stays mapped while references to it live. Unreferenced slabs stay mapped too, in a least
// recently used order per device, until the bytes mapped on their device exceed the cap
// (max_mapped_device_bytes; 0: the device's memory): then the least recently used
// unreferenced slabs are unmapped first, and a referenced slab never. The destructor
// unmaps everything (the references must be gone by then). Thread-safe: one mutex guards
// the cache; imports, including the grant's round trip, run under it.
class DeviceSlabCache {
 public:
  // Asks the daemon for slab `segment_id` (read-write when `writable`).
  using GrantFunction =
      std::function<Result<client::GrantedSegment>(std::uint64_t segment_id, bool writable)>;
  // Tells the daemon how a slab was mapped, or (`unmapped`) that it was unmapped; its
  // failure is not the mapping's.
  using ReportFunction =
      std::function<void(std::uint64_t segment_id, bool read_only, bool unmapped)>;

  // `idle_unmap`: how long a slab no reference holds stays mapped (for a later acquire to
  // find it), looked at on each Acquire and release; 0: until the cap needs the room.
  DeviceSlabCache(std::unique_ptr<DeviceMemoryMapper> mapper, std::uint64_t max_mapped_device_bytes,
                  GrantFunction grant, ReportFunction report,
                  std::chrono::milliseconds idle_unmap = std::chrono::milliseconds(0));
  ~DeviceSlabCache();
  DeviceSlabCache(const DeviceSlabCache&) = delete;
  DeviceSlabCache& operator=(const DeviceSlabCache&) = delete;

  // A reference to slab `segment_id` of pool `pool` (named in errors), mapped read-write
  // when `writable`, else read-only where the driver allows; a read-only request is also
  // served by a read-write mapping the process already has. On a miss: the grant, the
  // device found by the grant's UUID (FAILED_PRECONDITION "pool <pool>'s GPU <uuid> is not
  // visible to this process (...)"), room made under the cap, the import, then the report.
  // The grant's or the driver's error otherwise, leaving nothing mapped.
  [[nodiscard]] Result<SlabReference> Acquire(std::uint64_t segment_id, bool writable,
                                              std::string_view pool);

  // The cache's epoch is over (the daemon that granted its slabs is gone): unmaps every slab
  // no reference holds now, and each other one as its last reference goes. Nothing is
  // reported: that daemon's sessions are gone.
  void Retire();

  // The mapper the slabs were mapped with (for fences and streams).
  [[nodiscard]] DeviceMemoryMapper& mapper() const { return *mapper_; }

  // For tests and stats: slabs imported since construction, slabs mapped now, and bytes
  // mapped now on device `device_ordinal`.
  [[nodiscard]] std::uint64_t import_count() const;
  [[nodiscard]] std::size_t mapped_slab_count() const;
  [[nodiscard]] std::uint64_t mapped_bytes(int device_ordinal) const;

 private:
  friend class SlabReference;
  using Key = SlabReference::Key;
  struct Entry {
    MappedSlab slab;
    std::uint64_t references = 0;
    // Position in unreferenced_ while `listed` (references is 0), and since when.
    std::list<Key>::iterator unreferenced;
    bool listed = false;
    std::chrono::steady_clock::time_point unreferenced_since;
  };

  void Release(const Key& key);
  Result<SlabReference> ImportLocked(std::uint64_t segment_id, bool writable,
                                     std::string_view pool);
  SlabReference ReferenceLocked(const Key& key, Entry& entry);
  // Unmaps unreferenced slabs of `device_ordinal`, least recently used first, until
  // `incoming` more bytes fit under the device's cap or none is left.
  void MakeRoomLocked(int device_ordinal, std::uint64_t incoming);
  std::uint64_t CapLocked(int device_ordinal);
  // Unmaps unreferenced slabs unreferenced for longer than idle_unmap_.
  void UnmapIdleLocked();
  void UnmapLocked(std::map<Key, Entry>::iterator entry);

  const std::unique_ptr<DeviceMemoryMapper> mapper_;
  const std::uint64_t max_mapped_device_bytes_;
  const GrantFunction grant_;
  const ReportFunction report_;
  const std::chrono::milliseconds idle_unmap_;

  mutable std::mutex mutex_;
  std::map<Key, Entry> entries_;               // Guarded by mutex_.
  std::list<Key> unreferenced_;                // Guarded by mutex_. Most recent first.
  std::map<int, std::uint64_t> mapped_bytes_;  // Guarded by mutex_. Per device.
  std::map<int, std::uint64_t> caps_;          // Guarded by mutex_. Per device.
  std::uint64_t import_count_ = 0;             // Guarded by mutex_.
  bool retired_ = false;                       // Guarded by mutex_.
};

}  // namespace hurray::client_internal
