#include "pool/sealed_pool.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon {
namespace {

// Sealed at creation: the size the daemon hands out is the size every client maps.
constexpr int kResizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;
// Added at publish: no more writes, and no seal can be added or taken away after.
constexpr int kPublishSeals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// The name a memfd shows in /proc/PID/maps and /proc/PID/fd ("memfd:hurray-sealed").
constexpr const char* kMemfdName = "hurray-sealed";

// A new open file description of `memfd` with `flags` (O_RDONLY or O_RDWR): unlike dup, it
// has its own access mode, so an O_RDONLY one cannot write or be mapped writable.
Result<UniqueFd> Reopen(int memfd, int flags) {
  const std::string path = fmt::format("/proc/self/fd/{}", memfd);
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd) return ErrnoFailure("open", path, errno);
  return fd;
}

}  // namespace

Result<std::unique_ptr<SealedPool>> SealedPool::Create(Options options) {
  if (options.capacity_bytes == 0) {
    return InvalidArgumentError(
        fmt::format("pool {}: capacity_bytes 0: must be above 0", options.name));
  }
  if (options.first_segment_id == 0) {
    return InvalidArgumentError(
        fmt::format("pool {}: first_segment_id 0: must be above 0", options.name));
  }
  if (options.max_segments == 0) {
    return InvalidArgumentError(
        fmt::format("pool {}: max_segments 0: must be above 0", options.name));
  }
  std::unique_ptr<SealedPool> pool(new SealedPool(std::move(options)));
  // One probe memfd, so that a kernel without sealing stops the start, not the first publish.
  if (auto probe = pool->CreateMemfd(kPageSize); !probe) {
    return FailedPreconditionError(fmt::format("pool {}: this kernel cannot seal memfds: {}",
                                               pool->name_, probe.error().message()));
  }
  return pool;
}

SealedPool::SealedPool(Options options)
    : name_(std::move(options.name)),
      capacity_(options.capacity_bytes),
      max_segments_(options.max_segments),
      next_segment_id_(options.first_segment_id) {}

Result<UniqueFd> SealedPool::CreateMemfd(std::uint64_t size) const {
  UniqueFd memfd(::memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memfd) return ErrnoFailure("memfd_create", kMemfdName, errno);
  // Only the daemon's uid may open it again through /proc before it is sealed.
  if (::fchmod(memfd.get(), S_IRUSR | S_IWUSR) != 0) {
    return ErrnoFailure("fchmod(0600)", kMemfdName, errno);
  }
  if (const int error = ::posix_fallocate(memfd.get(), 0, static_cast<off_t>(size)); error != 0) {
    return std::unexpected(
        ErrnoError("fallocate", fmt::format("{} of {} bytes", kMemfdName, size), error));
  }
  if (::fcntl(memfd.get(), F_ADD_SEALS, kResizeSeals) != 0) {
    return ErrnoFailure("fcntl(F_ADD_SEALS)", kMemfdName, errno);
  }
  return memfd;
}

Result<PoolRange> SealedPool::Allocate(std::uint64_t byte_size) {
  if (byte_size == 0) {
    return InvalidArgumentError(
        fmt::format("pool {}: byte_size 0: a range needs at least 1 byte", name_));
  }
  if (byte_size > capacity_) {
    return ResourceExhaustedError(
        fmt::format("pool {}: byte_size {} exceeds its capacity {}", name_, byte_size, capacity_));
  }
  // Rounded up without overflow: byte_size / kPageSize leaves room for one more page.
  const std::uint64_t size =
      byte_size / kPageSize * kPageSize + (byte_size % kPageSize == 0 ? 0 : kPageSize);
  {
    const std::lock_guard lock(mutex_);
    if (size > capacity_ - used_bytes_) {
      return ResourceExhaustedError(
          fmt::format("pool {}: {} more bytes would exceed its capacity {} ({} used)", name_, size,
                      capacity_, used_bytes_));
    }
    if (segments_.size() + making_ >= max_segments_) {
      return ResourceExhaustedError(fmt::format(
          "pool {}: max_buffers {} live buffers reached (each holds a descriptor of the daemon)",
          name_, max_segments_));
    }
    used_bytes_ += size;  // Both held while the memfd is made outside the lock.
    ++making_;
  }
  Result<UniqueFd> memfd = CreateMemfd(size);
  const std::lock_guard lock(mutex_);
  --making_;
  if (!memfd) {
    used_bytes_ -= size;
    return std::unexpected(memfd.error().WithContext(fmt::format("pool {}", name_)));
  }
  const std::uint64_t segment_id = next_segment_id_++;
  segments_.emplace(segment_id, Segment{.memfd = std::move(*memfd), .size = size});
  return PoolRange{.segment_id = segment_id, .offset = 0, .size = byte_size};
}

