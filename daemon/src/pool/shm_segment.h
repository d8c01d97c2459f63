// ShmSegment: one shared-memory segment owned by the daemon: a named POSIX shm object in
// /dev/shm, or a file on a hugetlbfs mount.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"
#include "pool/huge_pages.h"

namespace hurray::daemon {

// A segment named "/<prefix>-<32 hex digits>" from 128 random bits so that no client can
// guess it, with mode 0600 so that only the daemon's user can open it by name. Clients get
// in only through a descriptor the daemon chose to send (Open). Its backing
// (HugePageBacking) decides where it lives:
//
// - off: a POSIX shared-memory object, created through Boost.Interprocess, the file
//   /dev/shm/<name>;
// - transparent: the same, with its pages faulted in through a MADV_HUGEPAGE mapping, so
//   that a tmpfs whose policy allows it (huge=advise and up) backs them with transparent
//   huge pages; the mapping is gone when Create returns;
// - explicit: the file <hugetlbfs_directory>/<name>, whose pages come from the kernel's
//   pool of huge pages.
//
// Create gives the segment its size without reserving its pages: that takes a while (about
// 1 s per GB on tmpfs), so the owner reserves it later, range by range (Reserve, fallocate),
// and hands out only ranges already reserved. A full /dev/shm or an empty huge page pool is
// then an error of Reserve rather than a SIGBUS in a client that touches a page. The daemon
// keeps no mapping and no descriptor of the segment: the name is the handle.
//
// Owns the name: the destructor removes it from the namespace (descriptors and mappings that
// clients hold stay valid until they close them). Move-only. Not thread-safe to move or
// destroy; the const methods may be called from any thread.
class ShmSegment {
 public:
  // Creates a segment of `size` bytes (> 0; with an explicit backing, a multiple of its
  // page_size). `prefix` is 1 to 200 characters of [A-Za-z0-9._-]. INVALID_ARGUMENT for a
  // bad prefix or size, or a backing of mode auto or explicit without a directory; other
  // failures name the failed call. Nothing is left
  // behind on failure. No page is reserved yet (see Reserve).
  [[nodiscard]] static Result<ShmSegment> Create(std::string_view prefix, std::uint64_t size,
                                                 const HugePageBacking& backing = {});

  // A new unguessable name for a segment of `prefix` ("/<prefix>-<32 hex digits>"), for
  // CreateNamed: a caller can record it before the segment exists. INVALID_ARGUMENT for a
  // bad prefix.
  [[nodiscard]] static Result<std::string> NewName(std::string_view prefix);
  // Create with a name from NewName.
  [[nodiscard]] static Result<ShmSegment> CreateNamed(std::string name, std::uint64_t size,
                                                      const HugePageBacking& backing = {});
  // Takes over the segment an earlier daemon left at `path` (a file of /dev/shm, or of the
  // backing's hugetlbfs directory, as path() gave it): FAILED_PRECONDITION unless it is a
  // regular file of this user, mode 0600, of exactly `size` bytes; errors of open name it.
  // Its pages are reserved again by Reserve as for a new one (a no-op where they are).
  [[nodiscard]] static Result<ShmSegment> Adopt(const std::string& path, std::uint64_t size,
                                                const HugePageBacking& backing = {});
  // The file a segment named `name` of `backing` is: path() of it once created.
  [[nodiscard]] static std::string PathFor(std::string_view name, const HugePageBacking& backing);
  // Removes the segment file at `path` that an earlier daemon left (a name from path()); a
  // path that is gone already is fine. Errors name unlink.
  [[nodiscard]] static Status RemoveFile(const std::string& path);

  // OK when `prefix` may start a segment name: 1 to 200 characters of [A-Za-z0-9._-];
  // otherwise INVALID_ARGUMENT naming shm_prefix and its value.
  [[nodiscard]] static Status ValidatePrefix(std::string_view prefix);

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // Reserves the pages of bytes [offset, offset + length) (fallocate; with transparent huge
  // pages, faulted in as huge pages first), so that touching them can never raise SIGBUS.
  // INVALID_ARGUMENT for a range outside the segment or of length 0; RESOURCE_EXHAUSTED
  // naming the length and the errno text when /dev/shm (or the huge page pool) cannot hold
  // them; other failures name the failed call. Ranges may be reserved in any order and from
  // any thread; reserving a range twice is harmless.
  [[nodiscard]] Status Reserve(std::uint64_t offset, std::uint64_t length) const;

  // Gives back the pages of bytes [offset, offset + length) (fallocate PUNCH_HOLE, the size
  // kept): they read as zeros and take no memory until reserved again. INVALID_ARGUMENT for
  // a range outside the segment or of length 0; other failures name the failed call.
  [[nodiscard]] Status Release(std::uint64_t offset, std::uint64_t length) const;

  // The name stays when this object goes: a restarted daemon adopts the segment.
  void Keep() { name_.clear(); }

  // A new descriptor on the whole segment (close-on-exec), opened O_RDONLY (the kernel then
  // refuses PROT_WRITE shared mappings and writes) or O_RDWR. The caller owns it.
  [[nodiscard]] Result<UniqueFd> Open(bool writable) const;

  // The name, with its leading slash ("/hurray-0123…"): the POSIX shm name, or the file's
  // name in the hugetlbfs directory.
  [[nodiscard]] const std::string& name() const { return name_; }
  // The file: "/dev/shm/hurray-0123…" or "/dev/hugepages/hurray-0123…".
  [[nodiscard]] std::string path() const;
  [[nodiscard]] std::uint64_t size() const { return size_; }

 private:
  ShmSegment(std::string name, std::string directory, std::uint64_t size, HugePages mode)
      : name_(std::move(name)), directory_(std::move(directory)), size_(size), mode_(mode) {}

  // The explicit backing's Create: a file in `directory`.
  static Result<ShmSegment> CreateFile(std::string name, const std::string& directory,
                                       std::uint64_t size);

  // Removes the name, if this object still owns one.
  void Remove() noexcept;

  std::string name_;       // Empty once moved from.
  std::string directory_;  // The hugetlbfs mount point; empty for POSIX shm.
  std::uint64_t size_ = 0;
  HugePages mode_ = HugePages::kOff;  // The backing's mode: how Reserve reserves.
};

}  // namespace hurray::daemon
