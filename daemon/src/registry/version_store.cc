#include "registry/version_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hurray::daemon {

void TensorVersion::FillTensorInfo(const std::string& tensor_name, v1::TensorInfo& info) const {
  info.set_name(tensor_name);
  // Bytes this daemon serialized: parsing them cannot fail short of a bug.
  if (!info.MergeFromString(info_without_name)) {
    spdlog::error("{} version {}: the stored TensorInfo does not parse",
                  std::string_view(tensor_name).substr(0, 200), number);
  }
}

TensorVersion* NameEntry::Latest() const {
  if (versions.empty()) return nullptr;
  TensorVersion* latest = versions.back().get();
  return latest->deleted || latest->superseded ? nullptr : latest;
}

std::uint64_t NameEntry::LeaseCount() const {
  std::uint64_t leases = 0;
  for (const auto& version : versions) leases += version->lease_count;
  return leases;
}

std::uint64_t VersionStore::NextNumber(std::string_view name) const {
  const NameEntry* entry = FindEntry(name);
  return entry == nullptr ? 1 : entry->next_version;
}

void VersionStore::Add(const std::string& name, std::shared_ptr<TensorVersion> version) {
  auto named = names_.try_emplace(name).first;
  NameEntry& entry = named->second;
  const bool was_present = entry.Latest() != nullptr;
  version->name = &named->first;
  entry.next_version = version->number + 1;
  // The previous latest is superseded: it lives on only while leased.
  std::vector<TensorVersion*> superseded;
  for (const auto& old : entry.versions) {
    if (!old->superseded) {
      old->superseded = true;
      evictable_.Remove(old.get());
      superseded.push_back(old.get());
    }
  }
  published_bytes_ += version->byte_size;
  if (version->evictable) evictable_.Add(version.get());
  AssignEntry(entry, *version);
  entry.versions.push_back(std::move(version));
  ++version_count_;
  ShowLatest(entry);  // Before any superseded version may be reclaimed.
  if (!was_present) PresenceChanged(named->first, true);
  for (TensorVersion* old : superseded) ReclaimIfUnused(old);  // Never erases the entry.
}

std::vector<TensorVersion*> VersionStore::MarkDeleted(std::string_view name, std::uint64_t number) {
  std::vector<TensorVersion*> deleted;
  auto entry = names_.find(name);
  if (entry == names_.end()) return deleted;
  const bool was_present = entry->second.Latest() != nullptr;
  for (const auto& version : entry->second.versions) {
    if (!version->deleted && (number == 0 || number == version->number)) {
      version->deleted = true;
      evictable_.Remove(version.get());
      deleted.push_back(version.get());
    }
  }
  ShowLatest(entry->second);
  if (was_present && entry->second.Latest() == nullptr) PresenceChanged(entry->first, false);
  return deleted;
}

void VersionStore::PresenceChanged(const std::string& name, bool present) {
  if (present) {
    ++tensor_count_;
  } else {
    --tensor_count_;
  }
  if (presence_observer_) presence_observer_(name, present);
}

void VersionStore::ReclaimIfUnused(TensorVersion* version) {
  if (!(version->superseded || version->deleted)) return;
  if (version->lease_count != 0 || HeldByLeasePage(version) || HeldForEarlierEpochs(version)) {
    return;
  }
  if (!buffer_keeper_ || !buffer_keeper_(*version)) {
    for (const PoolRange& buffer : version->buffers) {
      if (buffer.segment_id != 0) version->pool->Free(buffer);
    }
  }
  reclaimed_bytes_ += version->byte_size;
  if (reclaim_observer_) reclaim_observer_(*version);
  auto entry = names_.find(*version->name);
  auto& versions = entry->second.versions;
  // Drops the entry's reference: *version is destroyed now, or by the last reply being
  // built from it.
  versions.erase(std::ranges::find_if(
      versions, [version](const auto& live) { return live.get() == version; }));
  --version_count_;
  if (versions.empty()) {
    if (const std::optional<std::uint64_t> index = entry->second.directory_entry) {
      directory_->FreeEntry(*index);
      const auto held = entries_of_uid_.find(entry->second.entry_uid);
      if (--held->second == 0) entries_of_uid_.erase(held);
    }
    names_.erase(entry);
  }
}