void SealedPool::Free(const PoolRange& range) {
  if (range.segment_id == 0) return;  // An empty buffer: nothing was allocated.
  UniqueFd closing;                   // Closed after the lock is let go.
  {
    const std::lock_guard lock(mutex_);
    auto found = segments_.find(range.segment_id);
    if (found != segments_.end() && range.offset == 0) {
      used_bytes_ -= found->second.size;
      closing = std::move(found->second.memfd);
      segments_.erase(found);
      return;
    }
  }
  spdlog::error("pool {}: ignored Free of segment {} offset {} size {}: not a live allocation",
                name_, range.segment_id, range.offset, range.size);
}

Result<SegmentAccess> SealedPool::OpenSegment(std::uint64_t segment_id, bool writable) const {
  // Under the lock: Free must not close (and the kernel reuse) the number being reopened.
  const std::lock_guard lock(mutex_);
  auto found = segments_.find(segment_id);
  if (found == segments_.end()) {
    return NotFoundError(fmt::format("segment {} is not in pool {}", segment_id, name_));
  }
  const Segment& segment = found->second;
  if (writable && segment.sealed) {
    return FailedPreconditionError(fmt::format(
        "pool {}: segment {} is sealed: it can only be opened read-only", name_, segment_id));
  }
  Result<UniqueFd> fd = Reopen(segment.memfd.get(), writable ? O_RDWR : O_RDONLY);
  if (!fd) {
    return std::unexpected(
        fd.error().WithContext(fmt::format("pool {}: segment {}", name_, segment_id)));
  }
  return SegmentAccess{.fd = std::move(*fd),
                       .segment_size = segment.size,
                       .writable = writable,
                       .page_size = kPageSize,
                       .kind = SegmentKind::kSealedMemfd};
}

Status SealedPool::Seal(const PoolRange& range) {
  if (range.segment_id == 0) return {};  // An empty buffer has nothing to seal.
  const std::lock_guard lock(mutex_);
  auto found = segments_.find(range.segment_id);
  if (found == segments_.end()) {
    return NotFoundError(fmt::format("segment {} is not in pool {}", range.segment_id, name_));
  }
  Segment& segment = found->second;
  if (segment.sealed) return {};
  if (::fcntl(segment.memfd.get(), F_ADD_SEALS, kPublishSeals) != 0) {
    if (errno == EBUSY) {
      return FailedPreconditionError(fmt::format(
          "segment {} still has a writable mapping; unmap it before publishing", range.segment_id));
    }
    return std::unexpected(
        ErrnoError("fcntl(F_ADD_SEALS)", fmt::format("segment {}", range.segment_id), errno));
  }
  segment.sealed = true;
  return {};
}

std::optional<std::uint64_t> SealedPool::SegmentSize(std::uint64_t segment_id) const {
  const std::lock_guard lock(mutex_);
  auto found = segments_.find(segment_id);
  if (found == segments_.end()) return std::nullopt;
  return found->second.size;
}

PoolUsage SealedPool::Usage() const {
  const std::lock_guard lock(mutex_);
  return PoolUsage{.name = name_,
                   .kind = "sealed",
                   .capacity_bytes = capacity_,
                   .used_bytes = used_bytes_,
                   .largest_free_bytes = capacity_ - used_bytes_,
                   .fragmentation = 0.0,
                   .segment_count = static_cast<std::uint32_t>(segments_.size()),
                   .allocation_count = segments_.size(),
                   .page_size = kPageSize,
                   .huge_pages = "off",
                   .reserved_bytes = used_bytes_};
}

}  // namespace hurray::daemon
