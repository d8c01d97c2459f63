// Huge pages for the CPU pool: the choice from host facts (every branch, with made-up hosts),
// pools with each backing, and real transparent and explicit huge pages where this host
// lets a test arrange them (root: a private mount namespace, and vm.nr_hugepages raised for
// the test's duration only).
#include "pool/huge_pages.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "pool/cpu_pool.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = kKiB * 1024;
constexpr std::uint64_t kGiB = kMiB * 1024;
constexpr std::uint64_t kHugePage = 2 * kMiB;

// /proc/meminfo as a host with `free` default-size huge pages would write it.
std::string Meminfo(std::uint64_t free, std::uint64_t reserved = 0,
                    std::string_view page_size = "2048 kB") {
  return "MemTotal:       24684092 kB\n"
         "HugePages_Total:    " +
         std::to_string(free) + "\nHugePages_Free:     " + std::to_string(free) +
         "\nHugePages_Rsvd:     " + std::to_string(reserved) +
         "\nHugePages_Surp:        0\nHugepagesize:       " + std::string(page_size) +
         "\nHugetlb:               0 kB\n";
}

constexpr char kRootMounts[] = "/dev/vda / ext4 rw,relatime 0 0\nproc /proc proc rw 0 0\n";
constexpr char kShmMount[] = "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=24684092k 0 0\n";
constexpr char kShmAdviseMount[] = "tmpfs /dev/shm tmpfs rw,nosuid,nodev,huge=advise 0 0\n";
constexpr char kHugetlbfsMount[] =
    "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n";
constexpr char kShmemNever[] = "always within_size advise [never] deny force\n";

HostHugePageFacts Host(const std::string& mounts, std::string meminfo,
                       std::string shmem_enabled = kShmemNever,
                       std::string hpage_pmd_size = "2097152\n") {
  return HostHugePageFacts{.mounts = std::string(kRootMounts) + mounts,
                           .meminfo = std::move(meminfo),
                           .shmem_enabled = std::move(shmem_enabled),
                           .hpage_pmd_size = std::move(hpage_pmd_size)};
}

