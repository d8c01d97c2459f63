#include "pool/cpu_pool.h"

#include <fmt/format.h>
#include <linux/magic.h>
#include <spdlog/spdlog.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <system_error>
#include <utility>

#include "hurray/checked_math.h"
#include "hurray/ipc/errno_error.h"
#include "pool/segment_place.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kMinPageSize = 4096;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// OK when `backing` can back a pool: a resolved mode, a page size, and for explicit huge
// pages a hugetlbfs mount of that page size.
Status ValidateBacking(const HugePageBacking& backing, const std::string& where) {
  if (backing.mode == HugePages::kAuto) {
    return InvalidArgumentError(
        fmt::format("{}huge_pages auto is not a backing: choose one first", where));
  }
  if (backing.mode == HugePages::kOff) return {};
  if (backing.page_size < kMinPageSize || !std::has_single_bit(backing.page_size)) {
    return InvalidArgumentError(
        fmt::format("{}huge page size {} is not a power of two of at least {}", where,
                    backing.page_size, kMinPageSize));
  }
  if (backing.mode != HugePages::kExplicit) return {};
  const std::string& directory = backing.hugetlbfs_directory;
  if (directory.empty()) {
    return InvalidArgumentError(
        fmt::format("{}huge_pages explicit: hugetlbfs_directory is empty", where));
  }
  struct statfs file_system{};
  if (::statfs(directory.c_str(), &file_system) != 0) {
    return FailedPreconditionError(fmt::format("{}huge_pages explicit: {}", where,
                                               ErrnoError("statfs", directory, errno).message()));
  }
  if (static_cast<std::uint64_t>(file_system.f_type) != HUGETLBFS_MAGIC) {
    return FailedPreconditionError(
        fmt::format("{}huge_pages explicit: {} is not a hugetlbfs mount", where, directory));
  }
  if (static_cast<std::uint64_t>(file_system.f_bsize) != backing.page_size) {
    return FailedPreconditionError(
        fmt::format("{}huge_pages explicit: {} has pages of {} bytes, not {}", where, directory,
                    static_cast<std::uint64_t>(file_system.f_bsize), backing.page_size));
  }
  return {};
}

// How a pool's capacity is cut into segments.
struct SegmentPlan {
  std::uint64_t capacity = 0;       // Bytes, a multiple of the page size.
  std::uint64_t segment_bytes = 0;  // Of every segment but perhaps the last.
  std::uint64_t segment_count = 0;
};

// Whether ids from options.first_segment_id leave room for `segment_count` segments.
Status CheckFirstSegmentId(const CpuPool::Options& options, std::uint64_t segment_count,
                           const std::string& where) {
  if (options.first_segment_id == 0 ||
      options.first_segment_id > UINT64_MAX - (segment_count - 1)) {
    return InvalidArgumentError(
        fmt::format("{}first_segment_id {} leaves no room for {} segment ids above 0", where,
                    options.first_segment_id, segment_count));
  }
  return {};
}

// Checks `options` (already resolved to their page size) and cuts the capacity into
// segments. `where` ("pool cpu: ") begins every message.
Result<SegmentPlan> PlanSegments(const CpuPool::Options& options, const std::string& where) {
  if (options.capacity_bytes == 0) {
    return InvalidArgumentError(fmt::format("{}capacity 0: the capacity must be above 0", where));
  }
  const std::optional<std::uint64_t> capacity =
      internal::CheckedRoundUp(options.capacity_bytes, options.page_size);
  if (!capacity) {
    return InvalidArgumentError(
        fmt::format("{}capacity {} overflows when rounded up to page_size {}", where,
                    options.capacity_bytes, options.page_size));
  }
  SegmentPlan plan{.capacity = *capacity, .segment_bytes = *capacity};
  if (options.segment_bytes != 0) {
    const std::optional<std::uint64_t> rounded =
        internal::CheckedRoundUp(options.segment_bytes, options.page_size);
    if (!rounded || *rounded > plan.capacity) {
      return InvalidArgumentError(fmt::format("{}segment_size {} exceeds capacity {}", where,
                                              options.segment_bytes, plan.capacity));
    }
    plan.segment_bytes = *rounded;
  }
  plan.segment_count = internal::CeilDiv(plan.capacity, plan.segment_bytes);
  if (plan.segment_count > CpuPool::kMaxSegments) {
    return InvalidArgumentError(fmt::format(
        "{}segment_size {} makes {} segments of capacity {}, above the maximum {}", where,
        plan.segment_bytes, plan.segment_count, plan.capacity, CpuPool::kMaxSegments));
  }
  HURRAY_RETURN_IF_ERROR(CheckFirstSegmentId(options, plan.segment_count, where));
  return plan;
}

