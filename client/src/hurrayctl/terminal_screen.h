// The terminal as `hurrayctl top` uses it: the alternate screen with the cursor hidden, and
// the input in raw mode (no echo, no line editing, keys as they are typed, Ctrl-C as the byte
// 3 rather than SIGINT), all restored when the TerminalScreen ends. Move-only; one thread at a
// time. The caller handles SIGTERM and the like so that the destructor runs.
#pragma once

#include <termios.h>

#include <optional>
#include <string_view>

#include "hurray/error.h"
#include "hurrayctl/top_screen.h"

namespace hurray::ctl {

class TerminalScreen {
 public:
  // Takes over the terminal that `input_fd` (keys) and `output_fd` (the screen) are.
  // FAILED_PRECONDITION when either is not a terminal; errno-derived errors from tcgetattr or
  // tcsetattr.
  [[nodiscard]] static Result<TerminalScreen> Enter(int input_fd, int output_fd);

  TerminalScreen(TerminalScreen&& other) noexcept;
  TerminalScreen& operator=(TerminalScreen&&) = delete;
  TerminalScreen(const TerminalScreen&) = delete;
  TerminalScreen& operator=(const TerminalScreen&) = delete;
  // Leaves the alternate screen, shows the cursor and restores the input's settings.
  ~TerminalScreen();

  // The terminal's size now (24x80 when the terminal does not say).
  [[nodiscard]] ScreenSize Size() const;

  // Draws `screen` (lines ending in '\n') from the top left, each line over the old one and
  // the rest of the screen erased: the view is replaced in place, never scrolled.
  [[nodiscard]] Status Draw(std::string_view screen) const;

 private:
  TerminalScreen(int input_fd, int output_fd, const termios& saved);

  int input_fd_;
  int output_fd_;
  std::optional<termios> saved_;  // Empty once moved from.
};

}  // namespace hurray::ctl