TEST(HugePagesModeTest, NamesParseBack) {
  for (const HugePages mode :
       {HugePages::kOff, HugePages::kTransparent, HugePages::kExplicit, HugePages::kAuto}) {
    Result<HugePages> parsed = ParseHugePages(HugePagesName(mode));
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_EQ(HugePagesName(HugePages::kExplicit), "explicit");
}

TEST(HugePagesModeTest, UnknownModesAreRefusedNamingTheChoices) {
  EXPECT_ERROR(ParseHugePages("on"), StatusCode::kInvalidArgument,
               {"\"on\" is not off, transparent, explicit or auto"});
  EXPECT_ERROR(ParseHugePages("Explicit"), StatusCode::kInvalidArgument, {"\"Explicit\""});
  EXPECT_ERROR(ParseHugePages(""), StatusCode::kInvalidArgument, {"\"\""});
}

TEST(MeminfoValueTest, ReadsCountsAndConvertsKilobytes) {
  const std::string meminfo = Meminfo(12, 3);
  EXPECT_EQ(MeminfoValue(meminfo, "HugePages_Free"), 12u);
  EXPECT_EQ(MeminfoValue(meminfo, "HugePages_Rsvd"), 3u);
  EXPECT_EQ(MeminfoValue(meminfo, "Hugepagesize"), 2 * kMiB);
  EXPECT_EQ(MeminfoValue(meminfo, "HugePages"), std::nullopt);  // A prefix is not a key.
  EXPECT_EQ(MeminfoValue(meminfo, "ShmemHugePages"), std::nullopt);
  EXPECT_EQ(MeminfoValue("HugePages_Free: lots\n", "HugePages_Free"), std::nullopt);
}

TEST(FormatPageSizeTest, UsesTheLargestWholeUnit) {
  EXPECT_EQ(FormatPageSize(4096), "4 KiB");
  EXPECT_EQ(FormatPageSize(2 * kMiB), "2 MiB");
  EXPECT_EQ(FormatPageSize(kGiB), "1 GiB");
  EXPECT_EQ(FormatPageSize(3000), "3000 bytes");
}

// ---- ChooseHugePages on made-up hosts ----

TEST(ChooseHugePagesTest, OffAsksNothingOfTheHost) {
  Result<HugePageChoice> choice = ChooseHugePages(HugePages::kOff, kGiB, HostHugePageFacts{});
  ASSERT_OK(choice);
  EXPECT_EQ(choice->backing, HugePageBacking{});
  EXPECT_EQ(choice->backing.page_size, 4096u);
  EXPECT_EQ(choice->explanation, "off: 4 KiB pages");
}

TEST(ChooseHugePagesTest, ExplicitTakesAHugetlbfsMountWithEnoughFreePages) {
  Result<HugePageChoice> choice =
      ChooseHugePages(HugePages::kExplicit, 64 * kMiB,
                      Host(std::string(kShmMount) + kHugetlbfsMount, Meminfo(2048)));
  ASSERT_OK(choice);
  EXPECT_EQ(choice->backing, (HugePageBacking{.mode = HugePages::kExplicit,
                                              .page_size = kHugePage,
                                              .hugetlbfs_directory = "/dev/hugepages"}));
  EXPECT_EQ(choice->explanation,
            "explicit on /dev/hugepages, 2 MiB pages, 2048 free (the pool takes 32)");
}

TEST(ChooseHugePagesTest, ExplicitNeedsEveryPageOfTheCapacityFree) {
  const HostHugePageFacts exactly = Host(kHugetlbfsMount, Meminfo(32));
  EXPECT_OK(ChooseHugePages(HugePages::kExplicit, 64 * kMiB, exactly));
  // A partial page takes a whole one.
  EXPECT_ERROR(ChooseHugePages(HugePages::kExplicit, 64 * kMiB + 1, exactly),
               StatusCode::kResourceExhausted,
               {"huge_pages explicit: capacity 67108865 takes 33 huge pages of 2 MiB",
                "HugePages_Free is 32", "vm.nr_hugepages"});
}

TEST(ChooseHugePagesTest, ExplicitShortOfPagesIsResourceExhaustedNamingHugePagesFree) {
  EXPECT_ERROR(ChooseHugePages(HugePages::kExplicit, kGiB, Host(kHugetlbfsMount, Meminfo(0))),
               StatusCode::kResourceExhausted,
               {"takes 512 huge pages of 2 MiB", "HugePages_Free is 0"});
  // Pages promised to other mappings (HugePages_Rsvd) are not free for us.
  EXPECT_ERROR(
      ChooseHugePages(HugePages::kExplicit, 64 * kMiB, Host(kHugetlbfsMount, Meminfo(40, 20))),
      StatusCode::kResourceExhausted,
      {"takes 32 huge pages", "HugePages_Free is 40, 20 of them promised (HugePages_Rsvd)"});
}

TEST(ChooseHugePagesTest, ExplicitWithoutAMountNamesWhatIsMissing) {
  EXPECT_ERROR(ChooseHugePages(HugePages::kExplicit, 64 * kMiB, Host(kShmMount, Meminfo(2048))),
               StatusCode::kFailedPrecondition,
               {"huge_pages explicit: no hugetlbfs mount", "mount -t hugetlbfs"});
  // A hugetlbfs mount covered by a later mount at the same point is out of reach.
  EXPECT_ERROR(
      ChooseHugePages(HugePages::kExplicit, 64 * kMiB,
                      Host(std::string(kHugetlbfsMount) + "tmpfs /dev/hugepages tmpfs rw 0 0\n",
                           Meminfo(2048))),
      StatusCode::kFailedPrecondition, {"no hugetlbfs mount"});
}

TEST(ChooseHugePagesTest, ExplicitWithoutHugetlbSupportSaysSo) {
  EXPECT_ERROR(ChooseHugePages(HugePages::kExplicit, 64 * kMiB,
                               Host(kHugetlbfsMount, "MemTotal: 1000 kB\n")),
               StatusCode::kFailedPrecondition, {"/proc/meminfo has no Hugepagesize"});
}

TEST(ChooseHugePagesTest, ExplicitPassesOverReadOnlyMountsAndOtherPageSizes) {
  const std::string unusable =
      "none /mnt/ro hugetlbfs ro,relatime,pagesize=2M 0 0\n"
      "none /mnt/giant hugetlbfs rw,relatime,pagesize=1024M 0 0\n";
  EXPECT_ERROR(ChooseHugePages(HugePages::kExplicit, 64 * kMiB, Host(unusable, Meminfo(2048))),
               StatusCode::kFailedPrecondition,
               {"no usable hugetlbfs mount: /mnt/ro is read-only; /mnt/giant has 1 GiB pages, "
                "not the default 2 MiB"});

  // A mount without pagesize= has the default size.
  Result<HugePageChoice> choice = ChooseHugePages(
      HugePages::kExplicit, 64 * kMiB,
      Host(unusable + "none /mnt/usable hugetlbfs rw,relatime 0 0\n", Meminfo(2048)));
  ASSERT_OK(choice);
  EXPECT_EQ(choice->backing.hugetlbfs_directory, "/mnt/usable");
  EXPECT_EQ(choice->backing.page_size, kHugePage);
}

TEST(ChooseHugePagesTest, ExplicitFollowsTheKernelsDefaultHugePageSize) {
  Result<HugePageChoice> choice =
      ChooseHugePages(HugePages::kExplicit, 3 * kGiB,
                      Host("none /mnt/huge\\040pages hugetlbfs rw,pagesize=1024M 0 0\n",
                           Meminfo(4, 0, "1048576 kB")));
  ASSERT_OK(choice);
  EXPECT_EQ(choice->backing.page_size, kGiB);
  EXPECT_EQ(choice->backing.hugetlbfs_directory, "/mnt/huge pages");  // \040 decoded.
  EXPECT_EQ(choice->explanation,
            "explicit on /mnt/huge pages, 1 GiB pages, 4 free (the pool takes 3)");
}

TEST(ChooseHugePagesTest, TransparentFollowsTheTmpfsPolicyOfDevShm) {
  for (const std::string huge : {"always", "within_size", "advise"}) {
    SCOPED_TRACE(huge);
    Result<HugePageChoice> choice =
        ChooseHugePages(HugePages::kTransparent, kGiB,
                        Host("tmpfs /dev/shm tmpfs rw,nosuid,huge=" + huge + " 0 0\n", Meminfo(0)));
    ASSERT_OK(choice);
    EXPECT_EQ(choice->backing,
              (HugePageBacking{.mode = HugePages::kTransparent, .page_size = kHugePage}));
    EXPECT_EQ(choice->explanation,
              "transparent on /dev/shm, 2 MiB pages (/dev/shm is mounted huge=" + huge + ")");
  }
}

TEST(ChooseHugePagesTest, TransparentIsRefusedWhereDevShmIsNeverWhateverShmemEnabledSays) {
  // shmem_enabled other than force governs only the kernel's internal shmem mount.
  EXPECT_ERROR(ChooseHugePages(HugePages::kTransparent, kGiB,
                               Host(kShmMount, Meminfo(0),
                                    "[always] within_size advise never "
                                    "deny force\n")),
               StatusCode::kFailedPrecondition,
               {"huge_pages transparent: /dev/shm is mounted without huge= and shmem_enabled is "
                "always, not force",
                "remount,huge=advise"});
  EXPECT_ERROR(ChooseHugePages(HugePages::kTransparent, kGiB,
                               Host("tmpfs /dev/shm tmpfs rw,huge=never 0 0\n", Meminfo(0))),
               StatusCode::kFailedPrecondition,
               {"/dev/shm is mounted huge=never and shmem_enabled is never"});
}

TEST(ChooseHugePagesTest, ShmemEnabledForceAllowsAndDenyRefuses) {
  Result<HugePageChoice> forced = ChooseHugePages(
      HugePages::kTransparent, kGiB,
      Host(kShmMount, Meminfo(0), "always within_size advise never deny [force]\n"));
  ASSERT_OK(forced);
  EXPECT_EQ(forced->backing.mode, HugePages::kTransparent);
  EXPECT_EQ(forced->explanation, "transparent on /dev/shm, 2 MiB pages (shmem_enabled is force)");

  EXPECT_ERROR(ChooseHugePages(HugePages::kTransparent, kGiB,
                               Host("tmpfs /dev/shm tmpfs rw,huge=always 0 0\n", Meminfo(0),
                                    "always within_size advise never [deny] force\n")),
               StatusCode::kFailedPrecondition, {"shmem_enabled is deny"});
}

TEST(ChooseHugePagesTest, TransparentNeedsShmemEnabledAndATmpfsOnDevShm) {
  EXPECT_ERROR(
      ChooseHugePages(HugePages::kTransparent, kGiB, Host(kShmAdviseMount, Meminfo(0), "")),
      StatusCode::kFailedPrecondition, {"no transparent huge pages", "shmem_enabled is missing"});
  EXPECT_ERROR(ChooseHugePages(HugePages::kTransparent, kGiB, Host("", Meminfo(0))),
               StatusCode::kFailedPrecondition, {"no tmpfs is mounted on /dev/shm"});
}

TEST(ChooseHugePagesTest, TransparentPagesAreThePmdSizeOfTheKernel) {
  Result<HugePageChoice> large = ChooseHugePages(
      HugePages::kTransparent, kGiB, Host(kShmAdviseMount, Meminfo(0), kShmemNever, "536870912\n"));
  ASSERT_OK(large);
  EXPECT_EQ(large->backing.page_size, 512 * kMiB);
  for (const std::string unreadable : {"", "garbage\n", "3000\n"}) {
    Result<HugePageChoice> fallback = ChooseHugePages(
        HugePages::kTransparent, kGiB, Host(kShmAdviseMount, Meminfo(0), kShmemNever, unreadable));
    ASSERT_OK(fallback);
    EXPECT_EQ(fallback->backing.page_size, kHugePage) << unreadable;
  }
}

TEST(ChooseHugePagesTest, AutoPrefersExplicit) {
  Result<HugePageChoice> choice =
      ChooseHugePages(HugePages::kAuto, 64 * kMiB,
                      Host(std::string(kShmAdviseMount) + kHugetlbfsMount, Meminfo(2048)));
  ASSERT_OK(choice);
  EXPECT_EQ(choice->backing.mode, HugePages::kExplicit);
  EXPECT_EQ(choice->explanation,
            "explicit on /dev/hugepages, 2 MiB pages, 2048 free (the pool takes 32)");
}

TEST(ChooseHugePagesTest, AutoFallsBackToTransparentSayingWhyNotExplicit) {
  Result<HugePageChoice> choice =
      ChooseHugePages(HugePages::kAuto, 64 * kMiB,
                      Host(std::string(kShmAdviseMount) + kHugetlbfsMount, Meminfo(10)));
  ASSERT_OK(choice);
  EXPECT_EQ(choice->backing,
            (HugePageBacking{.mode = HugePages::kTransparent, .page_size = kHugePage}));
  EXPECT_EQ(choice->explanation,
            "transparent on /dev/shm, 2 MiB pages (/dev/shm is mounted huge=advise); not "
            "explicit: capacity 67108864 takes 32 huge pages of 2 MiB, and HugePages_Free is 10 "
            "(raise vm.nr_hugepages, or lower the capacity)");
}

TEST(ChooseHugePagesTest, AutoFallsBackToSmallPagesSayingWhy) {
  Result<HugePageChoice> choice =
      ChooseHugePages(HugePages::kAuto, 64 * kMiB, Host(kShmMount, Meminfo(0)));
  ASSERT_OK(choice);
  EXPECT_EQ(choice->backing, HugePageBacking{});
  EXPECT_TRUE(choice->explanation.starts_with("off: fell back to 4 KiB pages: no hugetlbfs mount"))
      << choice->explanation;
  EXPECT_NE(choice->explanation.find(
                ", and /dev/shm is mounted without huge= and shmem_enabled is never, not force"),
            std::string::npos)
      << choice->explanation;
  // Nothing at all to read (no /proc, no /sys): still no error.
  EXPECT_OK(ChooseHugePages(HugePages::kAuto, 64 * kMiB, HostHugePageFacts{}));
}

// ---- CpuPool with each backing ----

std::string TestPrefix() { return "hurray-test-" + std::to_string(::getpid()) + "-huge"; }

TEST(CpuPoolBackingTest, TransparentPoolAlignsEveryRangeToTheHugePageSize) {
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(
      CpuPool::Options{.capacity_bytes = 8 * kMiB - 1,
                       .shm_prefix = TestPrefix(),
                       .huge_pages = {.mode = HugePages::kTransparent, .page_size = kHugePage}});
  ASSERT_OK(pool);
  EXPECT_EQ((*pool)->page_size(), kHugePage);
  EXPECT_EQ((*pool)->huge_pages(), HugePages::kTransparent);
  EXPECT_EQ((*pool)->SegmentSize(1), 8 * kMiB);
  EXPECT_EQ((*pool)->SegmentPath(1), "/dev/shm" + *(*pool)->SegmentName(1));
  for (const std::uint64_t size : {std::uint64_t{1}, kHugePage + 1, std::uint64_t{4096}}) {
    Result<PoolRange> range = (*pool)->Allocate(size);
    ASSERT_OK(range);
    EXPECT_EQ(range->offset % kHugePage, 0u) << "size " << size;
  }
  EXPECT_ERROR((*pool)->Allocate(1), StatusCode::kResourceExhausted);  // 1 + 2 + 1 pages.

  const PoolUsage usage = (*pool)->Usage();
  EXPECT_EQ(usage.page_size, kHugePage);
  EXPECT_EQ(usage.huge_pages, "transparent");
  EXPECT_EQ(usage.used_bytes, 8 * kMiB);
  Result<SegmentAccess> access = (*pool)->OpenSegment(1, /*writable=*/false);
  ASSERT_OK(access);
  EXPECT_EQ(access->page_size, kHugePage);
}

TEST(CpuPoolBackingTest, ALargerConfiguredPageSizeWins) {
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(
      CpuPool::Options{.capacity_bytes = 8 * kMiB,
                       .page_size = 4 * kMiB,
                       .shm_prefix = TestPrefix(),
                       .huge_pages = {.mode = HugePages::kTransparent, .page_size = kHugePage}});
  ASSERT_OK(pool);
  EXPECT_EQ((*pool)->page_size(), 4 * kMiB);
  EXPECT_EQ((*pool)->Usage().page_size, 4 * kMiB);
}

TEST(CpuPoolBackingTest, OffReportsSmallPages) {
  Result<std::unique_ptr<CpuPool>> pool =
      CpuPool::Create(CpuPool::Options{.capacity_bytes = kMiB, .shm_prefix = TestPrefix()});
  ASSERT_OK(pool);
  EXPECT_EQ((*pool)->Usage().page_size, 4096u);
  EXPECT_EQ((*pool)->Usage().huge_pages, "off");
  Result<SegmentAccess> access = (*pool)->OpenSegment(1, /*writable=*/true);
  ASSERT_OK(access);
  EXPECT_EQ(access->page_size, 4096u);
}

TEST(CpuPoolBackingTest, RefusesBackingsThatCannotWork) {
  auto with = [](HugePageBacking backing) {
    return CpuPool::Create(CpuPool::Options{
        .capacity_bytes = 8 * kMiB, .shm_prefix = TestPrefix(), .huge_pages = std::move(backing)});
  };
  EXPECT_ERROR(with({.mode = HugePages::kAuto}), StatusCode::kInvalidArgument,
               {"pool cpu: huge_pages auto is not a backing"});
  EXPECT_ERROR(with({.mode = HugePages::kTransparent, .page_size = 3000}),
               StatusCode::kInvalidArgument, {"huge page size 3000"});
  EXPECT_ERROR(with({.mode = HugePages::kExplicit, .page_size = kHugePage}),
               StatusCode::kInvalidArgument, {"hugetlbfs_directory is empty"});
  EXPECT_ERROR(with({.mode = HugePages::kExplicit,
                     .page_size = kHugePage,
                     .hugetlbfs_directory = "/dev/shm"}),
               StatusCode::kFailedPrecondition,
               {"pool cpu: huge_pages explicit: /dev/shm is not a hugetlbfs mount"});
  EXPECT_ERROR(with({.mode = HugePages::kExplicit,
                     .page_size = kHugePage,
                     .hugetlbfs_directory = "/nonexistent/hugepages"}),
               StatusCode::kFailedPrecondition,
               {"statfs /nonexistent/hugepages", "No such file or directory"});
}

// ---- This host ----

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// A smaps field (in kB) of the mapping that starts at `base` in this process.
std::optional<std::uint64_t> SmapsField(const void* base, const std::string& field) {
  std::istringstream smaps(ReadFile("/proc/self/smaps"));
  std::ostringstream start;
  start << std::hex << reinterpret_cast<std::uintptr_t>(base) << "-";
  const std::regex header("^[0-9a-f]+-[0-9a-f]+ .*");
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    if (std::regex_match(line, header)) {
      inside = line.starts_with(start.str());
      continue;
    }
    if (inside && line.starts_with(field + ":")) {
      return std::stoull(line.substr(field.size() + 1));
    }
  }
  return std::nullopt;
}

