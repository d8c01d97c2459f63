// CpuPool: the pool of page-aligned shared memory that CPU tensors live in.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hurray/error.h"
#include "pool/huge_pages.h"
#include "pool/pool.h"
#include "pool/range_allocator.h"
#include "pool/shm_segment.h"

namespace hurray::daemon {

// A segment's file and size, as a journal records them.
struct SegmentFile {
  std::string path;
  std::uint64_t size = 0;
};

// A Pool over one or more ShmSegments — of /dev/shm, or of a hugetlbfs mount with explicit
// huge pages — all created by Create. Segment ids are consecutive
// from Options::first_segment_id, so that pools of one daemon can share one id space.
// Allocate tries the segments in id order and takes the best fitting free range inside the
// first segment that has one; every range starts at a multiple of page_size and reserves its
// size rounded up to page_size.
//
// A pool made of the segments of an earlier daemon (Options::adopt_segments) takes that
// daemon's allocations through Adopt; KeepSegments leaves the segments for the next one.
//
// Only reserved memory (fallocate) is ever handed out, so that no client touching a buffer
// can get SIGBUS. Reserving takes about a second per GB, so Create may reserve only a first
// part (Options::reserve_at_create_bytes) and leave the rest to threads of the pool's own
// (StartReserving), which reserve in chunks from the start of each segment, several
// segments at once: each segment's free space grows as its chunks are reserved. While that
// runs, an allocation that does not fit what is reserved fails with UNAVAILABLE (retry);
// when it fails (a full /dev/shm), the pool keeps and serves what it reserved.
//
// The allocator's bookkeeping lives in the daemon's private memory, never in the segments.
// The daemon keeps no mapping of a segment (with transparent huge pages it maps each one
// only while Create faults its pages in); clients map the descriptors that OpenSegment
// returns. Destroying the pool removes the segments' names (memory that clients still map
// stays valid until they unmap it).
//
// Thread-safe: every method may be called from any thread.
class CpuPool final : public Pool {
 public:
  struct Options {
    // Names the pool in Usage and in error messages.
    std::string name = std::string(kDefaultPoolName);
    // Total bytes of all segments (> 0); rounded up to a multiple of page_size.
    std::uint64_t capacity_bytes = 0;
    // Bytes of each segment, rounded up to page_size; 0: one segment of the whole capacity.
    // The last segment holds what remains when capacity is not a multiple of it. No range
    // can be larger than one segment. At most kMaxSegments segments.
    std::uint64_t segment_bytes = 0;
    // Alignment and granule of every range: a power of two, at least 4096. Raised to
    // huge_pages.page_size when that is larger.
    std::uint64_t page_size = 4096;
    // Segments are named "/<shm_prefix>-<32 random hex digits>"; [A-Za-z0-9._-], 1..200.
    std::string shm_prefix = "hurray";
    // Id of the first segment (> 0; 0 means "no segment"); the others follow in order.
    std::uint64_t first_segment_id = 1;
    // How the segments are backed, as ChooseHugePages chose it (the pool does not check
    // the kernel's transparent huge page policy; ChooseHugePages does). Never mode auto.
    // Explicit: hugetlbfs_directory must be a hugetlbfs mount whose page size is
    // huge_pages.page_size.
    HugePageBacking huge_pages;
    // Bytes Create reserves before it returns, from the start of the first segment on, in
    // whole chunks; StartReserving reserves the rest in the background. All of them unless
    // said otherwise.
    std::uint64_t reserve_at_create_bytes = UINT64_MAX;
    // Bytes reserved per step: a multiple of page_size (rounded up), > 0. Stopping the
    // reservation waits for the steps in progress.
    std::uint64_t reserve_chunk_bytes = std::uint64_t{64} << 20;
    // Segments reserved at once (threads), at most the segment count; 0: one per four
    // hardware threads, at least one.
    std::uint32_t reserve_threads = 0;
    // Reserves bytes [offset, offset + length) of a segment: ShmSegment::Reserve when empty.
    // Called from the reserving threads, each segment by one thread at a time.
    std::function<Status(const ShmSegment& segment, std::uint64_t offset, std::uint64_t length)>
        reserve_step;
    // The files of the segments an earlier daemon left (ShmSegment::Adopt), in segment id
    // order, with the sizes it made them: the pool is made of them instead of new ones,
    // whatever capacity_bytes and segment_bytes would make today (its capacity is their
    // sum), reserved in full at Create, and Adopt takes that daemon's ranges. Each file must
    // be of its size, a multiple of the page size; FAILED_PRECONDITION otherwise.
    std::vector<SegmentFile> adopt_segments;
    // Without adopt_segments: called with the new segments' files before any of them is
    // created (so that a journal names them first); its error stops Create.
    std::function<Status(const std::vector<SegmentFile>& files)> before_create;
  };