// An explicit huge-page pool that runs out says how many huge pages are free.
Error WithHugePagesFree(Error error, HugePages mode) {
  if (mode != HugePages::kExplicit || error.code() != StatusCode::kResourceExhausted) {
    return error;
  }
  const std::optional<std::uint64_t> free =
      MeminfoValue(ReadHostHugePageFacts().meminfo, "HugePages_Free");
  const std::string free_pages = free ? fmt::to_string(*free) : "unknown";
  return {error.code(), fmt::format("{} (HugePages_Free is {} now)", error.message(), free_pages)};
}

// RESOURCE_EXHAUSTED when /dev/shm has less space free than `capacity` (a huge-page pool's
// room ChooseHugePages checked): such a pool could never be reserved in full.
Status CheckShmRoom(const CpuPool::Options& options, std::uint64_t capacity,
                    const std::string& where) {
  if (options.huge_pages.mode == HugePages::kExplicit) return {};
  struct statvfs shm{};
  if (::statvfs(kShmDirectory, &shm) != 0) return {};  // Reserving will say what is wrong.
  const std::uint64_t free = static_cast<std::uint64_t>(shm.f_bavail) * shm.f_frsize;
  if (capacity <= free) return {};
  return ResourceExhaustedError(
      fmt::format("{}cannot reserve {} bytes of shared memory: /dev/shm has {} bytes free "
                  "(No space left on device)",
                  where, capacity, free));
}

// The segment sizes of the plan, in id order.
std::vector<std::uint64_t> SegmentSizes(const SegmentPlan& plan) {
  std::vector<std::uint64_t> sizes;
  sizes.reserve(plan.segment_count);
  for (std::uint64_t index = 0; index < plan.segment_count; ++index) {
    sizes.push_back(std::min(plan.segment_bytes, plan.capacity - index * plan.segment_bytes));
  }
  return sizes;
}

// The plan's segments, all or none: those created before a failure are removed as the
// vector goes. Their names go to options.before_create first. No page is reserved yet.
Result<std::vector<ShmSegment>> CreateSegments(const CpuPool::Options& options,
                                               const SegmentPlan& plan, const std::string& where) {
  const std::vector<std::uint64_t> sizes = SegmentSizes(plan);
  std::vector<std::string> names;
  std::vector<SegmentFile> files;
  for (const std::uint64_t size : sizes) {
    HURRAY_ASSIGN_OR_RETURN(std::string name, ShmSegment::NewName(options.shm_prefix));
    files.push_back({.path = ShmSegment::PathFor(name, options.huge_pages), .size = size});
    names.push_back(std::move(name));
  }
  if (options.before_create) HURRAY_RETURN_IF_ERROR(options.before_create(files));
  std::vector<ShmSegment> segments;
  segments.reserve(plan.segment_count);
  for (std::size_t index = 0; index < sizes.size(); ++index) {
    Result<ShmSegment> segment =
        ShmSegment::CreateNamed(std::move(names[index]), sizes[index], options.huge_pages);
    if (!segment) {
      return std::unexpected(segment.error().WithContext(
          fmt::format("{}segment {}", where, options.first_segment_id + index)));
    }
    segments.push_back(std::move(*segment));
  }
  return segments;
}

// The plan of options.adopt_segments: their sizes, as the earlier daemon made them.
Result<SegmentPlan> AdoptedPlan(const CpuPool::Options& options, const std::string& where) {
  const std::vector<SegmentFile>& files = options.adopt_segments;
  if (files.size() > CpuPool::kMaxSegments) {
    return FailedPreconditionError(fmt::format("{}cannot adopt {} segments: at most {}", where,
                                               files.size(), CpuPool::kMaxSegments));
  }
  SegmentPlan plan{.segment_count = files.size()};
  for (const SegmentFile& file : files) {
    if (file.size == 0 || file.size % options.page_size != 0 ||
        file.size > UINT64_MAX - plan.capacity) {
      return FailedPreconditionError(
          fmt::format("{}cannot adopt segment {} of {} bytes: not a whole number of {}-byte pages",
                      where, BoundedExcerpt(file.path), file.size, options.page_size));
    }
    plan.capacity += file.size;
    plan.segment_bytes = std::max(plan.segment_bytes, file.size);
  }
  HURRAY_RETURN_IF_ERROR(CheckFirstSegmentId(options, plan.segment_count, where));
  return plan;
}

