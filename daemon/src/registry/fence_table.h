// FenceTable: the fence words of one CUDA pool, in fence segments the daemon owns.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/fence_word.h"
#include "pool/pool.h"

namespace hurray::daemon {

// The fence word's poison, value limit and compare are hurray::kFencePoison,
// kFenceValueLimit and FenceWordReaches (hurray/ipc/fence_word.h), shared with the client.
// The fence segments of the k-th CUDA pool of a daemon (from 0, in pool name order) have ids
// from kFirstFenceSegmentId + (k << 32), beside the CPU pool's (from 1) and the CUDA pools'
// slabs (from (N + 1) << 32 for device ordinal N) in the daemon's one space of segment ids.
inline constexpr std::uint64_t kFirstFenceSegmentId = std::uint64_t{1} << 56;
inline constexpr int kFenceSegmentIdShift = 32;
// Bytes of one fence word; also the alignment of its offset.
inline constexpr std::uint64_t kFenceWordBytes = 8;

// What a fence word says of its fence.
enum class FenceState : std::uint8_t {
  kPending,  // Short of the fence's value: the producer has not signalled it yet.
  kReady,    // Reaches the value (FenceWordReaches) and is not poison: the data is ready.
  kFailed,   // Poison: the daemon gave up on the data.
};

// One reserved fence word: where it is (as v1::Fence says it) and the daemon's own view of it.
struct FenceSlot {
  std::uint64_t segment_id = 0;
  std::uint64_t segment_size = 0;
  std::uint64_t offset = 0;  // A multiple of kFenceWordBytes.
  std::uint64_t value = 0;   // The fence is reached once the word holds at least this.
  // The word in the daemon's own mapping; valid while the table that reserved it lives.
  std::uint64_t* word = nullptr;
};

class FenceTable;

// A fence reserved from a FenceTable, returned to it on destruction (see FenceTable::Free).
// Move-only; the table must outlive it. Not thread-safe (like any value).
class ReservedFence {
 public:
  ReservedFence() = default;
  ReservedFence(ReservedFence&& other) noexcept
      : table_(std::exchange(other.table_, nullptr)), slot_(other.slot_) {}
  ReservedFence& operator=(ReservedFence&& other) noexcept;
  ReservedFence(const ReservedFence&) = delete;
  ReservedFence& operator=(const ReservedFence&) = delete;
  ~ReservedFence() { Reset(); }

  // False for a default-constructed (or moved-from, or reset) one.
  [[nodiscard]] bool valid() const { return table_ != nullptr; }
  explicit operator bool() const { return valid(); }
  // The slot; only while valid().
  [[nodiscard]] const FenceSlot& slot() const { return slot_; }
  // The word's state now (FenceTable::State); kFailed once no longer valid().
  [[nodiscard]] FenceState State() const;

  // Returns the fence to its table now, if it holds one.
  void Reset();

 private:
  friend class FenceTable;
  ReservedFence(FenceTable* table, FenceSlot slot) : table_(table), slot_(slot) {}

  FenceTable* table_ = nullptr;
  FenceSlot slot_;
};

// The fence words of one pool. They live in fence segments: POSIX shared memory that the
// daemon creates (as ShmSegment does for a CPU pool: an unguessable name, mode 0600, space
// reserved up front) and maps read-write itself, so that it reads the words directly.
// Clients get in only through a descriptor OpenSegment gives: read-write to producers,
// read-only to consumers. A segment holds segment_bytes / 8 words; segments are made on
// demand, one after the other, with ids consecutive from Options::first_segment_id, and
// live as long as the table: outstanding fences are bounded only by memory.
//
// A word is reused only when its fence was reached (the producer's write has landed), and
// then with a value strictly larger than any the word held and below kFenceValueLimit, so
// that a waiter of its old value never waits again and a late write of it cannot reach the
// new one; a word whose next value would not fit is retired. A word freed unreached may
// still receive a late write from a producer's GPU, which would undo a later user's value:
// it is poisoned and retired for good. Every compare of a word with a value is the GPU's
// cyclic one (FenceWordReaches), so the daemon and a waiting stream never disagree.
//
// Destroying the table unmaps the segments and removes their names (clients' descriptors and
// mappings stay valid until they close them).
//
// Thread-safe: its own mutex guards the bookkeeping; State() reads only the slot's word and
// takes no lock. Lock order: Registry::mutex_, then this one.
class FenceTable {
 public:
  struct Options {
    // The pool's name, for messages.
    std::string pool_name;
    // Segments are named "/<shm_prefix>-<32 random hex digits>" (see ShmSegment).
    std::string shm_prefix = "hurray";
    // Id of the first segment (> 0); the others follow in order.
    std::uint64_t first_segment_id = 1;
    // Bytes of each segment; rounded up to a multiple of 4096.
    std::uint64_t segment_bytes = std::uint64_t{64} << 10;
  };

