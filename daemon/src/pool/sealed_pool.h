// SealedPool: CPU tensors whose bytes the kernel keeps immutable once they are published.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"
#include "pool/pool.h"

namespace hurray::daemon {

// Segment ids of the sealed pool start here, above every other pool's and the fence
// tables' (CPU from 1, CUDA pools below 2^56, fences from 2^56 + k * 2^32).
inline constexpr std::uint64_t kFirstSealedSegmentId = std::uint64_t{1} << 60;

// A Pool in which every range is a segment of its own: a memfd (MFD_ALLOW_SEALING, mode
// 0600) made by Allocate, sized to the range rounded up to 4096 bytes, its memory reserved
// (fallocate) so that touching it never raises SIGBUS, and sealed against shrinking and
// growing from the start. Seal adds F_SEAL_WRITE (and F_SEAL_SEAL): from then on no
// descriptor of it, whoever holds it (the producer's own read-write one, or one a process
// of the same uid opens again through /proc/PID/fd/N), can write it, map it writable or
// resize it; OpenSegment grants it read-only only. The kernel refuses F_SEAL_WRITE while a
// writable shared mapping of the memfd exists anywhere: Seal is then FAILED_PRECONDITION,
// and the publish is refused.
//
// Each segment id is used once (ids only grow). The pool's capacity bounds the bytes of
// the live segments (each rounded up to a page); Free closes the daemon's descriptor, and
// the memory returns to the kernel once no client maps the memfd any more. Per-tensor
// access: a descriptor opens one buffer, never a neighbour's.
//
// Thread-safe: every method may be called from any thread.
class SealedPool final : public Pool {
 public:
  struct Options {
    // Names the pool in Usage, in allocation requests and in error messages.
    std::string name = "sealed";
    // Most bytes of live segments (> 0), each counted rounded up to kPageSize.
    std::uint64_t capacity_bytes = 0;
    // Id of the first segment (> 0); the others follow, never reused.
    std::uint64_t first_segment_id = kFirstSealedSegmentId;
    // Most live segments (> 0): each holds one of the daemon's descriptors, so this keeps
    // the pool from taking the descriptors connections need, whatever its capacity.
    std::uint64_t max_segments = 16384;
  };

  static constexpr std::uint64_t kPageSize = 4096;

  // INVALID_ARGUMENT naming the field for capacity_bytes 0 or first_segment_id 0;
  // FAILED_PRECONDITION when the kernel cannot seal memfds (memfd_create or F_ADD_SEALS
  // fails: before Linux 3.17, or refused by a seccomp filter).
  [[nodiscard]] static Result<std::unique_ptr<SealedPool>> Create(Options options);

  SealedPool(const SealedPool&) = delete;
  SealedPool& operator=(const SealedPool&) = delete;
  ~SealedPool() override = default;

  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] DeviceTag device_tag() const override { return DeviceTag::Cpu(); }
  [[nodiscard]] std::uint64_t page_size() const override { return kPageSize; }

  // A new memfd of byte_size rounded up to the page size, at offset 0. INVALID_ARGUMENT for
  // byte_size 0; RESOURCE_EXHAUSTED "pool sealed: N more bytes would exceed its capacity C
  // (U used)", or the memfd_create/fallocate error (ENOMEM, ENOSPC) naming the pool.
  [[nodiscard]] Result<PoolRange> Allocate(std::uint64_t byte_size) override;

  // Closes the range's segment; an unknown segment is logged and ignored.
  void Free(const PoolRange& range) override;

  // A new open file description of the memfd (opened through /proc/self/fd), O_RDONLY or
  // O_RDWR. NOT_FOUND for an unknown segment; FAILED_PRECONDITION for write access to a
  // sealed one.
  [[nodiscard]] Result<SegmentAccess> OpenSegment(std::uint64_t segment_id,
                                                  bool writable) const override;

  // Seals the range's segment with F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL.
  // FAILED_PRECONDITION "segment N still has a writable mapping; unmap it before publishing"
  // when the kernel refuses (EBUSY); NOT_FOUND for an unknown segment. Sealing a sealed
  // segment again is OK.
  [[nodiscard]] Status Seal(const PoolRange& range) override;

  [[nodiscard]] std::optional<std::uint64_t> SegmentSize(std::uint64_t segment_id) const override;

  [[nodiscard]] PoolUsage Usage() const override;

 private:
  struct Segment {
    UniqueFd memfd;
    std::uint64_t size = 0;  // Bytes: the range's size rounded up to kPageSize.
    bool sealed = false;
  };

  explicit SealedPool(Options options);

  // The memfd of a new segment of `size` bytes, reserved and sealed against resizing.
  [[nodiscard]] Result<UniqueFd> CreateMemfd(std::uint64_t size) const;

  const std::string name_;
  const std::uint64_t capacity_;
  const std::uint64_t max_segments_;

  mutable std::mutex mutex_;
  // Live segments by id. Guarded by mutex_, as are the two below.
  std::map<std::uint64_t, Segment> segments_;
  std::uint64_t next_segment_id_;
  std::uint64_t used_bytes_ = 0;  // Sum of segments_' sizes, and of those being made.
  std::uint64_t making_ = 0;      // Segments being made (counted against max_segments_).
};

}  // namespace hurray::daemon