  // What StartReserving reports, on its threads.
  struct ReserveCallbacks {
    // After each step, with the bytes reserved so far; one call at a time.
    std::function<void(std::uint64_t reserved_bytes, std::uint64_t capacity_bytes)> progress;
    // Once every segment is reserved (OK), or with the error that ended the reservation
    // early (already logged; the pool serves what it reserved). Not called after
    // StopReserving.
    std::function<void(Status)> done;
  };

  static constexpr std::uint64_t kMaxSegments = 4096;

  // Validates `options` (INVALID_ARGUMENT naming the field and value) and creates every
  // segment. FAILED_PRECONDITION when an explicit backing's directory is not a hugetlbfs
  // mount of its page size; RESOURCE_EXHAUSTED when /dev/shm has less space free than the
  // capacity, or (reserving at Create) the reservation fails, naming HugePages_Free for
  // huge pages; no segment is left behind on any failure.
  [[nodiscard]] static Result<std::unique_ptr<CpuPool>> Create(Options options);

  CpuPool(const CpuPool&) = delete;
  CpuPool& operator=(const CpuPool&) = delete;
  // StopReserving().
  ~CpuPool() override;

  // Starts reserving what Create left unreserved on new threads (done is called at once
  // when nothing is left). Call at most once. RESOURCE_EXHAUSTED when a thread cannot be started
  // (nothing is then reserving).
  [[nodiscard]] Status StartReserving(ReserveCallbacks callbacks);

  // Ends a reservation in progress after the steps under way (the pool keeps what is
  // reserved) and waits for its threads. Idempotent; a no-op when none runs.
  void StopReserving();

  // Whether the reservation has yet to end (complete or fail).
  [[nodiscard]] bool reserving() const;

  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] DeviceTag device_tag() const override { return DeviceTag::Cpu(); }
  [[nodiscard]] std::uint64_t page_size() const override { return page_size_; }

  // INVALID_ARGUMENT for byte_size 0. RESOURCE_EXHAUSTED for a size larger than a segment
  // (it can never fit), and "pool cpu: no free range of N bytes (largest free range M of F
  // free)" when nothing fits now. While the pool is still reserving, an allocation that
  // does not fit what is reserved is UNAVAILABLE: "pool cpu is still reserving its memory:
  // 3.0 of 8.0 GiB reserved (R of C bytes); retry".
  [[nodiscard]] Result<PoolRange> Allocate(std::uint64_t byte_size) override;

  // A range with segment_id 0 (an empty buffer) is ignored. A range of an unknown segment,
  // or not live in it (double free, foreign range), is logged and ignored.
  void Free(const PoolRange& range) override;

  // NOT_FOUND "segment 7 is not in pool cpu" for an unknown id; otherwise errors of
  // shm_open, naming it.
  [[nodiscard]] Result<SegmentAccess> OpenSegment(std::uint64_t segment_id,
                                                  bool writable) const override;

  [[nodiscard]] std::optional<std::uint64_t> SegmentSize(std::uint64_t segment_id) const override;

  // reserved_bytes included.
  [[nodiscard]] PoolUsage Usage() const override;

  // FAILED_PRECONDITION naming the range when it is not free in its segment, or when the
  // pool's segments are new (no earlier daemon's memory is in them).
  [[nodiscard]] Status Adopt(const PoolRange& range) override;

  // The segments' files, in id order.
  [[nodiscard]] std::vector<SegmentFile> SegmentFiles() const;

  // The segments' names stay when the pool goes, for a restarted daemon to adopt; their free
  // ranges are given back first (ShmSegment::Release), so that a stopped daemon leaves in
  // /dev/shm only the pages of its allocations. Returns the bytes given back (a failure is
  // logged and keeps those pages). Call only once no other thread uses the pool (the daemon
  // calls it as it stops).
  std::uint64_t KeepSegments();

  // The name of a segment ("/hurray-0123…"), if it belongs to this pool: its POSIX shm
  // name, or its file's name in the hugetlbfs mount.
  [[nodiscard]] std::optional<std::string> SegmentName(std::uint64_t segment_id) const;
  // The file of a segment ("/dev/shm/hurray-0123…", "/dev/hugepages/hurray-0123…").
  [[nodiscard]] std::optional<std::string> SegmentPath(std::uint64_t segment_id) const;