  // Segments of one table: its ids span first_segment_id + [0, kMaxSegments).
  static constexpr std::uint64_t kMaxSegments = std::uint64_t{1} << 32;
  // The page size fence segments report in SegmentAccess.
  static constexpr std::uint64_t kPageSize = 4096;

  // Makes no segment yet: the first Reserve does.
  explicit FenceTable(Options options);
  ~FenceTable();
  FenceTable(const FenceTable&) = delete;
  FenceTable& operator=(const FenceTable&) = delete;

  // A word not in use, with a value strictly larger than it ever had: a freed word whose
  // fence was reached, or a fresh one (value 1), from a new segment when every segment is in
  // use. Errors of making a segment (ShmSegment::Create's, mmap's), and RESOURCE_EXHAUSTED
  // when the table's segment ids are used up.
  [[nodiscard]] Result<ReservedFence> Reserve();

  // The word's state: an acquire load of it against slot.value. Any thread, no lock; the
  // slot must come from a table that still lives.
  [[nodiscard]] static FenceState State(const FenceSlot& slot);

  // Writes kFencePoison to the word (a release store): every stream waiting for the fence
  // moves on, and the fence counts as failed. The slot stays reserved.
  static void Poison(const FenceSlot& slot);

  // Poisons every reserved word whose fence is not reached; returns how many. For the
  // daemon's stop: no consumer stream then waits for a producer that can no longer signal.
  std::uint64_t PoisonUnreached();

  // A new descriptor on a fence segment (O_RDWR, or O_RDONLY: the kernel then refuses
  // PROT_WRITE shared mappings), page_size kPageSize. NOT_FOUND "segment N is not a fence
  // segment of pool P" for an id not made by this table; shm_open's errors, naming it.
  [[nodiscard]] Result<SegmentAccess> OpenSegment(std::uint64_t segment_id, bool writable) const;
  // Size of a segment, if this table made it.
  [[nodiscard]] std::optional<std::uint64_t> SegmentSize(std::uint64_t segment_id) const;

  struct Counts {
    std::uint64_t in_use = 0;   // Reserved, not yet freed.
    std::uint64_t retired = 0;  // Freed unreached: never reused.
    std::uint64_t free = 0;     // Freed reached, ready for reuse.
    std::uint32_t segments = 0;
  };
  [[nodiscard]] Counts counts() const;

 private:
  friend class ReservedFence;
  struct Segment;  // A ShmSegment and the daemon's mapping of it.
  // A freed word whose fence was reached.
  struct FreeWord {
    std::size_t segment_index = 0;
    std::uint64_t offset = 0;
    std::uint64_t floor = 0;  // The largest value the word held: the next is above it.
  };

  // Returns a reserved word: reused when its fence was reached, else poisoned and retired.
  // A slot not in use (freed twice, or of another table) is logged and ignored.
  void Free(const FenceSlot& slot);
  // Makes the next segment; under mutex_.
  [[nodiscard]] Status AddSegmentLocked();
  // The slot of word `offset` of segments_[index] with `value`; under mutex_.
  [[nodiscard]] FenceSlot SlotLocked(std::size_t index, std::uint64_t offset,
                                     std::uint64_t value) const;
  // The index into segments_ of `segment_id`, if this table made it; under mutex_.
  [[nodiscard]] std::optional<std::size_t> IndexOfLocked(std::uint64_t segment_id) const;

  const Options options_;  // segment_bytes rounded up.

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Segment>> segments_;  // Guarded by mutex_.
  // Bytes of the last segment handed out as fresh words. Guarded by mutex_.
  std::uint64_t fresh_offset_ = 0;
  std::vector<FreeWord> free_;  // Guarded by mutex_.
  // Reserved words, and their fence's value. Guarded by mutex_.
  std::unordered_map<std::uint64_t*, std::uint64_t> in_use_;
  std::uint64_t retired_ = 0;  // Guarded by mutex_.
};

}  // namespace hurray::daemon
