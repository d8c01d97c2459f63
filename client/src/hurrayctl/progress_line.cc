#include "hurrayctl/progress_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hurrayctl/hurrayctl_format.h"

namespace hurray::ctl {
namespace {

// Moves to the start of the line and erases from the cursor to its end (ECMA-48 EL).
constexpr std::string_view kEraseLine = "\r\033[K";

}  // namespace

std::string FormatProgressLine(std::uint64_t done, std::uint64_t total,
                               std::chrono::nanoseconds elapsed) {
  const double fraction =
      total == 0 ? 1.0 : static_cast<double>(std::min(done, total)) / static_cast<double>(total);
  const double seconds = std::chrono::duration<double>(elapsed).count();
  std::string rate = "-";
  std::string left = "-";
  if (done > 0 && seconds > 0) {
    const double bytes_per_second = static_cast<double>(done) / seconds;
    rate = FormatBytes(static_cast<std::uint64_t>(bytes_per_second)) + "/s";
    const std::uint64_t remaining = total > done ? total - done : 0;
    // Capped (at ~31700 years) so that a stalled read never overflows the conversion.
    constexpr double kMostSeconds = 1e12;
    left = FormatDuration(static_cast<std::uint64_t>(
        std::min(std::ceil(static_cast<double>(remaining) / bytes_per_second), kMostSeconds)));
  }
  return fmt::format("{} / {}  {}  {}  {} left", FormatBytes(done), FormatBytes(total),
                     FormatPercent(fraction), rate, left);
}

ProgressLine::ProgressLine(std::FILE* out, bool enabled)
    : out_(out), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() { Clear(); }

void ProgressLine::Update(std::uint64_t done, std::uint64_t total) {
  if (!enabled_) return;
  const std::string line =
      FormatProgressLine(done, total, std::chrono::steady_clock::now() - start_);
  std::fputs(fmt::format("\r{}\033[K", line).c_str(), out_);
  std::fflush(out_);
  drawn_ = true;
}

void ProgressLine::Clear() {
  if (!drawn_) return;
  std::fputs(std::string(kEraseLine).c_str(), out_);
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace hurray::ctl