  // The huge pages in effect: off, transparent or explicit.
  [[nodiscard]] HugePages huge_pages() const { return huge_pages_; }

  [[nodiscard]] std::uint64_t first_segment_id() const { return first_segment_id_; }
  [[nodiscard]] std::uint32_t segment_count() const {
    return static_cast<std::uint32_t>(segments_.size());
  }

 private:
  CpuPool(Options options, std::uint64_t capacity, std::vector<ShmSegment> segments);

  // A reserving thread: takes the next segment not yet begun and reserves it, until none is
  // left, the reservation failed or `stop` is requested; the last thread out ends it.
  void ReserveSegments(const std::stop_token& stop);
  // Create's part: the first `bytes` of the pool, from segment to segment.
  Status ReserveAtCreate(std::uint64_t bytes);
  // Reserves segments_[index] chunk by chunk from the end of its reserved part until it
  // reaches `end` (or a chunk's end beyond it), growing its allocator's free space.
  Status ReserveSegment(std::size_t index, std::uint64_t end, const std::stop_token& stop);
  // Keeps the first failure of the threads, logged once, and stops the other threads.
  void RecordFailure(Error error);
  // The end of the reservation: reserving() false, then callbacks_.done unless stopped.
  void FinishReserving(const std::stop_token& stop);
  // The UNAVAILABLE of an allocation made before the reservation ended. Needs mutex_.
  [[nodiscard]] Error StillReservingErrorLocked() const;

  // The index into segments_ of `segment_id`, if it belongs to this pool.
  [[nodiscard]] std::optional<std::size_t> IndexOf(std::uint64_t segment_id) const;

  // Immutable after construction: read without the lock.
  const std::string name_;
  const std::uint64_t page_size_;
  const HugePages huge_pages_;
  const std::uint64_t capacity_;
  const std::uint64_t first_segment_id_;
  const std::uint64_t max_segment_bytes_;
  const bool adopted_;  // Made of an earlier daemon's segments: Adopt may take ranges.
  // Unchanged after construction but by KeepSegments.
  std::vector<ShmSegment> segments_;

  const std::uint64_t reserve_chunk_bytes_;
  const std::uint32_t reserve_threads_;
  const std::function<Status(const ShmSegment&, std::uint64_t, std::uint64_t)> reserve_step_;

  mutable std::mutex mutex_;
  // allocators_[i] keeps the byte space of segments_[i]; only its reserved prefix is
  // usable. Guarded by mutex_, as are the three below.
  std::vector<RangeAllocator> allocators_;
  std::uint64_t reserved_bytes_ = 0;
  bool reserving_ = false;
  std::optional<Error> reserve_failure_;

  // The reservation's threads' shared state.
  ReserveCallbacks callbacks_;  // Set before the threads start.
  std::mutex progress_mutex_;   // One progress call at a time.
  std::atomic<std::size_t> next_segment_ = 0;
  std::atomic<std::uint32_t> active_reservers_ = 0;
  std::atomic<bool> reserve_failed_ = false;
  // Last: joined (by the destructor's StopReserving) before anything above goes.
  std::vector<std::jthread> reservers_;
};

// "3.0 of 8.0 GiB": `part` and `whole` in the unit (KiB, MiB, GiB, TiB) that suits `whole`,
// one decimal; for messages and systemd's STATUS=.
[[nodiscard]] std::string FormatPartOf(std::uint64_t part, std::uint64_t whole);

// The capacity of the CPU pool when the configuration gives none: 1/8 of physical RAM,
// capped at half of the space free in /dev/shm (so the pool leaves room for the other users
// of the tmpfs), at least 64 MiB, rounded down to a multiple of 2 MiB (so it also suits huge
// pages). The minimum wins over the cap: with under 128 MiB free in /dev/shm the pool takes
// more than half of it, and with under 64 MiB CpuPool::Create reports RESOURCE_EXHAUSTED
// rather than the daemon starting with a pool too small to use. Reads sysconf and
// statvfs("/dev/shm") at each call; thread-safe.
[[nodiscard]] std::uint64_t DefaultCpuPoolCapacity();

// The rule of DefaultCpuPoolCapacity for given amounts; `shm_free_bytes` nullopt when
// /dev/shm cannot be examined (then no cap applies).
[[nodiscard]] std::uint64_t DefaultCpuPoolCapacityFor(std::uint64_t physical_ram_bytes,
                                                      std::optional<std::uint64_t> shm_free_bytes);

}  // namespace hurray::daemon
