// Human-readable rendering for hurrayctl: sizes in binary units, times, durations, shapes
// and plain-text tables. Pure functions and values; thread-safe (FormatTimestamp reads the
// local time zone).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hurray::ctl {

// A byte count in binary units: "0 B", "1023 B", "1.0 KiB", "1.5 MiB", "64.0 GiB"; up to EiB.
[[nodiscard]] std::string FormatBytes(std::uint64_t bytes);

// Nanoseconds since the Unix epoch as local time, "2025-01-31 14:05:09"; "-" for 0 or less.
[[nodiscard]] std::string FormatTimestamp(std::int64_t unix_nanos);

// A duration in seconds: "42s", "3m 07s", "2h 03m 07s", "5d 02h 03m 07s".
[[nodiscard]] std::string FormatDuration(std::uint64_t seconds);

// How long before `now_nanos` `then_nanos` was (both nanoseconds since the Unix epoch), as
// FormatDuration writes it followed by " ago": "42s ago", "3m 07s ago"; "-" when `then_nanos`
// is 0 or less. A time after `now_nanos` (clocks of two hosts) reads "0s ago".
[[nodiscard]] std::string FormatAge(std::int64_t then_nanos, std::int64_t now_nanos);

// Nanoseconds since the Unix epoch now, by the system clock.
[[nodiscard]] std::int64_t UnixNanosNow();

// A shape as TensorDescriptor::ToString writes it: "[3, 4]"; "[]" for a scalar.
[[nodiscard]] std::string FormatShape(std::span<const std::uint64_t> shape);

// A fraction as a percentage with one decimal: 0.125 -> "12.5%".
[[nodiscard]] std::string FormatPercent(double fraction);

// Rows of text in left-aligned columns separated by two spaces, without trailing spaces.
// A value type; not thread-safe.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header);

  // Adds a row; missing cells are empty, extra cells are dropped.
  void AddRow(std::vector<std::string> cells);

  // The header and every row, each line starting with `indent` and ending with '\n'.
  [[nodiscard]] std::string Render(std::string_view indent = {}) const;

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0] is the header.
};

}  // namespace hurray::ctl
