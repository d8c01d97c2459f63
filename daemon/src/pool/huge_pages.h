// Huge pages for the CPU pool: the modes an operator asks for (cpu_pool.huge_pages), the
// facts of the host that decide what it can have, and the choice between them. With huge
// pages on, the pool's page size is the huge page size: every allocation starts on a huge
// page boundary and takes a whole number of huge pages (docs/operations.md, "Huge pages").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

// cpu_pool.huge_pages.
enum class HugePages : std::uint8_t {
  // 4 KiB pages of /dev/shm.
  kOff,
  // /dev/shm segments whose pages the kernel backs with transparent huge pages; needs a
  // tmpfs policy that allows them (see ChooseHugePages).
  kTransparent,
  // Segment files on a hugetlbfs mount, from the pool of huge pages the operator reserved
  // (vm.nr_hugepages).
  kExplicit,
  // Explicit where the host can, else transparent where it can, else off.
  kAuto,
};

// "off", "transparent", "explicit" or "auto".
[[nodiscard]] std::string_view HugePagesName(HugePages mode);

// The mode HugePagesName gives `text`; INVALID_ARGUMENT naming the text and the choices
// (callers put the setting's name in front).
[[nodiscard]] Result<HugePages> ParseHugePages(std::string_view text);

// What the kernel says about huge pages, as the text of the files it says it in, so that
// ChooseHugePages is a pure function of them (and tests can describe any host). An empty
// text means the file could not be read.
struct HostHugePageFacts {
  std::string mounts;          // /proc/self/mounts: hugetlbfs mounts, and /dev/shm's huge=.
  std::string meminfo;         // /proc/meminfo: Hugepagesize, HugePages_Free, HugePages_Rsvd.
  std::string shmem_enabled;   // /sys/kernel/mm/transparent_hugepage/shmem_enabled.
  std::string hpage_pmd_size;  // /sys/kernel/mm/transparent_hugepage/hpage_pmd_size (bytes).
};

// Reads the four files now, in this process's mount namespace. Thread-safe.
[[nodiscard]] HostHugePageFacts ReadHostHugePageFacts();

// The value of `key` in /proc/meminfo text ("HugePages_Free:    12" gives 12; a value in kB
// is converted to bytes), if present.
[[nodiscard]] std::optional<std::uint64_t> MeminfoValue(std::string_view meminfo,
                                                        std::string_view key);

// How a CPU pool's segments are backed: a resolved mode, never kAuto.
struct HugePageBacking {
  HugePages mode = HugePages::kOff;
  // Bytes of one page of the backing: 4096 when off, the huge page size otherwise. The
  // pool's page size (the alignment of every allocation) is at least this.
  std::uint64_t page_size = 4096;
  // kExplicit: the hugetlbfs mount point that holds the segment files.
  std::string hugetlbfs_directory;

  friend bool operator==(const HugePageBacking&, const HugePageBacking&) = default;
};

// The outcome of ChooseHugePages.
struct HugePageChoice {
  HugePageBacking backing;
  // For the log, what is in effect and why: "explicit on /dev/hugepages, 2 MiB pages, 2048
  // free", "off: fell back to 4 KiB pages: no hugetlbfs mount, and /dev/shm is mounted
  // without huge= (never) while shmem_enabled is never".
  std::string explanation;
};

// The backing for a pool of `capacity_bytes` when `requested` is asked for on a host that
// says `facts`:
//
// - kOff: 4 KiB pages of /dev/shm.
// - kExplicit: the first writable hugetlbfs mount (the topmost at its mount point) whose
//   page size is the kernel's default huge page size (meminfo Hugepagesize; the free counts
//   of meminfo are of that size). FAILED_PRECONDITION naming what is missing when there is
//   no such mount or no hugetlb support; RESOURCE_EXHAUSTED naming HugePages_Free when
//   fewer huge pages are free (HugePages_Free less HugePages_Rsvd) than the capacity takes.
// - kTransparent: /dev/shm with pages of hpage_pmd_size (2 MiB when it cannot be read).
//   The kernel backs a /dev/shm file with transparent huge pages when shmem_enabled is
//   "force", or when the tmpfs on /dev/shm is mounted huge=always, within_size or advise
//   and shmem_enabled is not "deny" (shmem_enabled's other values govern only the kernel's
//   internal shmem mount: SysV shm, memfd, shared anonymous memory). FAILED_PRECONDITION
//   naming both when neither holds, or when the kernel has no shmem_enabled at all.
// - kAuto: what kExplicit gives when it succeeds, else what kTransparent gives when it
//   succeeds, else off; never an error. The explanation says why the others were passed
//   over.
//
// Pure: reads nothing but its arguments. Thread-safe.
[[nodiscard]] Result<HugePageChoice> ChooseHugePages(HugePages requested,
                                                     std::uint64_t capacity_bytes,
                                                     const HostHugePageFacts& facts);

// "4 KiB", "2 MiB", "1 GiB", "3000 bytes": a size for messages.
[[nodiscard]] std::string FormatPageSize(std::uint64_t bytes);

}  // namespace hurray::daemon
