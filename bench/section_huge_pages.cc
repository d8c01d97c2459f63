// Section 6, huge pages: sections 1 and 2 again with the CPU pool backed by huge pages.
//
// HOOK: the pool option (cpu_pool.huge_pages) is being added to hurrayd in another change.
// This section runs only with --huge-pages and only when `hurrayd --print-config` shows the
// option; otherwise it says why it was skipped. The daemon's config then carries
// `huge_pages = "auto"` (--huge-pages-mode; or `true` if the option turns out a boolean)
// under [cpu_pool] (Harness::FreshDaemon), and the figures are reported here under keys
// starting "huge_pages.", beside the same figures without huge pages.
#include <fmt/format.h>
#include <sys/wait.h>

#include <optional>
#include <sstream>

#include "sections.h"
#include "testing/child_process.h"

namespace hurray::bench {
namespace {

using ::hurray::testing::ChildProcess;
using ::hurray::testing::DescribeWaitStatus;
using std::chrono::seconds;

}  // namespace

Result<std::optional<std::string>> HugePagesSetting(const std::string& hurrayd_path,
                                                    const std::string& mode) {
  auto child = ChildProcess::Start({hurrayd_path, "--print-config"}, {});
  if (!child) return std::unexpected(child.error());
  std::string text;
  while (auto line = child->ReadLine(seconds(10))) text += *line + "\n";
  const auto status = child->Wait(seconds(10));
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return InternalError(hurrayd_path + " --print-config " +
                         (status ? DescribeWaitStatus(*status) : std::string("did not end")));
  }
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("huge_pages")) continue;
    const auto equals = line.find('=');
    if (equals == std::string::npos) continue;
    const auto value = line.find_first_not_of(' ', equals + 1);
    if (value == std::string::npos) continue;
    if (line[value] == '\'' || line[value] == '"') return "\"" + mode + "\"";
    return std::string("true");
  }
  return std::nullopt;
}

Status RunHugePages(Harness& harness) {
  constexpr int kSection = 6;
  Report& report = harness.report();
  HURRAY_ASSIGN_OR_RETURN(
      const std::optional<std::string> setting,
      HugePagesSetting(harness.options().hurrayd_path, harness.options().huge_pages_mode));
  if (!setting) {
    report.AddNote(kSection,
                   "skipped: this hurrayd has no cpu_pool.huge_pages option (hurrayd "
                   "--print-config does not show it); once it has, run with --huge-pages");
    return {};
  }
  if (!harness.options().huge_pages) {
    report.AddNote(kSection,
                   "skipped: hurrayd has cpu_pool.huge_pages; run with --huge-pages to measure "
                   "sections 1-2 with it");
    return {};
  }
  harness.set_huge_pages_setting(*setting);
  harness.Progress("section 6: sections 1-2 again with huge pages");
  auto daemon = harness.FreshDaemon(/*huge_pages=*/true);
  if (!daemon) return std::unexpected(daemon.error());
  // What the daemon made of the setting: its start-up line about huge pages.
  std::string outcome = "(the daemon's log says nothing about huge pages)";
  std::istringstream log((*daemon)->Log(1 << 16));
  for (std::string line; std::getline(log, line);) {
    if (line.find("huge pages") != std::string::npos) outcome = "; its log: " + line;
  }
  report.AddNote(kSection,
                 fmt::format("hurrayd ran with [cpu_pool] huge_pages = {}{}", *setting, outcome));
  const SectionRun run{.section = kSection,
                       .key_prefix = "huge_pages.",
                       .label_suffix = " [huge pages]",
                       .huge_pages = true,
                       .baselines = false};
  if (auto size = RunSizeIndependence(harness, run); !size) return size;
  if (auto bytes = RunGettingTheBytes(harness, run); !bytes) return bytes;
  for (const std::string figure : {"bytes.hurray_first_total", "bytes.hurray_repeat_total",
                                   "size.consumer_first.4KiB", "size.producer_steady.4KiB"}) {
    report.AddRatio(RatioSpec{.key = "huge_pages.ratio." + figure,
                              .section = kSection,
                              .label = figure + ": huge pages / 4 KiB pages",
                              .numerator = "huge_pages." + figure,
                              .denominator = figure});
  }
  return harness.StopDaemon();
}

}  // namespace hurray::bench