// A mapping of a whole segment, unmapped in the destructor.
class SegmentMapping {
 public:
  SegmentMapping(const SegmentAccess& access, int protection)
      : size_(access.segment_size),
        base_(::mmap(nullptr, size_, protection, MAP_SHARED, access.fd.get(), 0)) {}
  SegmentMapping(const SegmentMapping&) = delete;
  SegmentMapping& operator=(const SegmentMapping&) = delete;
  ~SegmentMapping() {
    if (ok()) ::munmap(base_, size_);
  }
  [[nodiscard]] bool ok() const { return base_ != MAP_FAILED; }
  [[nodiscard]] char* bytes() const { return static_cast<char*>(base_); }
  // Reads every page, as a consumer would.
  [[nodiscard]] std::uint64_t TouchAll() const {
    std::uint64_t sum = 0;
    for (std::uint64_t offset = 0; offset < size_; offset += 4096) {
      sum += static_cast<unsigned char>(bytes()[offset]);
    }
    return sum;
  }

 private:
  std::uint64_t size_;
  void* base_;
};

TEST(ThisHostTest, TransparentIsHonouredOrRefusedWithTheReason) {
  const HostHugePageFacts facts = ReadHostHugePageFacts();
  Result<HugePageChoice> choice = ChooseHugePages(HugePages::kTransparent, 8 * kMiB, facts);
  if (!choice) {
    EXPECT_ERROR(choice, StatusCode::kFailedPrecondition, {"huge_pages transparent: "});
    GTEST_SKIP() << "this host refuses transparent huge pages for /dev/shm (shmem_enabled: "
                 << facts.shmem_enabled << "): " << choice.error().message();
  }
  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(CpuPool::Options{
      .capacity_bytes = 8 * kMiB, .shm_prefix = TestPrefix(), .huge_pages = choice->backing});
  ASSERT_OK(pool);
  EXPECT_GE((*pool)->page_size(), kHugePage);
  for (int i = 0; i < 3; ++i) {
    Result<PoolRange> range = (*pool)->Allocate(100);
    ASSERT_OK(range);
    EXPECT_EQ(range->offset % kHugePage, 0u);
  }
}

