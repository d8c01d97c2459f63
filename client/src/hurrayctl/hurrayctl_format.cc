#include "hurrayctl/hurrayctl_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace hurray::ctl {

std::string FormatBytes(std::uint64_t bytes) {
  constexpr std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  std::size_t unit = 0;
  auto value = static_cast<double>(bytes);
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  // 1023.96 KiB would print as "1024.0 KiB"; show it as the next unit instead.
  if (value >= 1023.95 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.1f %s", value, kUnits[unit]);
  return text.data();
}

std::string FormatTimestamp(std::int64_t unix_nanos) {
  if (unix_nanos <= 0) return "-";
  const auto seconds = static_cast<std::time_t>(unix_nanos / 1'000'000'000);
  std::tm local{};
  if (localtime_r(&seconds, &local) == nullptr) return "-";
  std::array<char, 32> text{};
  if (std::strftime(text.data(), text.size(), "%Y-%m-%d %H:%M:%S", &local) == 0) return "-";
  return text.data();
}

std::string FormatDuration(std::uint64_t seconds) {
  const std::uint64_t days = seconds / 86400;
  const std::uint64_t hours = seconds / 3600 % 24;
  const std::uint64_t minutes = seconds / 60 % 60;
  const std::uint64_t rest = seconds % 60;
  std::array<char, 64> text{};
  if (days > 0) {
    std::snprintf(text.data(), text.size(), "%llud %02lluh %02llum %02llus",
                  static_cast<unsigned long long>(days), static_cast<unsigned long long>(hours),
                  static_cast<unsigned long long>(minutes), static_cast<unsigned long long>(rest));
  } else if (hours > 0) {
    std::snprintf(text.data(), text.size(), "%lluh %02llum %02llus",
                  static_cast<unsigned long long>(hours), static_cast<unsigned long long>(minutes),
                  static_cast<unsigned long long>(rest));
  } else if (minutes > 0) {
    std::snprintf(text.data(), text.size(), "%llum %02llus",
                  static_cast<unsigned long long>(minutes), static_cast<unsigned long long>(rest));
  } else {
    std::snprintf(text.data(), text.size(), "%llus", static_cast<unsigned long long>(rest));
  }
  return text.data();
}

std::string FormatAge(std::int64_t then_nanos, std::int64_t now_nanos) {
  if (then_nanos <= 0) return "-";
  const std::int64_t elapsed = now_nanos > then_nanos ? now_nanos - then_nanos : 0;
  return FormatDuration(static_cast<std::uint64_t>(elapsed / 1'000'000'000)) + " ago";
}

std::int64_t UnixNanosNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FormatShape(std::span<const std::uint64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string FormatPercent(double fraction) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.1f%%", fraction * 100.0);
  return text.data();
}

TextTable::TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(rows_.front().size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render(std::string_view indent) const {
  std::vector<std::size_t> widths(rows_.front().size(), 0);
  for (const auto& row : rows_) {
    for (std::size_t column = 0; column < row.size(); ++column) {
      widths[column] = std::max(widths[column], row[column].size());
    }
  }
  std::string text;
  for (const auto& row : rows_) {
    std::string line(indent);
    for (std::size_t column = 0; column < row.size(); ++column) {
      line += row[column];
      if (column + 1 < row.size()) line.append(widths[column] - row[column].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line;
    text += '\n';
  }
  return text;
}

}  // namespace hurray::ctl