void VersionStore::AssignEntry(NameEntry& entry, TensorVersion& version) {
  if (directory_ == nullptr || version.fast_path_id == 0) {
    version.fast_path_id = 0;
    return;
  }
  if (!entry.directory_entry) {
    const auto held = entries_of_uid_.find(version.publisher_uid);
    const bool share_left = max_entries_per_uid_ == 0 || held == entries_of_uid_.end() ||
                            held->second < max_entries_per_uid_;
    if (share_left) entry.directory_entry = directory_->AllocateEntry();
    if (entry.directory_entry) {
      entry.entry_uid = version.publisher_uid;
      ++entries_of_uid_[version.publisher_uid];
    }
  }
  if (!entry.directory_entry) {
    if (!entry.refused_entry) ++refused_entries_;
    entry.refused_entry = true;
    version.fast_path_id = 0;
    return;
  }
  version.directory_entry = *entry.directory_entry;
}

void VersionStore::ShowLatest(const NameEntry& entry) {
  if (!entry.directory_entry) return;
  const TensorVersion* latest = entry.Latest();
  directory_->Show(*entry.directory_entry, latest != nullptr ? latest->fast_path_id : 0,
                   latest != nullptr ? latest->number : 0);
}

void VersionStore::AddRetained(const std::string& name, std::shared_ptr<TensorVersion> version) {
  auto named = names_.try_emplace(name).first;
  NameEntry& entry = named->second;
  version->name = &named->first;
  version->superseded = true;
  version->deleted = true;
  version->fast_path_id = 0;
  entry.next_version = std::max(entry.next_version, version->number + 1);
  published_bytes_ += version->byte_size;
  ++version_count_;
  TensorVersion* added = version.get();
  const auto later = std::ranges::find_if(
      entry.versions, [added](const auto& live) { return live->number > added->number; });
  entry.versions.insert(later, std::move(version));
  ReclaimIfUnused(added);  // Held, while earlier epochs are.
}

std::size_t VersionStore::ReleaseEarlierEpochs() {
  earlier_epochs_held_ = false;
  const std::vector<TensorVersion*> held(earlier_held_.begin(), earlier_held_.end());
  earlier_held_.clear();
  earlier_held_bytes_ = 0;
  const std::uint64_t before = version_count_;
  for (TensorVersion* version : held) ReclaimIfUnused(version);
  return before - version_count_;
}

bool VersionStore::HeldForEarlierEpochs(TensorVersion* version) {
  if (version->from_earlier_epoch && earlier_epochs_held_) {
    if (earlier_held_.insert(version).second) earlier_held_bytes_ += version->byte_size;
    return true;
  }
  if (earlier_held_.erase(version) != 0) earlier_held_bytes_ -= version->byte_size;
  return false;
}

bool VersionStore::HeldByLeasePage(TensorVersion* version) {
  const std::optional<std::uint32_t> pinner =
      version->fast_path_id != 0 && named_ ? named_(*version) : std::nullopt;
  if (pinner) {
    if (pinned_.insert(version).second) pinned_bytes_ += version->byte_size;
    if (*pinner != version->charged_uid()) {
      if (charge_observer_) charge_observer_(*version, version->charged_uid(), *pinner);
      version->pinner_uid = pinner;
    }
  } else if (pinned_.erase(version) != 0) {
    pinned_bytes_ -= version->byte_size;
  }
  return pinner.has_value();
}

std::size_t VersionStore::RescanPinned() {
  const std::vector<TensorVersion*> pinned(pinned_.begin(), pinned_.end());
  for (TensorVersion* version : pinned) ReclaimIfUnused(version);
  return pinned_.size();
}

std::shared_ptr<TensorVersion> VersionStore::Find(std::string_view name,
                                                  std::uint64_t number) const {
  const NameEntry* entry = FindEntry(name);
  if (entry == nullptr) return nullptr;
  if (number == 0) {
    if (entry->Latest() == nullptr) return nullptr;
    return entry->versions.back();
  }
  for (const auto& version : entry->versions) {
    if (version->number == number) return version->deleted ? nullptr : version;
  }
  return nullptr;
}

const NameEntry* VersionStore::FindEntry(std::string_view name) const {
  auto found = names_.find(name);
  return found == names_.end() ? nullptr : &found->second;
}

}  // namespace hurray::daemon