// The segments of options.adopt_segments. On failure the segments taken so far are kept
// (not removed): they are the caller's to remove.
Result<std::vector<ShmSegment>> AdoptSegments(const CpuPool::Options& options,
                                              const std::string& where) {
  std::vector<ShmSegment> segments;
  for (std::size_t index = 0; index < options.adopt_segments.size(); ++index) {
    const SegmentFile& file = options.adopt_segments[index];
    Result<ShmSegment> segment = ShmSegment::Adopt(file.path, file.size, options.huge_pages);
    if (!segment) {
      for (ShmSegment& taken : segments) taken.Keep();
      return std::unexpected(segment.error().WithContext(
          fmt::format("{}segment {}", where, options.first_segment_id + index)));
    }
    segments.push_back(std::move(*segment));
  }
  return segments;
}

// The threads a reservation of `segment_count` segments runs on.
std::uint32_t ReserveThreads(std::uint32_t requested, std::size_t segment_count) {
  std::uint32_t threads = requested;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency() / 4);
  return static_cast<std::uint32_t>(std::min<std::size_t>(threads, segment_count));
}

}  // namespace

Result<std::unique_ptr<CpuPool>> CpuPool::Create(Options options) {
  if (options.name.empty()) return InvalidArgumentError("name: the pool name is empty");
  const std::string where = fmt::format("pool {}: ", options.name);
  if (options.page_size < kMinPageSize || !std::has_single_bit(options.page_size)) {
    return InvalidArgumentError(fmt::format("{}page_size {} is not a power of two of at least {}",
                                            where, options.page_size, kMinPageSize));
  }
  if (Status prefix = ShmSegment::ValidatePrefix(options.shm_prefix); !prefix) {
    return std::unexpected(prefix.error().WithContext(fmt::format("pool {}", options.name)));
  }
  HURRAY_RETURN_IF_ERROR(ValidateBacking(options.huge_pages, where));
  // Both are powers of two: the larger is a multiple of the huge page size, so every range
  // and every segment covers whole huge pages.
  if (options.huge_pages.mode != HugePages::kOff) {
    options.page_size = std::max(options.page_size, options.huge_pages.page_size);
  }
  const bool adopting = !options.adopt_segments.empty();
  HURRAY_ASSIGN_OR_RETURN(const SegmentPlan plan,
                          adopting ? AdoptedPlan(options, where) : PlanSegments(options, where));
  if (options.reserve_chunk_bytes == 0) {
    return InvalidArgumentError(fmt::format("{}reserve_chunk_bytes 0: must be above 0", where));
  }
  if (!adopting) HURRAY_RETURN_IF_ERROR(CheckShmRoom(options, plan.capacity, where));
  HURRAY_ASSIGN_OR_RETURN(
      std::vector<ShmSegment> segments,
      adopting ? AdoptSegments(options, where) : CreateSegments(options, plan, where));
  // An adopted segment's ranges may lie anywhere in it: all of it is usable from the start.
  const std::uint64_t reserve_at_create =
      adopting ? plan.capacity : options.reserve_at_create_bytes;
  std::unique_ptr<CpuPool> pool(
      new CpuPool(std::move(options), plan.capacity, std::move(segments)));
  if (Status reserved = pool->ReserveAtCreate(reserve_at_create); !reserved) {
    return std::unexpected(WithHugePagesFree(reserved.error(), pool->huge_pages_));
  }
  return pool;
}

CpuPool::CpuPool(Options options, std::uint64_t capacity, std::vector<ShmSegment> segments)
    : name_(std::move(options.name)),
      page_size_(options.page_size),
      huge_pages_(options.huge_pages.mode),
      capacity_(capacity),
      first_segment_id_(options.first_segment_id),
      max_segment_bytes_(std::ranges::max_element(segments, {}, &ShmSegment::size)->size()),
      adopted_(!options.adopt_segments.empty()),
      segments_(std::move(segments)),
      reserve_chunk_bytes_(
          internal::CheckedRoundUp(options.reserve_chunk_bytes, page_size_).value_or(page_size_)),
      reserve_threads_(ReserveThreads(options.reserve_threads, segments_.size())),
      reserve_step_(options.reserve_step
                        ? std::move(options.reserve_step)
                        : [](const ShmSegment& segment, std::uint64_t offset,
                             std::uint64_t length) { return segment.Reserve(offset, length); }),
      reserving_(true) {
  allocators_.reserve(segments_.size());
  for (const ShmSegment& segment : segments_) {
    allocators_.emplace_back(segment.size(), page_size_, /*usable_bytes=*/0);
  }
}

