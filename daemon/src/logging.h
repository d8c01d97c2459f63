// hurrayd's log lines: the format (text or one JSON object per line), the fields that apply
// to a thread's lines while it serves a session, and whether the lines go to the journal.
//
// ConfigureLogging sets spdlog's default logger once at start-up; LogContext is per thread
// (the formatter reads the fields of the thread that logs: spdlog's default logger formats
// on the calling thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

enum class LogFormat : std::uint8_t {
  // "[2026-12-01 18:56:16.123] [info] message": for a terminal or a file.
  kText,
  // {"time":"2026-12-01T18:56:16.123456Z","level":"info","message":"...","session":3,
  //  "pid":1234,"uid":1000,"tensor":"llama/w"}: for a log shipper; fields only where they
  // apply.
  kJson,
};

// "text" or "json"; INVALID_ARGUMENT naming the value otherwise.
[[nodiscard]] Result<LogFormat> ParseLogFormat(std::string_view text);
[[nodiscard]] std::string_view LogFormatName(LogFormat format);

// The fields of the lines a thread logs while a LogContext lives on it: the session being
// served, its peer, and the tensor the request names. Zero / empty: not known.
struct LogFields {
  std::uint64_t session = 0;
  std::optional<pid_t> pid;
  std::optional<uid_t> uid;
  std::string_view tensor;  // Must outlive the LogContext.
};

// Sets the fields of this thread's log lines until it is destroyed, then restores those of
// the LogContext it was made in (contexts nest). Not movable: it lives on one stack frame.
class LogContext {
 public:
  explicit LogContext(const LogFields& fields);
  LogContext(const LogContext&) = delete;
  LogContext& operator=(const LogContext&) = delete;
  ~LogContext();

  // The fields of the innermost LogContext of this thread; null when there is none.
  [[nodiscard]] static const LogFields* Current();

 private:
  LogFields fields_;
  const LogFields* outer_;
};

// The options of ConfigureLogging.
struct LoggingOptions {
  LogFormat format = LogFormat::kText;
  // trace, debug, info, warn, error, critical or off (already checked).
  std::string level = "info";
  // The lines go to the systemd journal: no timestamps of their own (the journal stamps
  // each line), and each starts with its syslog priority ("<6>"), which the journal reads.
  bool journal = false;
};

// The default logger (stdout) formats its lines as `options` says, from now on.
void ConfigureLogging(const LoggingOptions& options);

// Whether stdout is the systemd journal's stream: $JOURNAL_STREAM names its device and
// inode ("8:12345"), which systemd sets for a service whose output goes to the journal.
[[nodiscard]] bool StdoutIsJournal();

// One formatted line (no newline) of a message at `level` ("info", ...), as the default
// logger writes it; for tests. `fields` may be null.
[[nodiscard]] std::string FormatLogLine(const LoggingOptions& options, std::string_view level,
                                        std::string_view message, const LogFields* fields);

}  // namespace hurray::daemon
