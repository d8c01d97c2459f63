// VersionStore: the published tensors, by name, each with its live versions.
#pragma once

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fast_path/directory_segment.h"
#include "hurray/v1/exchange.pb.h"
#include "pool/pool.h"
#include "registry/eviction_list.h"
#include "registry/fence_table.h"

namespace hurray::daemon {

// A published tensor version. Its buffers stay allocated while it lives.
//
// A compact record rather than a v1::TensorInfo, since the daemon holds one per published
// tensor: the TensorInfo that Acquire and Describe hand out is kept serialized once,
// without its name (the key of its name's entry), and parsed into each reply after
// Registry::mutex_ is released. A reply being built holds a shared_ptr to the version, so
// the immutable part stays valid even if the version is reclaimed meanwhile.
struct TensorVersion {
  // Set by Publish, then immutable: replies being built read these without the mutex.
  //
  // v1::TensorInfo with every field but `name` (field 1), serialized. A message serializes
  // its fields in field-number order, so the name's field followed by these bytes is the
  // whole TensorInfo; parsing them after set_name gives the message Publish built.
  std::string info_without_name;
  std::uint64_t number = 0;
  // The fast path (ipc/fast_path_layout.h): the version's identity, never reused within the
  // daemon's epoch, and the directory entry of its name; fast_path_id 0: no fast path for it.
  std::uint64_t fast_path_id = 0;
  std::uint64_t directory_entry = 0;
  std::int64_t published_at_ns = 0;  // Also in info_without_name; Describe lists it.
  std::uint64_t byte_size = 0;       // Sum of the buffers' sizes.
  std::uint64_t charged_bytes = 0;   // What published_bytes quotas count (ChargedBytes).
  // The descriptor's element type and shape (also in info_without_name): what List shows
  // of a tensor, kept apart so that a page of List parses nothing.
  v1::ElementType element_type = v1::ELEMENT_TYPE_UNSPECIFIED;
  boost::container::small_vector<std::uint64_t, 4> shape;

  // Set by Publish, then immutable; read under Registry::mutex_ only.
  //
  // Every buffer's range, in table order (segment_id 0 for an empty buffer): what
  // GrantSegment checks and what returns to `pool` when the version is reclaimed.
  boost::container::small_vector<PoolRange, 1> buffers;
  Pool* pool = nullptr;
  const std::string* name = nullptr;  // The key of its name's entry (dangles once reclaimed).
  // Who published it (the session's peer uid), and the uid that owned its namespace when it
  // was published (the access policy's default owner; see access/). Both persist with it.
  std::uint32_t publisher_uid = 0;
  std::uint32_t namespace_owner_uid = 0;
  // Published with `evictable`: the registry may evict it, while it is the latest of its
  // name and unleased, to make room in its pool (see EvictionList).
  bool evictable = false;

  // Set by Publish, then immutable: replies being built read its state without the mutex.
  // Event mode: the allocation's fence (also in info_without_name's handoff), returned to
  // its table when the last reference to the version goes.
  ReservedFence fence;

  // Guarded by Registry::mutex_.
  std::uint64_t lease_count = 0;
  // The uids it was granted to (an acquire reply carried fast_path_id to one of their
  // sessions): only their lease pages may pin it.
  boost::container::small_vector<std::uint32_t, 2> granted_uids;
  // While a lease page pins it (and so after it was superseded or deleted), the uid of that
  // page, which its charged_bytes count against instead of the publisher's.
  std::optional<std::uint32_t> pinner_uid;
  bool superseded = false;  // A newer version of the name exists.
  bool deleted = false;     // Delete named it: no new acquires.
  // Its memory was granted by an earlier daemon on this state directory (Registry::Adopt),
  // whose clients may still map it: retired, it stays until VersionStore::ReleaseEarlierEpochs.
  bool from_earlier_epoch = false;
  // Deleted because its producer's session ended before its fence was reached: the id of
  // that session's quarantine hold (Registry::CloseSession), which takes its buffers when it
  // is reclaimed while the producer's process lives (the buffer keeper); 0 otherwise, and
  // again 0 once it was reclaimed without being kept.
  std::uint64_t quarantine_hold = 0;

