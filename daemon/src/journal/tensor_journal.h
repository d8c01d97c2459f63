// TensorJournal: the daemon's journal of published tensors and of its pools' segments, in
// the state directory, from which a restarted daemon re-adopts what it had published.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/error.h"
#include "journal/journal_file.h"
#include "journal/journal_record.h"
#include "journal/journal_sync.h"

namespace hurray::daemon {

// What a journal on disk says outlived its daemon.
struct RecoveredJournal {
  // Each pool's segments, by pool name (the last kSegments record of each).
  std::map<std::string, std::vector<JournaledSegment>, std::less<>> segments;
  // The versions published and not deleted nor superseded since (kPublish), oldest first.
  std::vector<JournalRecord> versions;
  // The versions superseded or deleted whose memory no kFreed gave back (kRetained), by name
  // then number: a daemon that adopts their segments may have to keep them out of use.
  std::vector<JournalRecord> retained;
  std::uint64_t record_count = 0;
  std::uint64_t ignored_bytes = 0;  // A torn tail (and with kSkip, damage), not read.
};

// Reads the journal at `path`: empty when there is none. With kRefuse (a start), DATA_LOSS
// for a file that is not a journal, damage before its torn tail (JournalFile::Read), or a
// record that passed its checksum but does not decode, each message ending with the way out
// (hurrayd --discard-state); other errors name the failed call. With kSkip (discarding the
// state), what can be read of a damaged journal: damaged and undecodable records skipped.
[[nodiscard]] Result<RecoveredJournal> RecoverJournal(
    const std::string& path, JournalFile::Damage damage = JournalFile::Damage::kRefuse);

// Appends a record for every publish, delete and freed retired version the registry tells it
// of, to a JournalFile that starts as a snapshot (segments, retired versions not freed, then
// live versions) and is compacted to a new snapshot (JournalFile::Replace) once it holds more
// than twice the bytes of those records and at least Options::compact_min_bytes.
//
// Thread-safe (one mutex); the registry calls RecordPublish and RecordRemoval with its own
// mutex held, and Commit without it.
class TensorJournal {
 public:
  struct Options {
    std::string path;
    JournalSync sync = JournalSync::kNone;
    std::uint64_t compact_min_bytes = std::uint64_t{4} << 20;
  };

  // Starts the journal at `path` as a snapshot of `segments`, `versions` (the versions a
  // restarted daemon adopted) and `retained` (kRetained records whose memory it keeps out of
  // use), replacing what was there. Errors of JournalFile::Replace.
  [[nodiscard]] static Result<std::unique_ptr<TensorJournal>> Create(
      Options options,
      const std::map<std::string, std::vector<JournaledSegment>, std::less<>>& segments,
      const std::vector<JournalRecord>& versions, const std::vector<JournalRecord>& retained = {});

  // At a restart, once the registry adopted what it could (Registry::Adopt): keeps only
  // `versions` (served again) and `retained` (held for earlier clients), and rewrites the
  // file as their snapshot. Every other version it started with (lost, or retired with no
  // earlier client to hold it for) is forgotten: its memory is free in this daemon and
  // will be reused, so a later restart must not adopt it. When nothing is forgotten (a first
  // start, a restart that adopted everything) the file is left as Create wrote it. Errors
  // of JournalFile::Replace: the file then still names the forgotten versions (a later
  // restart may lose a tensor over them); this journal appends on to it.
  [[nodiscard]] Status KeepOnly(const std::vector<JournalRecord>& versions,
                                const std::vector<JournalRecord>& retained);

  // The append failed (RESOURCE_EXHAUSTED for a full disk): "the journal <path> cannot
  // record cpu tensor ns/x version 3: write <path>: No space left on device".
  [[nodiscard]] Status RecordPublish(const JournalRecord& record);
  void RecordRemoval(const std::string& name, std::uint64_t number);
  void RecordFreed(const std::string& name, std::uint64_t number);
  // "always": one fdatasync for every record appended before it (group commit: callers that
  // come while one runs share the next); "batch": one when 100 ms have passed since the
  // last; "none": nothing. Errors name the failed fdatasync.
  [[nodiscard]] Status Commit();

  // The fdatasync calls Commit made.
  [[nodiscard]] std::uint64_t sync_count() const {
    std::lock_guard lock(mutex_);
    return syncs_;
  }

  // Versions the journal would restore now.
  [[nodiscard]] std::size_t live_version_count() const;
  // Retired versions whose memory was not freed yet.
  [[nodiscard]] std::size_t retained_version_count() const;
  [[nodiscard]] std::uint64_t file_bytes() const;

 private:
  struct Live {
    std::uint64_t number = 0;
    std::string payload;  // The kPublish record.
  };
  using RetainedKey = std::pair<std::string, std::uint64_t>;  // Name and number.

  TensorJournal(Options options, JournalFile file, std::vector<std::string> segment_records,
                std::map<std::string, Live, std::less<>> live,
                std::map<RetainedKey, std::string> retained);

  // Sets live_bytes_ from live_ and retained_. Needs mutex_ (or no other thread yet).
  void CountLiveBytesLocked();

  // Appends (write(2): a kill -9 loses nothing). Needs mutex_.
  [[nodiscard]] Status AppendLocked(std::string_view payload);
  // Moves the superseded or removed `entry` of `name` to retained_. Needs mutex_.
  void RetireLocked(const std::string& name, Live entry);
  // Rewrites the file as a snapshot; on failure (logged) appends continue to the old file.
  void CompactLocked();
  // The records of a snapshot: segments, retained versions, live versions.
  [[nodiscard]] static std::vector<std::string> Snapshot(
      const std::vector<std::string>& segment_records,
      const std::map<RetainedKey, std::string>& retained,
      const std::map<std::string, Live, std::less<>>& live);
  [[nodiscard]] std::vector<std::string> SnapshotLocked() const;

  const Options options_;
  const std::vector<std::string> segment_records_;  // kSegments payloads, in every snapshot.
  mutable std::mutex mutex_;
  // Guarded by mutex_; shared with a Commit syncing it outside mutex_ (Sync reads only
  // what never changes, so appends may go on).
  std::shared_ptr<JournalFile> file_;
  std::condition_variable sync_done_;
  bool syncing_ = false;        // Guarded by mutex_: a Commit's fdatasync runs.
  std::uint64_t appended_ = 0;  // Guarded by mutex_: records appended.
  std::uint64_t synced_ = 0;    // Guarded by mutex_: of those, the ones known on the disk.
  std::uint64_t syncs_ = 0;     // Guarded by mutex_.
  std::map<std::string, Live, std::less<>> live_;  // Guarded by mutex_: the latest of each name.
  // Guarded by mutex_: the retired versions not freed yet, as kRetained payloads.
  std::map<RetainedKey, std::string> retained_;
  std::uint64_t live_bytes_ = 0;  // Guarded by mutex_: of live_ and retained_, framed.
  std::chrono::steady_clock::time_point last_sync_;  // Guarded by mutex_.
};

}  // namespace hurray::daemon
