#include "device/device_slab_cache.h"

#include <fmt/format.h>

#include <iterator>

namespace hurray::client_internal {

SlabReference& SlabReference::operator=(SlabReference&& other) noexcept {
  if (this != &other) {
    Reset();
    cache_ = std::exchange(other.cache_, nullptr);
    key_ = other.key_;
    slab_ = std::exchange(other.slab_, MappedSlab{});
  }
  return *this;
}

void SlabReference::Reset() {
  if (cache_ == nullptr) return;
  std::exchange(cache_, nullptr)->Release(key_);
  slab_ = MappedSlab{};
}

DeviceSlabCache::DeviceSlabCache(std::unique_ptr<DeviceMemoryMapper> mapper,
                                 std::uint64_t max_mapped_device_bytes, GrantFunction grant,
                                 ReportFunction report, std::chrono::milliseconds idle_unmap)
    : mapper_(std::move(mapper)),
      max_mapped_device_bytes_(max_mapped_device_bytes),
      grant_(std::move(grant)),
      report_(std::move(report)),
      idle_unmap_(idle_unmap) {}

DeviceSlabCache::~DeviceSlabCache() {
  for (auto& [key, entry] : entries_) mapper_->Unmap(entry.slab);
}

Result<SlabReference> DeviceSlabCache::Acquire(std::uint64_t segment_id, bool writable,
                                               std::string_view pool) {
  std::lock_guard lock(mutex_);
  UnmapIdleLocked();
  // A read-write mapping serves reads too: the process already may write the slab.
  for (const bool mapped_writable : {writable, true}) {
    const Key key{segment_id, mapped_writable};
    if (auto found = entries_.find(key); found != entries_.end()) {
      return ReferenceLocked(key, found->second);
    }
  }
  return ImportLocked(segment_id, writable, pool);
}

Result<SlabReference> DeviceSlabCache::ImportLocked(std::uint64_t segment_id, bool writable,
                                                    std::string_view pool) {
  HURRAY_ASSIGN_OR_RETURN(const client::GrantedSegment granted, grant_(segment_id, writable));
  if (granted.kind != v1::SEGMENT_KIND_CUDA_VMM &&
      granted.kind != v1::SEGMENT_KIND_CUDA_LEGACY_IPC) {
    return InternalError(fmt::format("daemon granted segment {} of pool {} as {}, not a CUDA slab",
                                     segment_id, pool, v1::SegmentKind_Name(granted.kind)));
  }
  auto ordinal = mapper_->DeviceOrdinalOf(granted.device_uuid);
  if (!ordinal) {
    return std::unexpected(Error(ordinal.error().code(),
                                 fmt::format("pool {}'s {}", pool, ordinal.error().message())));
  }
  MakeRoomLocked(*ordinal, granted.size);
  HURRAY_ASSIGN_OR_RETURN(MappedSlab slab, mapper_->ImportAndMap(SlabToImport{
                                               .segment_id = segment_id,
                                               .kind = granted.kind,
                                               .fd = granted.fd.get(),
                                               .legacy_ipc_handle = granted.legacy_ipc_handle,
                                               .size = granted.size,
                                               .granularity = granted.page_size,
                                               .device_ordinal = *ordinal,
                                               .read_only = !writable,
                                           }));
  slab.device_uuid = granted.device_uuid;
  ++import_count_;
  mapped_bytes_[slab.device_ordinal] += slab.size;
  const Key key{segment_id, writable};
  auto [entry, inserted] = entries_.emplace(key, Entry{.slab = slab});
  if (report_) report_(segment_id, slab.read_only, /*unmapped=*/false);
  return ReferenceLocked(key, entry->second);
}

SlabReference DeviceSlabCache::ReferenceLocked(const Key& key, Entry& entry) {
  if (entry.references++ == 0 && entry.listed) {
    unreferenced_.erase(entry.unreferenced);
    entry.listed = false;
  }
  return {this, key, entry.slab};
}

void DeviceSlabCache::Release(const Key& key) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(key);
  if (found == entries_.end() || found->second.references == 0) return;
  Entry& entry = found->second;
  if (--entry.references > 0) return;
  if (retired_) {
    UnmapLocked(found);
    return;
  }
  unreferenced_.push_front(key);
  entry.unreferenced = unreferenced_.begin();
  entry.listed = true;
  entry.unreferenced_since = std::chrono::steady_clock::now();
  MakeRoomLocked(entry.slab.device_ordinal, 0);
  UnmapIdleLocked();
}

void DeviceSlabCache::Retire() {
  std::lock_guard lock(mutex_);
  retired_ = true;
  while (!unreferenced_.empty()) UnmapLocked(entries_.find(unreferenced_.back()));
}

void DeviceSlabCache::UnmapIdleLocked() {
  if (idle_unmap_.count() == 0) return;
  const auto now = std::chrono::steady_clock::now();
  // Oldest first: from the back of the list.
  while (!unreferenced_.empty()) {
    auto entry = entries_.find(unreferenced_.back());
    if (now - entry->second.unreferenced_since < idle_unmap_) return;
    UnmapLocked(entry);
  }
}

std::uint64_t DeviceSlabCache::CapLocked(int device_ordinal) {
  if (max_mapped_device_bytes_ != 0) return max_mapped_device_bytes_;
  if (auto found = caps_.find(device_ordinal); found != caps_.end()) return found->second;
  // Without the device's size no slab is ever unmapped early: the driver's own limit holds.
  auto bytes = mapper_->DeviceMemoryBytes(device_ordinal);
  const std::uint64_t cap = bytes ? *bytes : UINT64_MAX;
  caps_.emplace(device_ordinal, cap);
  return cap;
}

void DeviceSlabCache::MakeRoomLocked(int device_ordinal, std::uint64_t incoming) {
  const std::uint64_t cap = CapLocked(device_ordinal);
  // Oldest first: from the back of the list.
  for (auto key = unreferenced_.end(); key != unreferenced_.begin();) {
    const std::uint64_t mapped = mapped_bytes_[device_ordinal];
    if (mapped <= cap && incoming <= cap - mapped) return;
    --key;
    auto entry = entries_.find(*key);
    if (entry->second.slab.device_ordinal != device_ordinal) continue;
    key = std::next(key);  // Stays valid: only the entry's own position is erased.
    UnmapLocked(entry);
  }
}

void DeviceSlabCache::UnmapLocked(std::map<Key, Entry>::iterator entry) {
  mapper_->Unmap(entry->second.slab);
  mapped_bytes_[entry->second.slab.device_ordinal] -= entry->second.slab.size;
  if (entry->second.listed) unreferenced_.erase(entry->second.unreferenced);
  const auto [segment_id, writable] = entry->first;
  entries_.erase(entry);
  // The daemon may release the slab once this process maps it no more (it may also hold a
  // mapping of the other kind).
  if (report_ && !retired_ && !entries_.contains(Key{segment_id, !writable})) {
    report_(segment_id, false, /*unmapped=*/true);
  }
}

std::uint64_t DeviceSlabCache::import_count() const {
  std::lock_guard lock(mutex_);
  return import_count_;
}

std::size_t DeviceSlabCache::mapped_slab_count() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::uint64_t DeviceSlabCache::mapped_bytes(int device_ordinal) const {
  std::lock_guard lock(mutex_);
  auto found = mapped_bytes_.find(device_ordinal);
  return found == mapped_bytes_.end() ? 0 : found->second;
}

}  // namespace hurray::client_internal