  // The TensorInfo of this version under `name`, from its stored bytes. Needs no lock.
  void FillTensorInfo(const std::string& tensor_name, v1::TensorInfo& info) const;
  // The uid whose published_bytes count its charged_bytes: its pinner's, else its
  // publisher's. Under Registry::mutex_.
  [[nodiscard]] std::uint32_t charged_uid() const { return pinner_uid.value_or(publisher_uid); }
  // Records that `uid` was granted it. Under Registry::mutex_.
  void Grant(std::uint32_t uid) {
    if (std::ranges::find(granted_uids, uid) == granted_uids.end()) granted_uids.push_back(uid);
  }
};

// The live versions of one name.
struct NameEntry {
  // Oldest first (version numbers only grow). Almost always one: a superseded version
  // lives on only while leased.
  boost::container::small_vector<std::shared_ptr<TensorVersion>, 1> versions;
  std::uint64_t next_version = 1;
  // Its entry in the fast path's directory, when it has one.
  std::optional<std::uint64_t> directory_entry;
  // A publish of it found the directory full, or its uid's share taken (counted once per
  // name).
  bool refused_entry = false;
  // The uid its directory entry counts against (its publisher when it got the entry).
  std::uint32_t entry_uid = 0;

  // The latest version, when it may still be acquired; null otherwise.
  [[nodiscard]] TensorVersion* Latest() const;
  // Leases on all its versions.
  [[nodiscard]] std::uint64_t LeaseCount() const;
};

// Names and their versions. A version is superseded when a newer one of its name is
// added, hidden when deleted, and reclaimed (its buffers returned to its pool, its record
// dropped) once it is superseded or deleted and unleased; a name goes with its last version.
// The evictable latest versions are kept in an EvictionList, in step with these changes.
//
// With a fast-path directory (set_fast_path), each name whose versions carry a fast_path_id
// gets an entry (freed when the name goes), which always shows the name's latest live
// version, or 0: rewritten by Add and MarkDeleted before any version they retire is
// reclaimed. A version to be reclaimed whose fast_path_id a lease page of a uid it was
// granted to names (the `named` check, run after the entry stopped showing it) is held back
// instead, *pinned*, until RescanPinned (or a reclaim attempt) finds it named nowhere. While
// pinned, its charge moves to the pinning uid (the charge observer).
//
// Not thread-safe: guarded by Registry::mutex_.
class VersionStore {
 public:
  using Names = std::map<std::string, NameEntry, std::less<>>;

  // The number the next version of `name` gets.
  [[nodiscard]] std::uint64_t NextNumber(std::string_view name) const;
  // Adds `version` (numbered NextNumber(name), buffers and pool set) as the latest of
  // `name`, and supersedes the ones before it (reclaiming those without a lease). An
  // evictable version joins the eviction list as its most recently used.
  void Add(const std::string& name, std::shared_ptr<TensorVersion> version);
  // Marks the versions of `name` not yet deleted (all, or only `number` when not 0) deleted,
  // and returns them, oldest first. The caller reclaims them with ReclaimIfUnused.
  std::vector<TensorVersion*> MarkDeleted(std::string_view name, std::uint64_t number);
  // Reclaims `version` when it is superseded or deleted, has no lease and no lease page
  // names it (it may be the last reference to it, and to its name's entry); one a page names
  // is pinned instead.
  void ReclaimIfUnused(TensorVersion* version);
  // Adds `version`, a retired version of `name` that an earlier daemon's clients may still
  // map (a kRetained record Registry::Adopt took the buffers of), as deleted: it serves no
  // acquire and holds its memory until ReleaseEarlierEpochs. Before the later versions of
  // `name` are added.
  void AddRetained(const std::string& name, std::shared_ptr<TensorVersion> version);
  // While set (the start of a restarted daemon sets it when an earlier daemon's clients may
  // still map its memory), a retired version from_earlier_epoch is held back, not reclaimed.
  void set_earlier_epochs_held(bool held) { earlier_epochs_held_ = held; }
  // No earlier daemon's client maps anything any more: clears the flag and reclaims what it
  // held back (those without a lease or pin of this daemon). Returns how many went.
  std::size_t ReleaseEarlierEpochs();
  // Serves the fast path from `directory` (null: none; must outlive the store): `named`
  // tells the uid of a lease page that pins a version (one of its granted_uids), or nullopt.
  // Before the first Add.
  using Named = std::function<std::optional<std::uint32_t>(const TensorVersion&)>;
  void set_fast_path(fast_path::DirectorySegment* directory, Named named) {
    directory_ = directory;
    named_ = std::move(named);
  }
  // Called with a version whose charge moves from uid `from` to uid `to` (a pin took it, or
  // passed it on), before its pinner_uid changes.
  void set_charge_observer(
      std::function<void(const TensorVersion&, std::uint32_t from, std::uint32_t to)> observer) {
    charge_observer_ = std::move(observer);
  }
  // Tries every pinned version again; returns how many stay pinned.
  std::size_t RescanPinned();
  // The most directory entries the names of one publisher uid may hold at once (0: no
  // limit): a name beyond it has no fast path, as when the directory is full.
  void set_max_entries_per_uid(std::uint64_t max) { max_entries_per_uid_ = max; }
  // Called with each version as it is reclaimed, before its buffers would return to its
  // pool: true when it took them (they stay allocated; it frees them later itself).
  void set_buffer_keeper(std::function<bool(TensorVersion&)> keeper) {
    buffer_keeper_ = std::move(keeper);
  }
  // Called with each version as it is reclaimed (after the buffer keeper), before it leaves
  // the store.
  void set_reclaim_observer(std::function<void(const TensorVersion&)> observer) {
    reclaim_observer_ = std::move(observer);
  }
  // Called with a name as it gains (true) or loses (false) its latest version that may be
  // acquired (Latest() turns non-null or null), within Add or MarkDeleted.
  void set_presence_observer(std::function<void(const std::string&, bool)> observer) {
    presence_observer_ = std::move(observer);
  }