CpuPool::~CpuPool() { StopReserving(); }

Status CpuPool::ReserveAtCreate(std::uint64_t bytes) {
  for (std::size_t index = 0; index < segments_.size() && bytes > 0; ++index) {
    const std::uint64_t end = std::min(bytes, segments_[index].size());
    if (Status reserved = ReserveSegment(index, end, std::stop_token()); !reserved) {
      return std::unexpected(reserved.error().WithContext(
          fmt::format("pool {}: segment {}", name_, first_segment_id_ + index)));
    }
    bytes -= end;
  }
  const std::lock_guard lock(mutex_);
  reserving_ = reserved_bytes_ < capacity_;
  return {};
}

Status CpuPool::StartReserving(ReserveCallbacks callbacks) {
  callbacks_ = std::move(callbacks);
  active_reservers_ = reserve_threads_;
  try {
    for (std::uint32_t i = 0; i < reserve_threads_; ++i) {
      reservers_.emplace_back([this](const std::stop_token& stop) { ReserveSegments(stop); });
    }
  } catch (const std::system_error& error) {
    StopReserving();
    return ResourceExhaustedError(
        fmt::format("pool {}: cannot start a reserving thread: {}", name_, error.what()));
  }
  return {};
}

void CpuPool::StopReserving() {
  for (std::jthread& thread : reservers_) thread.request_stop();
  for (std::jthread& thread : reservers_) {
    if (thread.joinable()) thread.join();
  }
  reservers_.clear();
}

bool CpuPool::reserving() const {
  const std::lock_guard lock(mutex_);
  return reserving_;
}

void CpuPool::ReserveSegments(const std::stop_token& stop) {
  while (!stop.stop_requested() && !reserve_failed_) {
    const std::size_t index = next_segment_++;
    if (index >= segments_.size()) break;
    if (Status reserved = ReserveSegment(index, segments_[index].size(), stop); !reserved) {
      RecordFailure(reserved.error().WithContext(
          fmt::format("pool {}: segment {}", name_, first_segment_id_ + index)));
    }
  }
  if (--active_reservers_ == 0) FinishReserving(stop);
}

Status CpuPool::ReserveSegment(std::size_t index, std::uint64_t end, const std::stop_token& stop) {
  const ShmSegment& segment = segments_[index];
  std::uint64_t offset = 0;
  {
    const std::lock_guard lock(mutex_);
    offset = allocators_[index].usable_bytes();
  }
  while (offset < end) {
    if (stop.stop_requested() || reserve_failed_) return {};
    const std::uint64_t length = std::min(reserve_chunk_bytes_, segment.size() - offset);
    HURRAY_RETURN_IF_ERROR(reserve_step_(segment, offset, length));
    offset += length;
    std::uint64_t reserved = 0;
    {
      const std::lock_guard lock(mutex_);
      allocators_[index].Extend(offset);
      reserved = reserved_bytes_ += length;
    }
    if (callbacks_.progress) {
      const std::lock_guard lock(progress_mutex_);
      callbacks_.progress(reserved, capacity_);
    }
  }
  return {};
}

void CpuPool::RecordFailure(Error error) {
  error = WithHugePagesFree(std::move(error), huge_pages_);
  reserve_failed_ = true;
  const std::lock_guard lock(mutex_);
  if (reserve_failure_) return;
  spdlog::error(
      "pool {}: reserving its memory stopped at {} reserved ({} of {} bytes): {}; the pool "
      "serves with the reserved part",
      name_, FormatPartOf(reserved_bytes_, capacity_), reserved_bytes_, capacity_, error.message());
  reserve_failure_ = std::move(error);
}

void CpuPool::FinishReserving(const std::stop_token& stop) {
  Status status;
  {
    const std::lock_guard lock(mutex_);
    reserving_ = false;
    if (reserve_failure_) status = std::unexpected(*reserve_failure_);
  }
  if (!stop.stop_requested() && callbacks_.done) callbacks_.done(std::move(status));
}

