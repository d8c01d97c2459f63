#include "hurrayctl/top_screen.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "hurrayctl/hurrayctl_format.h"
#include "hurrayctl/reply_text.h"

namespace hurray::ctl {
namespace {

// Appends the lines of `text` to `lines`.
void AppendLines(std::string_view text, std::vector<std::string>& lines) {
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    lines.emplace_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
}

// The tensors table, newest first, in at most `rows` lines (header included); the last line
// says how many did not fit.
std::string RenderTensors(std::span<const TensorSummary> tensors, std::int64_t now_nanos,
                          std::size_t rows) {
  std::vector<const TensorSummary*> newest(tensors.size());
  std::ranges::transform(tensors, newest.begin(),
                         [](const TensorSummary& summary) { return &summary; });
  // Newest first; names order tensors published in the same nanosecond.
  std::ranges::sort(newest, [](const TensorSummary* a, const TensorSummary* b) {
    if (a->published_at != b->published_at) return a->published_at > b->published_at;
    return a->name < b->name;
  });
  const std::size_t fit = rows < 1 ? 0 : rows - 1;
  const std::size_t shown = newest.size() <= fit ? newest.size() : (fit > 0 ? fit - 1 : 0);
  TextTable table(TensorColumns());
  for (std::size_t i = 0; i < shown; ++i) table.AddRow(TensorRow(*newest[i], now_nanos));
  std::string text = table.Render("  ");
  if (shown < newest.size()) text += fmt::format("  ... {} more\n", newest.size() - shown);
  return text;
}

}  // namespace

std::string RenderTopScreen(const DaemonStats& stats, std::span<const TensorSummary> tensors,
                            std::int64_t now_nanos, double interval_seconds, ScreenSize size) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format(
      "hurrayd up {}   sessions {}   leases {}   pending allocations {}   every {:.1f}s, q quits",
      FormatDuration(static_cast<std::uint64_t>(stats.uptime.count())), stats.session_count,
      stats.lease_count, stats.pending_allocation_count, interval_seconds));
  lines.emplace_back();
  lines.emplace_back("pools:");
  AppendLines(RenderPoolTable(stats, "  "), lines);
  lines.emplace_back();
  lines.push_back(fmt::format("tensors: {} ({} live versions), newest first", stats.tensor_count,
                              stats.version_count));
  const std::size_t left = size.rows > lines.size() ? size.rows - lines.size() : 0;
  AppendLines(RenderTensors(tensors, now_nanos, left), lines);

  std::string screen;
  for (std::size_t i = 0; i < lines.size() && i < size.rows; ++i) {
    screen += lines[i].substr(0, size.columns);
    screen += '\n';
  }
  return screen;
}

}  // namespace hurray::ctl
