// JournalRecord: one entry of the daemon's journal (journal_file.h frames them), and its
// encoding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"

namespace hurray::daemon {

// A shared-memory segment of a pool, as the journal names it.
struct JournaledSegment {
  std::string path;  // "/dev/shm/<prefix>-<32 hex digits>", or a file in a hugetlbfs mount.
  std::uint64_t size = 0;

  friend bool operator==(const JournaledSegment&, const JournaledSegment&) = default;
};

// What one record says. Plain values.
struct JournalRecord {
  enum class Kind : std::uint8_t {
    // Pool `name` is made of `segments`, in segment id order from its first id: written
    // before any of them is created, so that a restarted daemon can remove or adopt them.
    kSegments = 1,
    // Version `number` of tensor `name` was published: `info_without_name` is its stored
    // TensorInfo without its name, with its pool and buffer locations.
    kPublish = 2,
    // Version `number` of tensor `name` was deleted.
    kRemoval = 3,
    // Version `number` of tensor `name`, superseded or deleted, whose memory has not been
    // freed (kFreed) yet: a snapshot's form of a retired kPublish, with the same fields
    // (`info_without_name` holds its buffers' locations), so that a restarted daemon that
    // adopts the segments can keep those ranges out of use.
    kRetained = 4,
    // The memory of version `number` of tensor `name`, retired before, went back to its pool.
    // Until this record, a retired version's memory counts as in use: a lease or lease page
    // of the daemon, or a client of an earlier one, may map it.
    kFreed = 5,
  };

  Kind kind = Kind::kPublish;
  std::string name;
  std::uint64_t number = 0;
  std::uint32_t publisher_uid = 0;
  std::uint32_t namespace_owner_uid = 0;
  bool evictable = false;
  std::string info_without_name;
  std::vector<JournaledSegment> segments;

  friend bool operator==(const JournalRecord&, const JournalRecord&) = default;
};

// The record's bytes: a fixed-width little-endian header, the name, then the kind's part.
[[nodiscard]] std::string EncodeJournalRecord(const JournalRecord& record);

// Makes `payload`, the bytes of a kPublish or kRetained record, those of the other kind.
void SetJournalRecordKind(std::string& payload, JournalRecord::Kind kind);

// The record of `payload` (one that passed its checksum). DATA_LOSS naming what is wrong
// for bytes EncodeJournalRecord did not make: an unknown kind, a length past the end,
// trailing bytes.
[[nodiscard]] Result<JournalRecord> DecodeJournalRecord(std::string_view payload);

}  // namespace hurray::daemon
