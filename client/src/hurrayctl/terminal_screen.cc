#include "hurrayctl/terminal_screen.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "hurray/errno_error.h"

namespace hurray::ctl {
namespace {

// ECMA-48 / xterm sequences: the alternate screen (1049), the cursor's visibility (25), the
// cursor to the top left, erase to the end of the line, erase to the end of the screen.
constexpr std::string_view kEnter = "\033[?1049h\033[?25l";
constexpr std::string_view kLeave = "\033[?25h\033[?1049l";
constexpr std::string_view kHome = "\033[H";
constexpr std::string_view kEraseLineEnd = "\033[K";
constexpr std::string_view kEraseScreenEnd = "\033[J";

Status WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t count = ::write(fd, text.data(), text.size());
    if (count < 0) {
      if (errno == EINTR) continue;
      return ErrnoFailure("write", "the terminal", errno);
    }
    text.remove_prefix(static_cast<std::size_t>(count));
  }
  return {};
}

}  // namespace

Result<TerminalScreen> TerminalScreen::Enter(int input_fd, int output_fd) {
  if (::isatty(output_fd) != 1) {
    return FailedPreconditionError(
        "top draws a live view on a terminal, and stdout is not one; for a one-time listing use "
        "`hurrayctl stats` and `hurrayctl ls` (with --json for scripts)");
  }
  if (::isatty(input_fd) != 1) {
    return FailedPreconditionError(
        "top reads its keys (q quits) from a terminal, and stdin is not one");
  }
  termios saved{};
  if (::tcgetattr(input_fd, &saved) != 0) {
    return ErrnoFailure("tcgetattr", "stdin", errno);
  }
  termios raw = saved;
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | ISIG | IEXTEN);
  raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  if (::tcsetattr(input_fd, TCSAFLUSH, &raw) != 0) {
    return ErrnoFailure("tcsetattr", "stdin", errno);
  }
  TerminalScreen screen(input_fd, output_fd, saved);
  HURRAY_RETURN_IF_ERROR(WriteAll(output_fd, kEnter));
  return screen;
}

TerminalScreen::TerminalScreen(int input_fd, int output_fd, const termios& saved)
    : input_fd_(input_fd), output_fd_(output_fd), saved_(saved) {}

TerminalScreen::TerminalScreen(TerminalScreen&& other) noexcept
    : input_fd_(other.input_fd_),
      output_fd_(other.output_fd_),
      saved_(std::exchange(other.saved_, std::nullopt)) {}

TerminalScreen::~TerminalScreen() {
  if (!saved_) return;
  (void)WriteAll(output_fd_, kLeave);
  ::tcsetattr(input_fd_, TCSAFLUSH, &*saved_);
}

ScreenSize TerminalScreen::Size() const {
  winsize window{};
  if (::ioctl(output_fd_, TIOCGWINSZ, &window) != 0 || window.ws_row == 0 || window.ws_col == 0) {
    return {};
  }
  return {.rows = window.ws_row, .columns = window.ws_col};
}

Status TerminalScreen::Draw(std::string_view screen) const {
  std::string frame(kHome);
  while (!screen.empty()) {
    const std::size_t end = screen.find('\n');
    const std::string_view line = screen.substr(0, end);
    frame += line;
    frame += kEraseLineEnd;
    if (end == std::string_view::npos) break;
    screen.remove_prefix(end + 1);
    // The last line gets no newline: on the screen's bottom row one would scroll it.
    if (!screen.empty()) frame += "\r\n";
  }
  frame += kEraseScreenEnd;
  return WriteAll(output_fd_, frame);
}

}  // namespace hurray::ctl
