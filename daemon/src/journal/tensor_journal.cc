#include "journal/tensor_journal.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

#include "hurray/tensor_name.h"

namespace hurray::daemon {
namespace {

constexpr std::chrono::milliseconds kBatchSyncInterval{100};
constexpr std::uint64_t kFrameBytes = 16;

using RetainedRecords = std::map<std::pair<std::string, std::uint64_t>, JournalRecord>;

// A version superseded or removed: its memory counts as in use until a kFreed names it.
void Retire(JournalRecord record, RetainedRecords& retained) {
  record.kind = JournalRecord::Kind::kRetained;
  std::pair key(record.name, record.number);
  retained.insert_or_assign(std::move(key), std::move(record));
}

// Applies one decoded record to what survives.
void Replay(JournalRecord record, RecoveredJournal& state,
            std::map<std::string, std::size_t, std::less<>>& latest, RetainedRecords& retained) {
  switch (record.kind) {
    case JournalRecord::Kind::kSegments:
      state.segments.insert_or_assign(record.name, std::move(record.segments));
      return;
    case JournalRecord::Kind::kPublish: {
      auto [found, added] = latest.try_emplace(record.name, state.versions.size());
      if (added) {
        state.versions.push_back(std::move(record));
      } else {
        Retire(std::exchange(state.versions[found->second], std::move(record)), retained);
      }
      return;
    }
    case JournalRecord::Kind::kRemoval: {
      auto found = latest.find(record.name);
      if (found != latest.end() && state.versions[found->second].number == record.number) {
        Retire(std::exchange(state.versions[found->second], JournalRecord{.number = 0}),
               retained);  // Number 0: removed below.
        latest.erase(found);
      }
      return;
    }
    case JournalRecord::Kind::kRetained:
      Retire(std::move(record), retained);
      return;
    case JournalRecord::Kind::kFreed:
      retained.erase(std::pair(record.name, record.number));
      return;
  }
}

}  // namespace

Result<RecoveredJournal> RecoverJournal(const std::string& path, JournalFile::Damage damage) {
  // A journal that cannot be read as written is never read around: what a lost record said
  // (a supersede, a delete) decides which memory is whose.
  auto refused = [](const Error& error) {
    return std::unexpected(
        Error(error.code(),
              error.message() +
                  "; hurrayd does not start on a damaged journal. To start without the tensors it "
                  "kept (they are lost), run hurrayd --discard-state with the same configuration"));
  };
  Result<JournalFile::Contents> contents = JournalFile::Read(path, damage);
  if (!contents && contents.error().code() == StatusCode::kNotFound) return RecoveredJournal{};
  if (!contents && contents.error().code() == StatusCode::kDataLoss) {
    return refused(contents.error());
  }
  if (!contents) return std::unexpected(contents.error());
  RecoveredJournal state;
  state.record_count = contents->records.size();
  state.ignored_bytes = contents->ignored_bytes;
  std::map<std::string, std::size_t, std::less<>> latest;
  RetainedRecords retained;
  for (std::size_t i = 0; i < contents->records.size(); ++i) {
    Result<JournalRecord> record = DecodeJournalRecord(contents->records[i]);
    if (!record && damage == JournalFile::Damage::kSkip) continue;
    if (!record) return refused(record.error().WithContext(fmt::format("{} record {}", path, i)));
    Replay(std::move(*record), state, latest, retained);
  }
  std::erase_if(state.versions, [](const JournalRecord& record) { return record.number == 0; });
  for (auto& [key, record] : retained) state.retained.push_back(std::move(record));
  return state;
}

Result<std::unique_ptr<TensorJournal>> TensorJournal::Create(
    Options options,
    const std::map<std::string, std::vector<JournaledSegment>, std::less<>>& segments,
    const std::vector<JournalRecord>& versions, const std::vector<JournalRecord>& retained) {
  std::vector<std::string> segment_records;
  segment_records.reserve(segments.size());
  for (const auto& [pool, files] : segments) {
    segment_records.push_back(EncodeJournalRecord(
        {.kind = JournalRecord::Kind::kSegments, .name = pool, .segments = files}));
  }
  std::map<std::string, Live, std::less<>> live;
  for (const JournalRecord& version : versions) {
    live.insert_or_assign(version.name,
                          Live{.number = version.number, .payload = EncodeJournalRecord(version)});
  }
  std::map<RetainedKey, std::string> kept;
  for (const JournalRecord& version : retained) {
    kept.insert_or_assign(RetainedKey(version.name, version.number), EncodeJournalRecord(version));
  }
  HURRAY_ASSIGN_OR_RETURN(
      JournalFile file, JournalFile::Replace(options.path, Snapshot(segment_records, kept, live)));
  return std::unique_ptr<TensorJournal>(new TensorJournal(std::move(options), std::move(file),
                                                          std::move(segment_records),
                                                          std::move(live), std::move(kept)));
}

TensorJournal::TensorJournal(Options options, JournalFile file,
                             std::vector<std::string> segment_records,
                             std::map<std::string, Live, std::less<>> live,
                             std::map<RetainedKey, std::string> retained)
    : options_(std::move(options)),
      segment_records_(std::move(segment_records)),
      file_(std::make_shared<JournalFile>(std::move(file))),
      live_(std::move(live)),
      retained_(std::move(retained)),
      last_sync_(std::chrono::steady_clock::now()) {
  CountLiveBytesLocked();
}

void TensorJournal::CountLiveBytesLocked() {
  live_bytes_ = 0;
  for (const auto& [name, entry] : live_) live_bytes_ += kFrameBytes + entry.payload.size();
  for (const auto& [key, payload] : retained_) live_bytes_ += kFrameBytes + payload.size();
}

Status TensorJournal::KeepOnly(const std::vector<JournalRecord>& versions,
                               const std::vector<JournalRecord>& retained) {
  std::set<RetainedKey> adopted;
  for (const JournalRecord& version : versions) adopted.emplace(version.name, version.number);
  std::set<RetainedKey> held;
  for (const JournalRecord& version : retained) held.emplace(version.name, version.number);
  std::lock_guard lock(mutex_);
  const std::size_t forgotten =
      std::erase_if(live_,
                    [&](const auto& entry) {
                      return !adopted.contains(RetainedKey(entry.first, entry.second.number));
                    }) +
      std::erase_if(retained_, [&](const auto& entry) { return !held.contains(entry.first); });
  if (forgotten == 0) return {};  // The file names just these already: no rewrite.
  CountLiveBytesLocked();
  HURRAY_ASSIGN_OR_RETURN(JournalFile file, JournalFile::Replace(options_.path, SnapshotLocked()));
  file_ = std::make_shared<JournalFile>(std::move(file));
  synced_ = appended_;  // Replace synced the new file.
  return {};
}

Status TensorJournal::RecordPublish(const JournalRecord& record) {
  const std::string& name = record.name;
  std::string payload = EncodeJournalRecord(record);
  std::lock_guard lock(mutex_);
  if (Status appended = AppendLocked(payload); !appended) {
    return std::unexpected(
        appended.error().WithContext(fmt::format("the journal {} cannot record {} version {}",
                                                 file_->path(), ShownName(name), record.number)));
  }
  live_bytes_ += kFrameBytes + payload.size();
  Live& entry = live_[name];
  if (!entry.payload.empty()) RetireLocked(name, std::move(entry));  // Superseded.
  entry = Live{.number = record.number, .payload = std::move(payload)};
  CompactLocked();
  return {};
}

void TensorJournal::RetireLocked(const std::string& name, Live entry) {
  SetJournalRecordKind(entry.payload, JournalRecord::Kind::kRetained);
  retained_.insert_or_assign(RetainedKey(name, entry.number), std::move(entry.payload));
}

void TensorJournal::RecordRemoval(const std::string& name, std::uint64_t number) {
  std::lock_guard lock(mutex_);
  auto found = live_.find(name);
  if (found == live_.end() || found->second.number != number) return;  // Superseded already.
  if (Status appended = AppendLocked(EncodeJournalRecord(
          {.kind = JournalRecord::Kind::kRemoval, .name = name, .number = number}));
      !appended) {
    spdlog::error(
        "the journal cannot record the deletion of {} version {}: {}; a restarted "
        "daemon would serve it again",
        ShownName(name), number, appended.error().message());
    return;
  }
  RetireLocked(name, std::move(found->second));
  live_.erase(found);
  CompactLocked();
}

void TensorJournal::RecordFreed(const std::string& name, std::uint64_t number) {
  std::lock_guard lock(mutex_);
  auto found = retained_.find(RetainedKey(name, number));
  if (found == retained_.end()) return;
  // Unrecorded, a restarted daemon only keeps the memory out of use for longer: logged.
  if (Status appended = AppendLocked(EncodeJournalRecord(
          {.kind = JournalRecord::Kind::kFreed, .name = name, .number = number}));
      !appended) {
    spdlog::warn("the journal cannot record that {} version {} was freed: {}", ShownName(name),
                 number, appended.error().message());
  }
  live_bytes_ -= kFrameBytes + found->second.size();
  retained_.erase(found);
  CompactLocked();
}

Status TensorJournal::AppendLocked(std::string_view payload) {
  HURRAY_RETURN_IF_ERROR(file_->Append(payload));
  ++appended_;
  return {};
}

Status TensorJournal::Commit() {
  if (options_.sync == JournalSync::kNone) return {};
  std::unique_lock lock(mutex_);
  if (options_.sync == JournalSync::kBatch) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_sync_ < kBatchSyncInterval) return {};  // A later commit syncs it.
    last_sync_ = now;
  }
  // Group commit: one fdatasync covers every record appended before it started; a commit
  // that finds one running waits for it, then starts the next only if its records came
  // after the running one began.
  const std::uint64_t target = appended_;
  while (synced_ < target) {
    if (syncing_) {
      sync_done_.wait(lock);
      continue;
    }
    syncing_ = true;
    const std::uint64_t covered = appended_;
    const std::shared_ptr<JournalFile> file = file_;  // A compaction may replace file_.
    lock.unlock();
    Status synced = file->Sync();  // Appends go on meanwhile.
    lock.lock();
    syncing_ = false;
    sync_done_.notify_all();
    HURRAY_RETURN_IF_ERROR(std::move(synced));
    ++syncs_;
    synced_ = std::max(synced_, covered);
  }
  return {};
}

