// SegmentPlace: where the segment files of one daemon's pool (or of its fast-path directory)
// can be, so that a path read back from a file the daemon wrote (the journal, the fast
// path's record) is unlinked or written only when it could be one of its own segments. A
// state file is no authority: whatever it names outside the place is left alone.
#pragma once

#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

// Where POSIX shared memory lives (shm_open's files), and so the CPU pool's segments unless
// huge pages are backed by a hugetlbfs mount.
inline constexpr char kShmDirectory[] = "/dev/shm";

// Thread-safe (a value; Remove acts on the file system).
struct SegmentPlace {
  // The segments' prefix ([cpu_pool] shm_prefix, or DirectorySegment::ShmPrefixFor of it).
  std::string shm_prefix;
  // The explicit huge page backing's hugetlbfs mount point, where the pool has one; empty:
  // /dev/shm only.
  std::string hugetlbfs_directory;

  // OK when `path` is "/dev/shm/<shm_prefix>-<hex>" or "<hugetlbfs_directory>/<shm_prefix>-<hex>"
  // (<hex> 1 to 64 lower-case hex digits, as ShmSegment names them; so no '/' and no ".."
  // after the directory). Otherwise FAILED_PRECONDITION naming a bounded excerpt of `path` and the
  // place required.
  [[nodiscard]] Status Check(std::string_view path) const;

  // Check, then removes the file at `path` when it is a regular file of this process's
  // effective uid (lstat: a link is never followed); a path that is gone already is fine.
  // FAILED_PRECONDITION for a path outside the place or a file that is not the daemon's
  // (both left alone); a failed lstat or unlink names the call and the path.
  [[nodiscard]] Status Remove(std::string_view path) const;
};

// At most the first 120 bytes of `text`, its bytes that are not printable ASCII escaped
// ("\x1b"), with "... (N bytes)" when it was cut: for messages that name untrusted text.
[[nodiscard]] std::string BoundedExcerpt(std::string_view text);

}  // namespace hurray::daemon