  // The version an acquire finds (number 0: the latest); null when it is not published.
  [[nodiscard]] std::shared_ptr<TensorVersion> Find(std::string_view name,
                                                    std::uint64_t number) const;
  // The entry of `name`, or null.
  [[nodiscard]] const NameEntry* FindEntry(std::string_view name) const;
  [[nodiscard]] const Names& names() const { return names_; }

  // Records that `version` was just used (acquired): the last of its pool to be evicted.
  void MarkUsed(TensorVersion* version) { evictable_.Touch(version); }
  // The version to evict next from `pool` (the least recently used evictable latest
  // version without a lease, and that no lease page names: evicting a version a fast-path
  // reader holds would hide its name and free nothing), or null.
  [[nodiscard]] TensorVersion* EvictionCandidate(const Pool* pool) const {
    return evictable_.Oldest(pool, [this](const TensorVersion& version) {
      return version.fast_path_id != 0 && named_ && named_(version).has_value();
    });
  }

  // Names whose latest version may be acquired. O(1): kept as names gain and lose one.
  [[nodiscard]] std::uint64_t TensorCount() const { return tensor_count_; }
  // Versions alive (leased superseded or deleted ones included).
  [[nodiscard]] std::uint64_t version_count() const { return version_count_; }
  // Bytes of every version added, and of every version reclaimed, since the store was made.
  [[nodiscard]] std::uint64_t published_bytes() const { return published_bytes_; }
  [[nodiscard]] std::uint64_t reclaimed_bytes() const { return reclaimed_bytes_; }
  // Versions kept only because a lease page names them, and their bytes.
  [[nodiscard]] std::uint64_t pinned_count() const { return pinned_.size(); }
  [[nodiscard]] std::uint64_t pinned_bytes() const { return pinned_bytes_; }
  // Retired versions held back for an earlier daemon's clients, and their bytes.
  [[nodiscard]] std::uint64_t earlier_held_count() const { return earlier_held_.size(); }
  [[nodiscard]] std::uint64_t earlier_held_bytes() const { return earlier_held_bytes_; }
  // Names a publish found no free directory entry for.
  [[nodiscard]] std::uint64_t refused_entries() const { return refused_entries_; }

 private:
  Names names_;
  EvictionList evictable_;
  std::uint64_t version_count_ = 0;
  std::uint64_t published_bytes_ = 0;
  std::uint64_t reclaimed_bytes_ = 0;
  std::function<bool(TensorVersion&)> buffer_keeper_;
  std::function<void(const TensorVersion&)> reclaim_observer_;
  std::function<void(const std::string&, bool)> presence_observer_;
  std::uint64_t tensor_count_ = 0;

  // Counts, and tells the presence observer, that `name` gained or lost its latest version.
  void PresenceChanged(const std::string& name, bool present);

  // Gives `version` (about to be the latest of `entry`) its directory entry; without one
  // (none free, or no fast path), its fast_path_id becomes 0.
  void AssignEntry(NameEntry& entry, TensorVersion& version);
  // Shows the latest live version of `entry` (or 0) in its directory entry.
  void ShowLatest(const NameEntry& entry);
  // Whether `version` must stay because a lease page names it; tracks pinned_.
  bool HeldByLeasePage(TensorVersion* version);
  // Whether `version` must stay because an earlier daemon's clients may map it; tracks
  // earlier_held_.
  bool HeldForEarlierEpochs(TensorVersion* version);

  fast_path::DirectorySegment* directory_ = nullptr;
  Named named_;
  std::function<void(const TensorVersion&, std::uint32_t, std::uint32_t)> charge_observer_;
  std::set<TensorVersion*> pinned_;
  std::uint64_t pinned_bytes_ = 0;
  std::uint64_t refused_entries_ = 0;
  std::uint64_t max_entries_per_uid_ = 0;
  std::unordered_map<std::uint32_t, std::uint64_t> entries_of_uid_;  // Uids holding some.
  bool earlier_epochs_held_ = false;
  std::set<TensorVersion*> earlier_held_;
  std::uint64_t earlier_held_bytes_ = 0;
};

}  // namespace hurray::daemon
