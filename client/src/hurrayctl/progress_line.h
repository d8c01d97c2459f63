// The progress line import, save and load draw on a terminal: bytes done of the total, the
// rate and the time left, redrawn in place with '\r' and cleared at the end.
//
// FormatProgressLine is a pure function (thread-safe). ProgressLine is a value for one thread
// at a time; it writes to the FILE* it was given (stderr in hurrayctl).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace hurray::ctl {

// "1.5 GiB / 4.0 GiB  37.5%  1.2 GiB/s  3s left": bytes in binary units, the rate of
// `done` over `elapsed`, and the time left at that rate rounded up. Before any rate is known
// (nothing done, or no time elapsed) the rate and time left read "-". A total of 0 reads
// 100.0%.
[[nodiscard]] std::string FormatProgressLine(std::uint64_t done, std::uint64_t total,
                                             std::chrono::nanoseconds elapsed);

// Draws FormatProgressLine on `out` when enabled, each time over the last ("\r" + line +
// erase to the end of the line), and erases it on Clear (or destruction). Disabled: writes
// nothing at all.
class ProgressLine {
 public:
  ProgressLine(std::FILE* out, bool enabled);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine();

  // Redraws the line for `done` of `total`, timed from construction.
  void Update(std::uint64_t done, std::uint64_t total);
  // Erases the line, if one was drawn.
  void Clear();

 private:
  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hurray::ctl