// Runs a test in a private mount namespace (so that its mounts are invisible to every other
// process and vanish with it), as root. Skips where either is not to be had.
class PrivateMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount file systems";
    if (::unshare(CLONE_NEWNS) != 0) {
      GTEST_SKIP() << "unshare(CLONE_NEWNS): " << std::strerror(errno);
    }
    // Mounts made here must not propagate back into the host's namespace.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      GTEST_SKIP() << "mount --make-rprivate /: " << std::strerror(errno);
    }
  }

  void TearDown() override {
    for (auto point = mounted_.rbegin(); point != mounted_.rend(); ++point) {
      EXPECT_EQ(::umount2(point->c_str(), MNT_DETACH), 0) << *point << ": " << std::strerror(errno);
    }
    for (const std::string& directory : made_) ::rmdir(directory.c_str());
  }

  // Mounts `type` at `point`; false (and a message in `why`) when the kernel refuses.
  bool Mount(const std::string& type, const std::string& point, const std::string& options,
             std::string& why) {
    if (::mount(type.c_str(), point.c_str(), type.c_str(), 0, options.c_str()) != 0) {
      why = "mount -t " + type + " -o " + options + " " + point + ": " + std::strerror(errno);
      return false;
    }
    mounted_.push_back(point);
    return true;
  }

  std::string MakeDirectory() {
    std::string pattern = "/tmp/hurray-test-hugetlbfs-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) return {};
    made_.push_back(pattern);
    return pattern;
  }

 private:
  std::vector<std::string> mounted_;
  std::vector<std::string> made_;
};