Error CpuPool::StillReservingErrorLocked() const {
  return {StatusCode::kUnavailable,
          fmt::format("pool {} is still reserving its memory: {} reserved ({} of {} "
                      "bytes); retry",
                      name_, FormatPartOf(reserved_bytes_, capacity_), reserved_bytes_, capacity_)};
}

std::optional<std::size_t> CpuPool::IndexOf(std::uint64_t segment_id) const {
  if (segment_id < first_segment_id_ || segment_id - first_segment_id_ >= segments_.size()) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(segment_id - first_segment_id_);
}

Result<PoolRange> CpuPool::Allocate(std::uint64_t byte_size) {
  if (byte_size == 0) {
    return InvalidArgumentError(
        fmt::format("pool {}: byte_size 0: a range needs at least 1 byte", name_));
  }
  if (byte_size > max_segment_bytes_) {
    return ResourceExhaustedError(fmt::format("pool {}: byte_size {} exceeds the segment size {}",
                                              name_, byte_size, max_segment_bytes_));
  }
  std::uint64_t largest_free = 0;
  std::uint64_t free_total = 0;
  {
    const std::lock_guard lock(mutex_);
    for (std::size_t index = 0; index < allocators_.size(); ++index) {
      if (const std::optional<std::uint64_t> offset = allocators_[index].Allocate(byte_size)) {
        return PoolRange{
            .segment_id = first_segment_id_ + index, .offset = *offset, .size = byte_size};
      }
    }
    if (reserving_) return std::unexpected(StillReservingErrorLocked());
    for (const RangeAllocator& allocator : allocators_) {
      largest_free = std::max(largest_free, allocator.largest_free_range());
      free_total += allocator.free_bytes();
    }
  }
  // byte_size <= max_segment_bytes_, a multiple of the page size: rounding cannot overflow.
  const std::uint64_t rounded =
      internal::CheckedRoundUp(byte_size, page_size_).value_or(max_segment_bytes_);
  return ResourceExhaustedError(fmt::format(
      "pool {}: no free range of {} bytes{} (largest free range {} of {} free)", name_, rounded,
      rounded != byte_size ? fmt::format(" for byte_size {}", byte_size) : std::string(),
      largest_free, free_total));
}

void CpuPool::Free(const PoolRange& range) {
  if (range.segment_id == 0) return;  // An empty buffer: nothing was allocated.
  const std::optional<std::size_t> index = IndexOf(range.segment_id);
  bool freed = false;
  if (index) {
    const std::lock_guard lock(mutex_);
    freed = allocators_[*index].Free(range.offset, range.size);
  }
  if (!freed) {
    // A bug of the caller (double free, a range of another pool); the free list is intact.
    spdlog::error("pool {}: ignored Free of segment {} offset {} size {}: {}", name_,
                  range.segment_id, range.offset, range.size,
                  index ? "not a live allocation" : "no such segment in this pool");
  }
}

Status CpuPool::Adopt(const PoolRange& range) {
  if (!adopted_) {
    return FailedPreconditionError(
        fmt::format("pool {}: its segments are new: the earlier daemon's memory is gone", name_));
  }
  const std::optional<std::size_t> index = IndexOf(range.segment_id);
  std::lock_guard lock(mutex_);
  // Free ranges lie only in the reserved part: a claimed range is reserved.
  if (!index || !allocators_[*index].Claim(range.offset, range.size)) {
    return FailedPreconditionError(
        fmt::format("pool {}: segment {} offset {} size {} is not a free range of the pool", name_,
                    range.segment_id, range.offset, range.size));
  }
  return {};
}

std::vector<SegmentFile> CpuPool::SegmentFiles() const {
  std::vector<SegmentFile> files;
  files.reserve(segments_.size());
  for (const ShmSegment& segment : segments_) {
    files.push_back({.path = segment.path(), .size = segment.size()});
  }
  return files;
}

std::uint64_t CpuPool::KeepSegments() {
  std::uint64_t released = 0;
  std::lock_guard lock(mutex_);
  for (std::size_t index = 0; index < segments_.size(); ++index) {
    for (const auto& [offset, size] : allocators_[index].free_ranges()) {
      if (Status done = segments_[index].Release(offset, size); !done) {
        spdlog::warn("pool {}: segment {}: {}", name_, first_segment_id_ + index,
                     done.error().message());
        continue;
      }
      released += size;
    }
    segments_[index].Keep();
  }
  return released;
}

