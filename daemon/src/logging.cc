#include "logging.h"

#include <fmt/format.h>
#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

namespace hurray::daemon {
namespace {

thread_local const LogFields* current_fields = nullptr;

// The syslog priority of a level (sd-daemon.h's SD_DEBUG ... SD_CRIT), which the journal
// reads from a line's "<N>" prefix.
int JournalPriority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    default:
      return 2;
  }
}

// "2026-12-01 18:56:16.123" (text) or "2026-12-01T18:56:16.123456Z" (json), in UTC.
std::string Timestamp(std::chrono::system_clock::time_point time, LogFormat format) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  const auto seconds = static_cast<time_t>(micros / 1'000'000);
  tm utc{};
  ::gmtime_r(&seconds, &utc);
  const auto fraction = micros % 1'000'000;
  if (format == LogFormat::kText) {
    return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}", utc.tm_year + 1900,
                       utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                       fraction / 1000);
  }
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, fraction);
}

std::string JsonLine(std::string_view timestamp, std::string_view level, std::string_view message,
                     const LogFields* fields) {
  nlohmann::ordered_json line;
  if (!timestamp.empty()) line["time"] = timestamp;
  line["level"] = level;
  line["message"] = message;
  if (fields != nullptr) {
    if (fields->session != 0) line["session"] = fields->session;
    if (fields->pid) line["pid"] = *fields->pid;
    if (fields->uid) line["uid"] = *fields->uid;
    if (!fields->tensor.empty()) line["tensor"] = fields->tensor;
  }
  // Bytes that are not UTF-8 (a peer's garbage quoted in a message) become U+FFFD.
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string Line(const LoggingOptions& options, spdlog::level::level_enum level,
                 std::chrono::system_clock::time_point time, std::string_view message,
                 const LogFields* fields) {
  const spdlog::string_view_t name = spdlog::level::to_string_view(level);
  const std::string_view level_name(name.data(), name.size());
  std::string line = options.journal ? fmt::format("<{}>", JournalPriority(level)) : std::string();
  const std::string timestamp = options.journal ? std::string() : Timestamp(time, options.format);
  if (options.format == LogFormat::kJson) {
    line += JsonLine(timestamp, level_name, message, fields);
  } else if (options.journal) {
    line += message;
  } else {
    line += fmt::format("[{}] [{}] {}", timestamp, level_name, message);
  }
  return line;
}

class LineFormatter final : public spdlog::formatter {
 public:
  explicit LineFormatter(LoggingOptions options) : options_(std::move(options)) {}

  void format(const spdlog::details::log_msg& message, spdlog::memory_buf_t& dest) override {
    const std::string line = Line(options_, message.level, message.time,
                                  std::string_view(message.payload.data(), message.payload.size()),
                                  LogContext::Current());
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }

  [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(options_);
  }

 private:
  LoggingOptions options_;
};

}  // namespace

Result<LogFormat> ParseLogFormat(std::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return InvalidArgumentError(fmt::format("\"{}\" is not a log format: text or json", text));
}

std::string_view LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

LogContext::LogContext(const LogFields& fields) : fields_(fields), outer_(current_fields) {
  current_fields = &fields_;
}

LogContext::~LogContext() { current_fields = outer_; }

const LogFields* LogContext::Current() { return current_fields; }

void ConfigureLogging(const LoggingOptions& options) {
  spdlog::set_level(spdlog::level::from_str(options.level));
  spdlog::set_formatter(std::make_unique<LineFormatter>(options));
}

bool StdoutIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");  // NOLINT(concurrency-mt-unsafe): start-up
  if (stream == nullptr) return false;
  const std::string_view text(stream);
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (std::from_chars(begin, begin + colon, device).ec != std::errc() ||
      std::from_chars(begin + colon + 1, end, inode).ec != std::errc()) {
    return false;
  }
  struct stat out{};
  return ::fstat(STDOUT_FILENO, &out) == 0 && out.st_dev == device && out.st_ino == inode;
}

std::string FormatLogLine(const LoggingOptions& options, std::string_view level,
                          std::string_view message, const LogFields* fields) {
  return Line(options, spdlog::level::from_str(std::string(level)),
              std::chrono::system_clock::now(), message, fields);
}

}  // namespace hurray::daemon