TEST_F(PrivateMountTest, TransparentPoolGetsHugePagesFromDevShmMountedHugeAdvise) {
  std::string why;
  if (!Mount("tmpfs", "/dev/shm", "huge=advise,size=64m,mode=1777", why)) GTEST_SKIP() << why;
  const HostHugePageFacts facts = ReadHostHugePageFacts();
  Result<HugePageChoice> choice = ChooseHugePages(HugePages::kTransparent, 8 * kMiB, facts);
  ASSERT_OK(choice);
  EXPECT_NE(choice->explanation.find("/dev/shm is mounted huge=advise"), std::string::npos)
      << choice->explanation;

  Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(CpuPool::Options{
      .capacity_bytes = 8 * kMiB, .shm_prefix = TestPrefix(), .huge_pages = choice->backing});
  ASSERT_OK(pool);
  Result<PoolRange> first = (*pool)->Allocate(1);
  Result<PoolRange> second = (*pool)->Allocate(1);
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(second->offset, kHugePage);

  // A consumer's read-only mapping is backed by huge pages (pages of a tmpfs mounted
  // huge=advise become huge only when faulted in through a MADV_HUGEPAGE mapping, which
  // Create did).
  Result<SegmentAccess> access = (*pool)->OpenSegment(1, /*writable=*/false);
  ASSERT_OK(access);
  SegmentMapping mapping(*access, PROT_READ);
  ASSERT_TRUE(mapping.ok()) << std::strerror(errno);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(mapping.bytes()) % kHugePage, 0u);
  ::madvise(mapping.bytes(), access->segment_size, MADV_HUGEPAGE);
  EXPECT_EQ(mapping.TouchAll(), 0u);
  const std::optional<std::uint64_t> huge_kib = SmapsField(mapping.bytes(), "ShmemPmdMapped");
  ASSERT_TRUE(huge_kib.has_value());
  EXPECT_GT(*huge_kib, 0u) << "no huge page backs the segment";
}