Result<SegmentAccess> CpuPool::OpenSegment(std::uint64_t segment_id, bool writable) const {
  const std::optional<std::size_t> index = IndexOf(segment_id);
  if (!index) {
    return NotFoundError(fmt::format("segment {} is not in pool {}", segment_id, name_));
  }
  const ShmSegment& segment = segments_[*index];
  Result<UniqueFd> fd = segment.Open(writable);
  if (!fd) {
    return std::unexpected(
        fd.error().WithContext(fmt::format("pool {}: segment {}", name_, segment_id)));
  }
  return SegmentAccess{.fd = std::move(*fd),
                       .segment_size = segment.size(),
                       .writable = writable,
                       .page_size = page_size_};
}

std::optional<std::uint64_t> CpuPool::SegmentSize(std::uint64_t segment_id) const {
  const std::optional<std::size_t> index = IndexOf(segment_id);
  if (!index) return std::nullopt;
  return segments_[*index].size();
}

std::optional<std::string> CpuPool::SegmentName(std::uint64_t segment_id) const {
  const std::optional<std::size_t> index = IndexOf(segment_id);
  if (!index) return std::nullopt;
  return segments_[*index].name();
}

std::optional<std::string> CpuPool::SegmentPath(std::uint64_t segment_id) const {
  const std::optional<std::size_t> index = IndexOf(segment_id);
  if (!index) return std::nullopt;
  return segments_[*index].path();
}

PoolUsage CpuPool::Usage() const {
  PoolUsage usage{.name = name_,
                  .kind = "cpu",
                  .capacity_bytes = capacity_,
                  .segment_count = segment_count(),
                  .page_size = page_size_,
                  .huge_pages = std::string(HugePagesName(huge_pages_))};
  std::uint64_t free_total = 0;
  {
    const std::lock_guard lock(mutex_);
    usage.reserved_bytes = reserved_bytes_;
    for (const RangeAllocator& allocator : allocators_) {
      usage.used_bytes += allocator.allocated_bytes();
      usage.allocation_count += allocator.allocation_count();
      usage.largest_free_bytes = std::max(usage.largest_free_bytes, allocator.largest_free_range());
      free_total += allocator.free_bytes();
    }
  }
  // A range cannot span segments, so free space split across segments counts as fragmented.
  usage.fragmentation = free_total == 0 ? 0.0
                                        : 1.0 - static_cast<double>(usage.largest_free_bytes) /
                                                    static_cast<double>(free_total);
  return usage;
}

std::string FormatPartOf(std::uint64_t part, std::uint64_t whole) {
  static constexpr std::array<std::string_view, 4> kUnits = {"KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  double scale = 1024.0;
  while (unit + 1 < kUnits.size() && static_cast<double>(whole) >= scale * 1024.0) {
    scale *= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} of {:.1f} {}", static_cast<double>(part) / scale,
                     static_cast<double>(whole) / scale, kUnits[unit]);
}

std::uint64_t DefaultCpuPoolCapacityFor(std::uint64_t physical_ram_bytes,
                                        std::optional<std::uint64_t> shm_free_bytes) {
  constexpr std::uint64_t kMinimum = 64 * kMiB;
  constexpr std::uint64_t kGranule = 2 * kMiB;
  std::uint64_t capacity = physical_ram_bytes / 8;
  if (shm_free_bytes) capacity = std::min(capacity, *shm_free_bytes / 2);
  capacity = std::max(capacity, kMinimum);
  return capacity / kGranule * kGranule;
}

std::uint64_t DefaultCpuPoolCapacity() {
  const std::int64_t pages = ::sysconf(_SC_PHYS_PAGES);
  const std::int64_t page_size = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t physical_ram =
      pages > 0 && page_size > 0
          ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size)
          : 0;
  std::optional<std::uint64_t> shm_free;
  struct statvfs shm_stats{};
  if (::statvfs(kShmDirectory, &shm_stats) == 0) {
    shm_free = static_cast<std::uint64_t>(shm_stats.f_bavail) * shm_stats.f_frsize;
  }
  return DefaultCpuPoolCapacityFor(physical_ram, shm_free);
}

}  // namespace hurray::daemon
