#include "pool/cuda_pool.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <utility>

#include "hurray/checked_math.h"

namespace hurray::daemon {
namespace {

// Slab ids of one pool: first_segment_id up to, not including, first_segment_id + 2^32.
constexpr std::uint64_t kMaxSlabIds = std::uint64_t{1} << 32;

Status ValidateOptions(const CudaPool::Options& options, std::uint64_t granularity) {
  if (options.name.empty()) return InvalidArgumentError("name: the pool name is empty");
  const std::string where = fmt::format("pool {}: ", options.name);
  if (options.device_uuid.empty()) {
    return InvalidArgumentError(fmt::format("{}device_uuid is empty", where));
  }
  if (granularity < CudaPool::kPageSize || !std::has_single_bit(granularity)) {
    return InvalidArgumentError(fmt::format("{}granularity {} is not a power of two of at least {}",
                                            where, granularity, CudaPool::kPageSize));
  }
  if (options.capacity_bytes < granularity) {
    return InvalidArgumentError(fmt::format("{}capacity {} is below one slab granule of {}", where,
                                            options.capacity_bytes, granularity));
  }
  if (options.slab_bytes == 0) {
    return InvalidArgumentError(fmt::format("{}slab_size 0: a slab must be above 0", where));
  }
  if (!internal::CheckedRoundUp(options.slab_bytes, granularity)) {
    return InvalidArgumentError(fmt::format("{}slab_size {} overflows when rounded up to {}", where,
                                            options.slab_bytes, granularity));
  }
  if (options.first_segment_id == 0 || options.first_segment_id > UINT64_MAX - kMaxSlabIds) {
    return InvalidArgumentError(fmt::format("{}first_segment_id {} leaves no room for slab ids",
                                            where, options.first_segment_id));
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<CudaPool>> CudaPool::Create(Options options,
                                                   std::unique_ptr<SlabMemory> memory) {
  if (memory == nullptr) return InvalidArgumentError("memory: no SlabMemory");
  const std::uint64_t granularity = memory->granularity();
  HURRAY_RETURN_IF_ERROR(ValidateOptions(options, granularity));
  const std::optional<std::uint64_t> slab_bytes =
      internal::CheckedRoundUp(options.slab_bytes, granularity);
  if (!slab_bytes) {
    return InvalidArgumentError(
        fmt::format("slab_bytes {} rounded up to the granularity {} "
                    "overflows",
                    options.slab_bytes, granularity));
  }
  return std::unique_ptr<CudaPool>(
      new CudaPool(std::move(options), std::move(memory), *slab_bytes));
}

CudaPool::CudaPool(Options options, std::unique_ptr<SlabMemory> memory, std::uint64_t slab_bytes)
    : name_(std::move(options.name)),
      device_uuid_(std::move(options.device_uuid)),
      device_name_(std::move(options.device_name)),
      device_ordinal_(options.device_ordinal),
      capacity_(options.capacity_bytes),
      granularity_(memory->granularity()),
      slab_bytes_(slab_bytes),
      first_segment_id_(options.first_segment_id),
      idle_slab_release_(options.idle_slab_release),
      mechanism_(memory->mechanism()),
      memory_(std::move(memory)),
      next_segment_id_(options.first_segment_id) {}

CudaPool::~CudaPool() {
  const std::lock_guard lock(mutex_);
  for (const auto& [id, slab] : slabs_) memory_->Release(slab.handle);
}

std::optional<PoolRange> CudaPool::AllocateInSlabsLocked(std::uint64_t byte_size) {
  for (auto& [id, slab] : slabs_) {
    if (const std::optional<std::uint64_t> offset = slab.allocator.Allocate(byte_size)) {
      slab.empty_since.reset();
      return PoolRange{.segment_id = id, .offset = *offset, .size = byte_size};
    }
  }
  return std::nullopt;
}

std::uint64_t CudaPool::NewSlabRoomLocked() const {
  const std::uint64_t left = (capacity_ - slab_total_bytes_) / granularity_ * granularity_;
  return next_segment_id_ - first_segment_id_ < kMaxSlabIds ? left : 0;
}

Result<PoolRange> CudaPool::AllocateInNewSlabLocked(std::uint64_t byte_size) {
  const std::optional<std::uint64_t> rounded = internal::CheckedRoundUp(byte_size, granularity_);
  if (!rounded) {
    return ResourceExhaustedError(
        fmt::format("pool {}: {} bytes rounded up to the granularity {} "
                    "overflow",
                    name_, byte_size, granularity_));
  }
  const std::uint64_t needed = *rounded;
  // A large buffer gets a slab of its own; otherwise a full slab, or what the capacity has
  // left when that is less.
  const std::uint64_t room = NewSlabRoomLocked();
  const std::uint64_t size = std::max(needed, std::min(slab_bytes_, room));
  if (size > room) return std::unexpected(NoRoomLocked(byte_size, size));
  Result<std::uint64_t> handle = memory_->Create(size);
  if (!handle) {
    return std::unexpected(
        handle.error().WithContext(fmt::format("pool {}: new slab of {} bytes", name_, size)));
  }
  const std::uint64_t id = next_segment_id_++;
  Slab& slab = slabs_
                   .emplace(id, Slab{.handle = *handle,
                                     .allocator = RangeAllocator(size, kPageSize),
                                     .empty_since = std::nullopt})
                   .first->second;
  slab_total_bytes_ += size;
  spdlog::debug("pool {}: slab {} of {} bytes made{}", name_, id, size,
                size > slab_bytes_ ? " (a buffer larger than a slab)" : "");
  // The slab is at least `needed` bytes and empty: the range fits at offset 0.
  const std::optional<std::uint64_t> offset = slab.allocator.Allocate(byte_size);
  return PoolRange{.segment_id = id, .offset = offset.value_or(0), .size = byte_size};
}

Error CudaPool::NoRoomLocked(std::uint64_t byte_size, std::uint64_t slab_size) const {
  std::uint64_t largest_free = 0;
  for (const auto& [id, slab] : slabs_) {
    largest_free = std::max(largest_free, slab.allocator.largest_free_range());
  }
  return {StatusCode::kResourceExhausted,
          fmt::format("pool {}: no room for {} bytes: no slab has a free range that large "
                      "(largest {}), and a new slab of {} would exceed the capacity {} "
                      "({} in {} slabs)",
                      name_, byte_size, largest_free, slab_size, capacity_, slab_total_bytes_,
                      slabs_.size())};
}

Result<PoolRange> CudaPool::Allocate(std::uint64_t byte_size) {
  if (byte_size == 0) {
    return InvalidArgumentError(
        fmt::format("pool {}: byte_size 0: a range needs at least 1 byte", name_));
  }
  if (byte_size > capacity_ || !internal::CheckedRoundUp(byte_size, granularity_)) {
    return ResourceExhaustedError(
        fmt::format("pool {}: byte_size {} exceeds the capacity {}", name_, byte_size, capacity_));
  }
  const std::lock_guard lock(mutex_);
  if (std::optional<PoolRange> range = AllocateInSlabsLocked(byte_size)) return *range;
  return AllocateInNewSlabLocked(byte_size);
}

void CudaPool::Free(const PoolRange& range) {
  if (range.segment_id == 0) return;  // An empty buffer: nothing was allocated.
  bool known = false;
  bool freed = false;
  {
    const std::lock_guard lock(mutex_);
    const auto found = slabs_.find(range.segment_id);
    if (found != slabs_.end()) {
      known = true;
      Slab& slab = found->second;
      freed = slab.allocator.Free(range.offset, range.size);
      if (freed && slab.allocator.allocation_count() == 0) {
        slab.empty_since = std::chrono::steady_clock::now();
      }
    }
  }
  if (!freed) {
    spdlog::error("pool {}: ignored Free of segment {} offset {} size {}: {}", name_,
                  range.segment_id, range.offset, range.size,
                  known ? "not a live allocation" : "no such slab in this pool");
  }
}

std::size_t CudaPool::ReleaseIdleSlabs(std::chrono::steady_clock::time_point now,
                                       const std::set<std::uint64_t>& mapped) {
  std::size_t released = 0;
  const std::lock_guard lock(mutex_);
  for (auto slab = slabs_.begin(); slab != slabs_.end();) {
    const auto& empty_since = slab->second.empty_since;
    // Only an empty slab has empty_since; the allocation count is checked all the same: a
    // slab with live ranges must never go.
    // A slab a client maps stays: its memory is not freed while mapped, so releasing it
    // would only make the pool count it free and allocate more on the device.
    if (!empty_since || now - *empty_since < idle_slab_release_ ||
        slab->second.allocator.allocation_count() != 0 || mapped.contains(slab->first)) {
      ++slab;
      continue;
    }
    memory_->Release(slab->second.handle);
    slab_total_bytes_ -= slab->second.allocator.total_bytes();
    spdlog::debug(
        "pool {}: slab {} released after {} ms empty", name_, slab->first,
        std::chrono::duration_cast<std::chrono::milliseconds>(now - *empty_since).count());
    slab = slabs_.erase(slab);
    ++released;
  }
  return released;
}

Result<SegmentAccess> CudaPool::OpenSegment(std::uint64_t segment_id, bool writable) const {
  SegmentAccess access{.writable = writable,
                       .page_size = granularity_,
                       .kind = mechanism_ == SlabMechanism::kVmm ? SegmentKind::kCudaVmm
                                                                 : SegmentKind::kCudaLegacyIpc,
                       .device_uuid = device_uuid_};
  Result<SlabExport> exported;
  {
    const std::lock_guard lock(mutex_);
    const auto found = slabs_.find(segment_id);
    if (found == slabs_.end()) {
      return NotFoundError(fmt::format("segment {} is not in pool {}", segment_id, name_));
    }
    access.segment_size = found->second.allocator.total_bytes();
    exported = memory_->Export(found->second.handle);
  }
  if (!exported) {
    return std::unexpected(
        exported.error().WithContext(fmt::format("pool {}: slab {}", name_, segment_id)));
  }
  if (mechanism_ == SlabMechanism::kVmm) {
    access.fd = std::move(exported->fd);
  } else {
    access.legacy_ipc_handle.assign(exported->legacy_ipc_handle.begin(),
                                    exported->legacy_ipc_handle.end());
  }
  return access;
}

std::optional<std::uint64_t> CudaPool::SegmentSize(std::uint64_t segment_id) const {
  const std::lock_guard lock(mutex_);
  const auto found = slabs_.find(segment_id);
  if (found == slabs_.end()) return std::nullopt;
  return found->second.allocator.total_bytes();
}

PoolUsage CudaPool::Usage() const {
  PoolUsage usage{.name = name_,
                  .kind = "cuda",
                  .capacity_bytes = capacity_,
                  .page_size = kPageSize,
                  .huge_pages = "",
                  .device_uuid = device_uuid_,
                  .device_name = device_name_,
                  .device_ordinal = device_ordinal_,
                  .mechanism = std::string(SlabMechanismName(mechanism_)),
                  .slab_bytes = slab_bytes_,
                  .gpu_direct_rdma = memory_->gpu_direct_rdma()};
  std::uint64_t largest_in_slabs = 0;
  std::uint64_t free_in_slabs = 0;
  {
    const std::lock_guard lock(mutex_);
    usage.segment_count = static_cast<std::uint32_t>(slabs_.size());
    usage.reserved_bytes = slabs_.size() * slab_bytes_;
    for (const auto& [id, slab] : slabs_) {
      usage.used_bytes += slab.allocator.allocated_bytes();
      usage.allocation_count += slab.allocator.allocation_count();
      largest_in_slabs = std::max(largest_in_slabs, slab.allocator.largest_free_range());
      free_in_slabs += slab.allocator.free_bytes();
    }
    usage.largest_free_bytes = std::max(largest_in_slabs, NewSlabRoomLocked());
  }
  usage.fragmentation = free_in_slabs == 0 ? 0.0
                                           : 1.0 - static_cast<double>(largest_in_slabs) /
                                                       static_cast<double>(free_in_slabs);
  return usage;
}

}  // namespace hurray::daemon