void TensorJournal::CompactLocked() {
  if (file_->size() < options_.compact_min_bytes || file_->size() <= 2 * live_bytes_) return;
  Result<JournalFile> compacted = JournalFile::Replace(options_.path, SnapshotLocked());
  if (!compacted) {
    spdlog::warn("journal: compaction failed, appending to the old file: {}",
                 compacted.error().message());
    return;
  }
  file_ = std::make_shared<JournalFile>(std::move(*compacted));
  synced_ = appended_;  // Replace synced the new file, which holds every live record.
}

std::vector<std::string> TensorJournal::Snapshot(
    const std::vector<std::string>& segment_records,
    const std::map<RetainedKey, std::string>& retained,
    const std::map<std::string, Live, std::less<>>& live) {
  std::vector<std::string> snapshot = segment_records;
  for (const auto& [key, payload] : retained) snapshot.push_back(payload);
  for (const auto& [name, entry] : live) snapshot.push_back(entry.payload);
  return snapshot;
}

std::vector<std::string> TensorJournal::SnapshotLocked() const {
  return Snapshot(segment_records_, retained_, live_);
}

std::size_t TensorJournal::retained_version_count() const {
  std::lock_guard lock(mutex_);
  return retained_.size();
}

std::size_t TensorJournal::live_version_count() const {
  std::lock_guard lock(mutex_);
  return live_.size();
}

std::uint64_t TensorJournal::file_bytes() const {
  std::lock_guard lock(mutex_);
  return file_->size();
}

}  // namespace hurray::daemon
