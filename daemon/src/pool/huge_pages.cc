#include "pool/huge_pages.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>
#include <vector>

#include "pool/segment_place.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kSmallPage = 4096;
constexpr std::uint64_t kDefaultTransparentPage = std::uint64_t{2} << 20;

// The whole file, or "" when it cannot be read.
std::string ReadText(const char* path) {
  std::ifstream file(path);
  if (!file) return {};
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string_view Trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const std::size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  const std::size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

std::optional<std::uint64_t> ParseUnsigned(std::string_view text) {
  std::uint64_t value = 0;
  const auto [rest, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || rest != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return value;
}

bool IsPageSize(std::uint64_t value) { return value >= kSmallPage && std::has_single_bit(value); }

// One line of /proc/self/mounts.
struct Mount {
  std::string point;  // Octal escapes (\040 for a space) decoded.
  std::string type;
  std::string options;  // "rw,relatime,pagesize=2M".
};

// The kernel writes space, tab, newline and backslash in paths as \ and three octal digits.
std::string DecodeMountPath(std::string_view text) {
  std::string path;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      const std::string_view digits = text.substr(i + 1, 3);
      if (digits.find_first_not_of("01234567") == std::string_view::npos) {
        path +=
            static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    path += text[i];
  }
  return path;
}

// The mounts that are visible: of several mounts at one point, only the last (topmost).
std::vector<Mount> VisibleMounts(std::string_view mounts_text) {
  std::vector<Mount> mounts;
  std::istringstream lines{std::string(mounts_text)};
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string source;
    std::string point;
    Mount mount;
    if (!(fields >> source >> point >> mount.type >> mount.options)) continue;
    mount.point = DecodeMountPath(point);
    std::erase_if(mounts, [&](const Mount& earlier) { return earlier.point == mount.point; });
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

// The value of option `name` ("pagesize" in "rw,pagesize=2M" gives "2M"); "" for a flag
// without a value; nullopt when absent.
std::optional<std::string_view> MountOption(std::string_view options, std::string_view name) {
  while (!options.empty()) {
    const std::size_t comma = options.find(',');
    const std::string_view option = options.substr(0, comma);
    options = comma == std::string_view::npos ? std::string_view() : options.substr(comma + 1);
    if (option == name) return std::string_view();
    if (option.size() > name.size() && option.starts_with(name) && option[name.size()] == '=') {
      return option.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

// hugetlbfs writes its page size as "2M", "1024M" or "64K".
std::optional<std::uint64_t> ParseMountPageSize(std::string_view text) {
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      default:
        break;
    }
  }
  if (shift != 0) text.remove_suffix(1);
  const std::optional<std::uint64_t> number = ParseUnsigned(text);
  if (!number || *number > (UINT64_MAX >> shift)) return std::nullopt;
  return *number << shift;
}

// The policy shmem_enabled marks with brackets ("always [never] deny" gives "never"); the
// whole text when nothing is bracketed.
std::string_view SelectedPolicy(std::string_view text) {
  const std::size_t open = text.find('[');
  const std::size_t close = text.find(']', open);
  if (open == std::string_view::npos || close == std::string_view::npos) return Trim(text);
  return text.substr(open + 1, close - open - 1);
}

Result<HugePageChoice> ChooseExplicit(std::uint64_t capacity_bytes,
                                      const HostHugePageFacts& facts) {
  const std::optional<std::uint64_t> default_size = MeminfoValue(facts.meminfo, "Hugepagesize");
  if (!default_size || !IsPageSize(*default_size)) {
    return FailedPreconditionError(
        "/proc/meminfo has no Hugepagesize: this kernel has no hugetlb support");
  }
  const std::vector<Mount> mounts = VisibleMounts(facts.mounts);
  const Mount* chosen = nullptr;
  std::vector<std::string> passed_over;
  for (const Mount& mount : mounts) {
    if (mount.type != "hugetlbfs") continue;
    const std::optional<std::string_view> size_text = MountOption(mount.options, "pagesize");
    const std::optional<std::uint64_t> size =
        size_text ? ParseMountPageSize(*size_text) : default_size;
    std::string why;
    if (MountOption(mount.options, "ro")) {
      why = fmt::format("{} is read-only", mount.point);
    } else if (size != default_size) {
      why = fmt::format("{} has {} pages, not the default {}", mount.point,
                        size ? FormatPageSize(*size) : fmt::format("\"{}\"", *size_text),
                        FormatPageSize(*default_size));
    } else {
      chosen = &mount;
      break;
    }
    passed_over.push_back(std::move(why));
  }
  if (chosen == nullptr) {
    if (passed_over.empty()) {
      return FailedPreconditionError(
          "no hugetlbfs mount in /proc/self/mounts (mount -t hugetlbfs none /dev/hugepages)");
    }
    return FailedPreconditionError(
        fmt::format("no usable hugetlbfs mount: {}", fmt::join(passed_over, "; ")));
  }

  // HugePages_Rsvd counts pages promised to mappings that have not faulted them in yet: they
  // are in HugePages_Free, but not ours to take.
  const std::uint64_t free_pages = MeminfoValue(facts.meminfo, "HugePages_Free").value_or(0);
  const std::uint64_t reserved =
      std::min(free_pages, MeminfoValue(facts.meminfo, "HugePages_Rsvd").value_or(0));
  const std::uint64_t available = free_pages - reserved;
  const std::uint64_t needed =
      capacity_bytes / *default_size + (capacity_bytes % *default_size != 0 ? 1 : 0);
  if (needed > available) {
    return ResourceExhaustedError(
        fmt::format("capacity {} takes {} huge pages of {}, and HugePages_Free is {}{} (raise "
                    "vm.nr_hugepages, or lower the capacity)",
                    capacity_bytes, needed, FormatPageSize(*default_size), free_pages,
                    reserved != 0 ? fmt::format(", {} of them promised (HugePages_Rsvd)", reserved)
                                  : std::string()));
  }
  return HugePageChoice{
      .backing = {.mode = HugePages::kExplicit,
                  .page_size = *default_size,
                  .hugetlbfs_directory = chosen->point},
      .explanation = fmt::format("explicit on {}, {} pages, {} free (the pool takes {})",
                                 chosen->point, FormatPageSize(*default_size), available, needed)};
}

Result<HugePageChoice> ChooseTransparent(const HostHugePageFacts& facts) {
  std::uint64_t page_size = kDefaultTransparentPage;
  if (const std::optional<std::uint64_t> pmd = ParseUnsigned(Trim(facts.hpage_pmd_size));
      pmd && IsPageSize(*pmd)) {
    page_size = *pmd;
  }
  if (Trim(facts.shmem_enabled).empty()) {
    return FailedPreconditionError(
        "the kernel has no transparent huge pages for shared memory "
        "(/sys/kernel/mm/transparent_hugepage/shmem_enabled is missing)");
  }
  const std::string policy(SelectedPolicy(facts.shmem_enabled));
  auto chosen = [&](const std::string& why) {
    return HugePageChoice{.backing = {.mode = HugePages::kTransparent, .page_size = page_size},
                          .explanation = fmt::format("transparent on /dev/shm, {} pages ({})",
                                                     FormatPageSize(page_size), why)};
  };
  if (policy == "deny") {
    return FailedPreconditionError(
        "shmem_enabled is deny: the kernel refuses transparent huge pages to every tmpfs");
  }
  if (policy == "force") return chosen("shmem_enabled is force");

  const std::vector<Mount> mounts = VisibleMounts(facts.mounts);
  const auto shm =
      std::ranges::find_if(mounts, [](const Mount& mount) { return mount.point == kShmDirectory; });
  if (shm == mounts.end() || shm->type != "tmpfs") {
    return FailedPreconditionError(
        fmt::format("no tmpfs is mounted on /dev/shm, and shmem_enabled is {}, not force", policy));
  }
  const std::optional<std::string_view> huge = MountOption(shm->options, "huge");
  if (huge && (*huge == "always" || *huge == "within_size" || *huge == "advise")) {
    return chosen(fmt::format("/dev/shm is mounted huge={}", *huge));
  }
  const std::string mounted = huge ? fmt::format("/dev/shm is mounted huge={}", *huge)
                                   : std::string("/dev/shm is mounted without huge=");
  return FailedPreconditionError(
      fmt::format("{} and shmem_enabled is {}, not force (mount -o remount,huge=advise /dev/shm)",
                  mounted, policy));
}

}  // namespace

std::string_view HugePagesName(HugePages mode) {
  switch (mode) {
    case HugePages::kOff:
      return "off";
    case HugePages::kTransparent:
      return "transparent";
    case HugePages::kExplicit:
      return "explicit";
    case HugePages::kAuto:
      return "auto";
  }
  return "off";
}

Result<HugePages> ParseHugePages(std::string_view text) {
  for (const HugePages mode :
       {HugePages::kOff, HugePages::kTransparent, HugePages::kExplicit, HugePages::kAuto}) {
    if (text == HugePagesName(mode)) return mode;
  }
  return InvalidArgumentError(
      fmt::format("\"{}\" is not off, transparent, explicit or auto", text));
}

HostHugePageFacts ReadHostHugePageFacts() {
  return HostHugePageFacts{
      .mounts = ReadText("/proc/self/mounts"),
      .meminfo = ReadText("/proc/meminfo"),
      .shmem_enabled = ReadText("/sys/kernel/mm/transparent_hugepage/shmem_enabled"),
      .hpage_pmd_size = ReadText("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")};
}

std::optional<std::uint64_t> MeminfoValue(std::string_view meminfo, std::string_view key) {
  while (!meminfo.empty()) {
    const std::size_t newline = meminfo.find('\n');
    std::string_view line = meminfo.substr(0, newline);
    meminfo = newline == std::string_view::npos ? std::string_view() : meminfo.substr(newline + 1);
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') continue;
    line = Trim(line.substr(key.size() + 1));
    std::uint64_t multiplier = 1;
    if (line.ends_with(" kB")) {
      line = Trim(line.substr(0, line.size() - 3));
      multiplier = 1024;
    }
    const std::optional<std::uint64_t> value = ParseUnsigned(line);
    if (!value || *value > UINT64_MAX / multiplier) return std::nullopt;
    return *value * multiplier;
  }
  return std::nullopt;
}

Result<HugePageChoice> ChooseHugePages(HugePages requested, std::uint64_t capacity_bytes,
                                       const HostHugePageFacts& facts) {
  switch (requested) {
    case HugePages::kOff:
      return HugePageChoice{.backing = {}, .explanation = "off: 4 KiB pages"};
    case HugePages::kExplicit: {
      Result<HugePageChoice> choice = ChooseExplicit(capacity_bytes, facts);
      if (!choice) return std::unexpected(choice.error().WithContext("huge_pages explicit"));
      return choice;
    }
    case HugePages::kTransparent: {
      Result<HugePageChoice> choice = ChooseTransparent(facts);
      if (!choice) return std::unexpected(choice.error().WithContext("huge_pages transparent"));
      return choice;
    }
    case HugePages::kAuto:
      break;
  }
  Result<HugePageChoice> explicit_choice = ChooseExplicit(capacity_bytes, facts);
  if (explicit_choice) return explicit_choice;
  Result<HugePageChoice> transparent_choice = ChooseTransparent(facts);
  if (transparent_choice) {
    fmt::format_to(std::back_inserter(transparent_choice->explanation), "; not explicit: {}",
                   explicit_choice.error().message());
    return transparent_choice;
  }
  return HugePageChoice{.backing = {},
                        .explanation = fmt::format("off: fell back to 4 KiB pages: {}, and {}",
                                                   explicit_choice.error().message(),
                                                   transparent_choice.error().message())};
}

std::string FormatPageSize(std::uint64_t bytes) {
  static constexpr std::pair<int, std::string_view> kUnits[] = {
      {40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}};
  for (const auto& [shift, unit] : kUnits) {
    const std::uint64_t granule = std::uint64_t{1} << shift;
    if (bytes >= granule && bytes % granule == 0) {
      return fmt::format("{} {}", bytes >> shift, unit);
    }
  }
  return fmt::format("{} bytes", bytes);
}

}  // namespace hurray::daemon