TEST_F(PrivateMountTest, SmallPagePoolGetsNoHugePagesFromDevShmMountedHugeAdvise) {
  std::string why;
  if (!Mount("tmpfs", "/dev/shm", "huge=advise,size=64m,mode=1777", why)) GTEST_SKIP() << why;
  Result<std::unique_ptr<CpuPool>> pool =
      CpuPool::Create(CpuPool::Options{.capacity_bytes = 8 * kMiB, .shm_prefix = TestPrefix()});
  ASSERT_OK(pool);
  Result<SegmentAccess> access = (*pool)->OpenSegment(1, /*writable=*/false);
  ASSERT_OK(access);
  SegmentMapping mapping(*access, PROT_READ);
  ASSERT_TRUE(mapping.ok());
  EXPECT_EQ(mapping.TouchAll(), 0u);
  EXPECT_EQ(SmapsField(mapping.bytes(), "ShmemPmdMapped"), 0u);
}

// vm.nr_hugepages raised by `count` for the object's life, then set back; an exclusive
// lock keeps test processes that do the same from interleaving.
class RaisedHugePages {
 public:
  // nullptr, with the reason in `why`, when the kernel refuses.
  static std::unique_ptr<RaisedHugePages> Raise(std::uint64_t count, std::string& why) {
    auto raised = std::unique_ptr<RaisedHugePages>(new RaisedHugePages());
    raised->lock_.Reset(
        ::open("/tmp/hurray-test-nr_hugepages.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!raised->lock_ || ::flock(raised->lock_.get(), LOCK_EX) != 0) {
      why = std::string("lock /tmp/hurray-test-nr_hugepages.lock: ") + std::strerror(errno);
      return nullptr;
    }
    const std::string text = ReadFile(kPath);
    if (text.empty()) {
      why = std::string(kPath) + " cannot be read";
      return nullptr;
    }
    raised->original_ = std::stoull(text);
    if (!Write(raised->original_ + count)) {
      why = std::string("write ") + kPath + ": " + std::strerror(errno);
      return nullptr;
    }
    raised->restore_ = true;
    return raised;
  }

  RaisedHugePages(const RaisedHugePages&) = delete;
  RaisedHugePages& operator=(const RaisedHugePages&) = delete;
  ~RaisedHugePages() {
    if (restore_) {
      EXPECT_TRUE(Write(original_)) << "vm.nr_hugepages not set back";
    }
  }

 private:
  static constexpr char kPath[] = "/proc/sys/vm/nr_hugepages";

  RaisedHugePages() = default;

  static bool Write(std::uint64_t value) {
    std::ofstream file(kPath);
    file << value << "\n";
    file.flush();
    return static_cast<bool>(file);
  }

  UniqueFd lock_;
  std::uint64_t original_ = 0;
  bool restore_ = false;
};

// The names in `directory`, but . and ..
std::vector<std::string> Entries(const std::string& directory) {
  std::vector<std::string> names;
  DIR* listing = ::opendir(directory.c_str());
  if (listing == nullptr) return {"(opendir failed)"};
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(listing);
  return names;
}

std::uint64_t FreeHugePages() {
  return MeminfoValue(ReadFile("/proc/meminfo"), "HugePages_Free").value_or(0);
}

TEST_F(PrivateMountTest, ExplicitPoolLivesOnHugetlbfsWithItsPagesReserved) {
  const std::uint64_t default_size =
      MeminfoValue(ReadFile("/proc/meminfo"), "Hugepagesize").value_or(0);
  if (default_size != kHugePage) {
    GTEST_SKIP() << "the default huge page size here is " << default_size << ", not 2 MiB";
  }
  const std::string directory = MakeDirectory();
  ASSERT_FALSE(directory.empty()) << std::strerror(errno);
  std::string why;
  if (!Mount("hugetlbfs", directory, "pagesize=2M", why)) GTEST_SKIP() << why;
  constexpr std::uint64_t kRaise = 32;
  std::unique_ptr<RaisedHugePages> raised = RaisedHugePages::Raise(kRaise, why);
  if (!raised) GTEST_SKIP() << why;
  const std::uint64_t free_before = FreeHugePages();
  if (free_before < kRaise) {
    GTEST_SKIP() << "the kernel found only " << free_before << " free huge pages";
  }

  // ChooseHugePages sees the mount and the pages (on this host ours is the only mount).
  const HostHugePageFacts facts = ReadHostHugePageFacts();
  Result<HugePageChoice> choice = ChooseHugePages(HugePages::kExplicit, 32 * kMiB, facts);
  ASSERT_OK(choice);
  EXPECT_EQ(choice->backing.mode, HugePages::kExplicit);
  EXPECT_EQ(choice->backing.page_size, kHugePage);
  Result<HugePageChoice> automatic = ChooseHugePages(HugePages::kAuto, 32 * kMiB, facts);
  ASSERT_OK(automatic);
  EXPECT_EQ(automatic->backing.mode, HugePages::kExplicit);
  EXPECT_ERROR(ChooseHugePages(HugePages::kExplicit, (free_before + 1) * kHugePage, facts),
               StatusCode::kResourceExhausted,
               {"HugePages_Free is " + std::to_string(free_before)});

  const HugePageBacking backing{
      .mode = HugePages::kExplicit, .page_size = kHugePage, .hugetlbfs_directory = directory};
  {
    const mode_t saved_umask = ::umask(0);
    Result<std::unique_ptr<CpuPool>> pool =
        CpuPool::Create(CpuPool::Options{.capacity_bytes = 32 * kMiB - 5,
                                         .segment_bytes = 16 * kMiB,
                                         .shm_prefix = TestPrefix(),
                                         .huge_pages = backing});
    ::umask(saved_umask);
    ASSERT_OK(pool);
    CpuPool& explicit_pool = **pool;
    EXPECT_EQ(explicit_pool.page_size(), kHugePage);
    EXPECT_EQ(explicit_pool.segment_count(), 2u);
    // fallocate took the pages from the kernel's pool at creation.
    EXPECT_EQ(FreeHugePages(), free_before - 16);

    // Segment files: in the mount, unguessable, mode 0600.
    const std::regex shape(directory + "/" + TestPrefix() + "-[0-9a-f]{32}");
    for (std::uint64_t id : {1u, 2u}) {
      const std::string path = *explicit_pool.SegmentPath(id);
      EXPECT_TRUE(std::regex_match(path, shape)) << path;
      struct stat info{};
      ASSERT_EQ(::stat(path.c_str(), &info), 0) << path << ": " << std::strerror(errno);
      EXPECT_TRUE(S_ISREG(info.st_mode));
      EXPECT_EQ(info.st_mode & 07777, 0600u);
      EXPECT_EQ(static_cast<std::uint64_t>(info.st_size), 16 * kMiB);
    }

    std::vector<PoolRange> ranges;
    for (const std::uint64_t size : {std::uint64_t{1}, 3 * kMiB, std::uint64_t{4096}}) {
      Result<PoolRange> range = explicit_pool.Allocate(size);
      ASSERT_OK(range);
      EXPECT_EQ(range->offset % kHugePage, 0u) << "size " << size;
      ranges.push_back(*range);
    }
    EXPECT_EQ(ranges[1].offset, kHugePage);
    const PoolUsage usage = explicit_pool.Usage();
    EXPECT_EQ(usage.page_size, kHugePage);
    EXPECT_EQ(usage.huge_pages, "explicit");
    EXPECT_EQ(usage.used_bytes, 8 * kMiB);

    // The descriptors work like /dev/shm's: read-write for the producer, O_RDONLY for
    // consumers, whose writable mappings the kernel refuses.
    Result<SegmentAccess> writer = explicit_pool.OpenSegment(1, /*writable=*/true);
    Result<SegmentAccess> reader = explicit_pool.OpenSegment(1, /*writable=*/false);
    ASSERT_OK(writer);
    ASSERT_OK(reader);
    EXPECT_EQ(writer->page_size, kHugePage);
    EXPECT_EQ(::fcntl(reader->fd.get(), F_GETFL) & O_ACCMODE, O_RDONLY);
    SegmentMapping write_mapping(*writer, PROT_READ | PROT_WRITE);
    SegmentMapping read_mapping(*reader, PROT_READ);
    ASSERT_TRUE(write_mapping.ok()) << std::strerror(errno);
    ASSERT_TRUE(read_mapping.ok()) << std::strerror(errno);
    std::memcpy(write_mapping.bytes() + ranges[1].offset, "huge", 5);
    EXPECT_STREQ(read_mapping.bytes() + ranges[1].offset, "huge");
    EXPECT_EQ(SmapsField(read_mapping.bytes(), "KernelPageSize"), kHugePage / kKiB);
    errno = 0;
    void* refused =
        ::mmap(nullptr, 16 * kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, reader->fd.get(), 0);
    EXPECT_EQ(refused, MAP_FAILED);
    EXPECT_EQ(errno, EACCES);
    if (refused != MAP_FAILED) ::munmap(refused, 16 * kMiB);
  }
  // The pool is gone, and so are its files; with no mapping left, its pages are free again.
  EXPECT_TRUE(Entries(directory).empty());
  EXPECT_EQ(FreeHugePages(), free_before);

  // A pool larger than the free pages fails at creation, naming them, and leaves nothing.
  Result<std::unique_ptr<CpuPool>> too_big =
      CpuPool::Create(CpuPool::Options{.capacity_bytes = (free_before + 2) * kHugePage,
                                       .shm_prefix = TestPrefix(),
                                       .huge_pages = backing});
  EXPECT_ERROR(too_big, StatusCode::kResourceExhausted,
               {"pool cpu: segment 1: cannot reserve", "bytes of huge pages",
                "No space left on device", "HugePages_Free is"});
  EXPECT_EQ(FreeHugePages(), free_before);
  EXPECT_TRUE(Entries(directory).empty());
}

}  // namespace
}  // namespace hurray::daemon
