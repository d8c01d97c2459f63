// The fast path's shared memory, and the steps both ends take on it: a consumer acquires
// and releases a tensor version it has mapped before with no system call, and the daemon
// never frees a version a consumer confirmed.
//
// The *directory* is one segment the daemon writes and every session maps read-only: a
// DirectoryHeader, then DirectoryEntry[entry_count], one per tensor name that has one
// (AcquireResponse.directory_entry names it). An entry shows the identity of its name's
// latest live version (AcquireResponse.version_id; never reused within a daemon epoch), or
// 0 when the name has none, under a sequence lock.
//
// Each session has its own *lease page*: LeaseSlot[slot_count], read-write for that client,
// read (never trusted) by the daemon. The protocol is that of hazard pointers, across
// processes:
//
//   consumer (Pin)                          daemon (retiring version V of entry E)
//   1. slot := V                            1. E := the next live version, or 0
//   2. confirm: E == V, header serving      2. scan every live session's slots for V
//      else slot := 0, take the slow path   3. V named in a slot: keep V, scan again later;
//   3. read the tensor's memory                otherwise free V
//   4. release: slot := 0
//
// Each side stores, then loads what the other stores, both sequentially consistent: either
// the daemon's scan sees the slot, or the consumer's confirm sees the change, so no version
// a confirmed slot names is freed (tests/model/fast_path.pml checks every interleaving). A
// slot can pin only a version that was live when it was confirmed, and only one the daemon
// granted to the session's uid (an acquire reply carried its identity): identities copied
// from the directory, or guessed, pin nothing. A page pins at most slot_count versions; its
// slots count against the uid's lease quota, and what it pins against the uid's
// published_bytes quota.
//
// The header's `state` turns to kEnded when the daemon that wrote the directory stops, or,
// after a crash, when the next daemon starts, before it frees anything: no confirm succeeds
// on a directory whose daemon is gone.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace hurray::fast_path {

inline constexpr std::uint64_t kDirectoryMagic = 0x31'52'49'44'59'52'52'48;  // "HRRYDIR1"
inline constexpr std::uint32_t kLayoutVersion = 1;
inline constexpr std::uint64_t kServing = 1;
inline constexpr std::uint64_t kEnded = 2;
// Bytes of a lease page; it holds at most kLeasePageBytes / sizeof(LeaseSlot) slots.
inline constexpr std::size_t kLeasePageBytes = 4096;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "shared memory needs address-free 64-bit atomics");

// At offset 0 of the directory. Written once by the daemon before any client maps it,
// except `state`.
struct DirectoryHeader {
  std::uint64_t magic;           // kDirectoryMagic.
  std::uint32_t layout_version;  // kLayoutVersion.
  std::uint32_t entry_size;      // sizeof(DirectoryEntry).
  std::uint64_t entry_count;
  std::uint64_t daemon_epoch;
  std::atomic<std::uint64_t> state;  // kServing, then kEnded.
  std::uint64_t reserved[3];
};
static_assert(sizeof(DirectoryHeader) == 64);

// One name's entry; entries follow the header.
struct DirectoryEntry {
  // Odd while the daemon writes the entry.
  std::atomic<std::uint64_t> sequence;
  // The identity of the name's latest live version, or 0.
  std::atomic<std::uint64_t> version_id;
  // That version's number (0 with no version).
  std::atomic<std::uint64_t> version_number;
  std::uint64_t reserved;
};
static_assert(sizeof(DirectoryEntry) == 32);

// One slot of a lease page: the identity of a version its session reads, or 0.
struct LeaseSlot {
  std::atomic<std::uint64_t> version_id;
};
static_assert(sizeof(LeaseSlot) == 8);

// Bytes of a directory of `entry_count` entries.
constexpr std::size_t DirectoryBytes(std::size_t entry_count) {
  return sizeof(DirectoryHeader) + entry_count * sizeof(DirectoryEntry);
}

// ---- The daemon's steps (the only writer of the directory) ----

// Shows `version_id` (0: none) numbered `version_number` in `entry`. Sequentially
// consistent: a scan after it sees every slot a consumer set before its confirm read it.
inline void WriteEntry(DirectoryEntry& entry, std::uint64_t version_id,
                       std::uint64_t version_number) {
  const std::uint64_t sequence = entry.sequence.load(std::memory_order_relaxed);
  entry.sequence.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  entry.version_number.store(version_number, std::memory_order_relaxed);
  entry.version_id.store(version_id, std::memory_order_seq_cst);
  entry.sequence.store(sequence + 2, std::memory_order_release);
}

// Whether a slot of `slots` names `version_id` (not 0). Reads each slot once; garbage is
// only a value that names some version or none.
inline bool Names(const LeaseSlot* slots, std::size_t slot_count, std::uint64_t version_id) {
  for (std::size_t i = 0; i < slot_count; ++i) {
    if (slots[i].version_id.load(std::memory_order_seq_cst) == version_id) return true;
  }
  return false;
}

// ---- The consumer's steps ----

// What an entry showed at one instant.
struct EntrySnapshot {
  std::uint64_t version_id = 0;
  std::uint64_t version_number = 0;
};

// A consistent read of `entry`; nullopt when the daemon was writing it on every one of a
// few tries.
inline std::optional<EntrySnapshot> ReadEntry(const DirectoryEntry& entry) {
  constexpr int kTries = 8;
  for (int i = 0; i < kTries; ++i) {
    const std::uint64_t before = entry.sequence.load(std::memory_order_acquire);
    if ((before & 1) != 0) continue;
    const EntrySnapshot snapshot{
        .version_id = entry.version_id.load(std::memory_order_relaxed),
        .version_number = entry.version_number.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (entry.sequence.load(std::memory_order_relaxed) == before) return snapshot;
  }
  return std::nullopt;
}

// Names `version_id` in `slot` and confirms that it is still the latest live version of
// `entry` on a directory still served. True: the daemon will not free the version until
// the slot is cleared (Unpin). False: the slot is clear again; take the slow path.
inline bool Pin(LeaseSlot& slot, const DirectoryHeader& header, const DirectoryEntry& entry,
                std::uint64_t version_id) {
  slot.version_id.store(version_id, std::memory_order_seq_cst);
  // The entry, then the state: a state still kServing means the whole confirm came before
  // the directory ended, and so before the next daemon freed anything.
  if (entry.version_id.load(std::memory_order_seq_cst) == version_id &&
      header.state.load(std::memory_order_seq_cst) == kServing) {
    return true;
  }
  slot.version_id.store(0, std::memory_order_release);
  return false;
}

// Ends what Pin confirmed: the release. The reads of the version's memory happen before it.
inline void Unpin(LeaseSlot& slot) { slot.version_id.store(0, std::memory_order_release); }

}  // namespace hurray::fast_path
