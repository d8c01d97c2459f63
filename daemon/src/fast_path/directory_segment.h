// DirectorySegment: the fast path's directory (ipc/include/hurray/ipc/fast_path_layout.h),
// made and written by the daemon, mapped read-only by every session that asks for it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/fast_path_layout.h"
#include "hurray/ipc/owned_directory.h"
#include "hurray/ipc/shared_mapping.h"
#include "hurray/ipc/unique_fd.h"
#include "pool/segment_place.h"
#include "pool/shm_segment.h"

namespace hurray::daemon::fast_path {

// The layout shared with clients.
using ::hurray::fast_path::DirectoryBytes;
using ::hurray::fast_path::DirectoryEntry;
using ::hurray::fast_path::DirectoryHeader;
using ::hurray::fast_path::kDirectoryMagic;
using ::hurray::fast_path::kEnded;
using ::hurray::fast_path::kLayoutVersion;
using ::hurray::fast_path::kServing;
using ::hurray::fast_path::WriteEntry;

// The directory of one daemon epoch: a named shm segment of DirectoryBytes(entry_count)
// bytes (mode 0600, an unguessable name, see ShmPrefixFor), its pages
// reserved, mapped read-write by the daemon only; clients get O_RDONLY descriptors, which the
// kernel refuses to map writable or to resize. Its header is filled before any client sees
// it, state kServing.
//
// The name lets the next daemon find it: Record writes its path to a file of the state
// directory, and EndAbandoned (at the next start, after a crash) marks it kEnded and removes
// it, so that no consumer confirms a pin on a daemon that is gone. The destructor marks it
// kEnded and removes the name (clients' mappings stay valid until they unmap).
//
// Entries are handed out from a free list, one per tensor name that has one.
//
// Not thread-safe (the registry guards it with its mutex), except OpenReadOnly and the
// const accessors, which may be called from any thread.
class DirectorySegment {
 public:
  // A directory of `entry_count` entries (1 to kMaxEntries) for `daemon_epoch`, its
  // segment named under `shm_prefix` (see ShmSegment). INVALID_ARGUMENT for a bad count;
  // RESOURCE_EXHAUSTED when /dev/shm cannot hold it; other failures name the failed call.
  [[nodiscard]] static Result<std::unique_ptr<DirectorySegment>> Create(std::string_view shm_prefix,
                                                                        std::uint64_t entry_count,
                                                                        std::uint64_t daemon_epoch);

  // After a crash: the directory that the record `record_name` of `state_directory` names
  // (written by Record of the daemon before) is marked kEnded and removed, and so is the
  // record. Only a path that `place` passes (the directory's prefix, ShmPrefixFor, in
  // /dev/shm) and a file of this user are touched; a record naming anything else is logged
  // (a bounded excerpt) and only the record goes. True when one was marked; false when there
  // is no record, or the segment it names is gone or is not a directory. Errors name the
  // failed call and the file.
  [[nodiscard]] static Result<bool> EndAbandoned(const OwnedDirectory& state_directory,
                                                 std::string_view record_name,
                                                 const SegmentPlace& place);

  // The shm prefix of the directory of a daemon whose segments are named under
  // `instance_prefix` ([cpu_pool] shm_prefix): "fast-path.<instance_prefix>", so that the
  // directory is "/dev/shm/fast-path.<instance_prefix>-<32 hex digits>", apart from the pool's
  // segments.
  [[nodiscard]] static std::string ShmPrefixFor(std::string_view instance_prefix) {
    return "fast-path." + std::string(instance_prefix);
  }

  // The most entries a directory may have (2^24: 512 MiB).
  static constexpr std::uint64_t kMaxEntries = std::uint64_t{1} << 24;

  DirectorySegment(const DirectorySegment&) = delete;
  DirectorySegment& operator=(const DirectorySegment&) = delete;
  ~DirectorySegment();

  // Writes this directory's path to the file `record_name` of `state_directory`, for
  // EndAbandoned of the next daemon: replaced atomically through a temporary file made with
  // O_EXCL | O_NOFOLLOW (OwnedDirectory::ReplaceFile), so that a link planted there is
  // refused, never followed.
  [[nodiscard]] Status Record(const OwnedDirectory& state_directory,
                              std::string_view record_name) const;

  // A free entry, all zero; nullopt when every entry is in use.
  [[nodiscard]] std::optional<std::uint64_t> AllocateEntry();
  // Shows nothing (0) in entry `index` (one AllocateEntry gave) and returns it to the free list.
  void FreeEntry(std::uint64_t index);
  // Shows `version_id` (0: none) numbered `version_number` in entry `index` (WriteEntry).
  void Show(std::uint64_t index, std::uint64_t version_id, std::uint64_t version_number);
  // The header's state turns kEnded: no confirm succeeds from now on. Idempotent.
  void End();

  // A new O_RDONLY descriptor on the segment (close-on-exec), for a client. Thread-safe.
  [[nodiscard]] Result<UniqueFd> OpenReadOnly() const { return shm_.Open(/*writable=*/false); }

  [[nodiscard]] std::uint64_t entry_count() const { return entry_count_; }
  [[nodiscard]] std::uint64_t used_entries() const { return entry_count_ - free_.size(); }
  [[nodiscard]] std::uint64_t size_bytes() const { return shm_.size(); }
  [[nodiscard]] std::string path() const { return shm_.path(); }
  [[nodiscard]] const DirectoryHeader& header() const { return *header_; }
  [[nodiscard]] const DirectoryEntry& entry(std::uint64_t index) const { return entries_[index]; }

 private:
  DirectorySegment(ShmSegment shm, SharedMapping mapping, std::uint64_t entry_count);

  ShmSegment shm_;
  SharedMapping mapping_;
  DirectoryHeader* header_;
  DirectoryEntry* entries_;
  const std::uint64_t entry_count_;
  std::vector<std::uint64_t> free_;  // Free entries; the lowest index on top.
};

}  // namespace hurray::daemon::fast_path
