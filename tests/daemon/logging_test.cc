// hurrayd's log lines (daemon/src/logging.h): the text and JSON formats, the fields of a
// thread's LogContext, the journal's form; and a real hurrayd logging JSON with the session,
// peer pid and uid of a client that connected.
#include "logging.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "hurray/client.h"
#include "testing/daemon_process.h"
#include "testing/status_matchers.h"

#ifndef HURRAYD_PATH
#error "HURRAYD_PATH must name the hurrayd binary"
#endif

namespace hurray::daemon {
namespace {

using nlohmann::json;

TEST(LoggingTest, FormatsAreNamed) {
  EXPECT_EQ(ParseLogFormat("text").value(), LogFormat::kText);
  EXPECT_EQ(ParseLogFormat("json").value(), LogFormat::kJson);
  EXPECT_ERROR(ParseLogFormat("JSON"), StatusCode::kInvalidArgument,
               {"\"JSON\" is not a log format: text or json"});
  EXPECT_EQ(LogFormatName(LogFormat::kJson), "json");
}

TEST(LoggingTest, JsonLinesCarryTheFieldsThatApply) {
  const LogFields fields{.session = 7, .pid = 1234, .uid = 1000, .tensor = "llama/w"};
  const json line = json::parse(
      FormatLogLine({.format = LogFormat::kJson}, "warn", "lease \"x\" ended", &fields));
  EXPECT_EQ(line["level"], "warning");
  EXPECT_EQ(line["message"], "lease \"x\" ended");
  EXPECT_EQ(line["session"], 7);
  EXPECT_EQ(line["pid"], 1234);
  EXPECT_EQ(line["uid"], 1000);
  EXPECT_EQ(line["tensor"], "llama/w");
  // "2026-12-01T18:56:16.123456Z"
  ASSERT_TRUE(line["time"].is_string());
  EXPECT_EQ(line["time"].get<std::string>().size(), 27u);
  EXPECT_EQ(line["time"].get<std::string>().back(), 'Z');

  const json bare = json::parse(FormatLogLine({.format = LogFormat::kJson}, "info", "up", nullptr));
  EXPECT_FALSE(bare.contains("session"));
  EXPECT_FALSE(bare.contains("pid"));
  EXPECT_FALSE(bare.contains("tensor"));
}

TEST(LoggingTest, BytesThatAreNotUtf8StillMakeJson) {
  const json line =
      json::parse(FormatLogLine({.format = LogFormat::kJson}, "info", "name \xff\xfe", nullptr));
  EXPECT_EQ(line["message"], "name \xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(LoggingTest, TheJournalGetsPrioritiesAndNoTimestamps) {
  EXPECT_EQ(FormatLogLine({.format = LogFormat::kText, .journal = true}, "warn", "full", nullptr),
            "<4>full");
  EXPECT_EQ(FormatLogLine({.format = LogFormat::kText, .journal = true}, "debug", "d", nullptr),
            "<7>d");
  const std::string line =
      FormatLogLine({.format = LogFormat::kJson, .journal = true}, "error", "bad", nullptr);
  ASSERT_EQ(line.rfind("<3>", 0), 0u) << line;
  const json object = json::parse(line.substr(3));
  EXPECT_FALSE(object.contains("time"));
  EXPECT_EQ(object["message"], "bad");
}

TEST(LoggingTest, TextLinesHaveTimeLevelAndMessage) {
  const std::string line = FormatLogLine({.format = LogFormat::kText}, "info", "hello", nullptr);
  // "[2026-12-01 18:56:16.123] [info] hello"
  ASSERT_EQ(line.size(), 38u) << line;
  EXPECT_EQ(line.front(), '[');
  EXPECT_EQ(line.substr(25), " [info] hello");
}

TEST(LoggingTest, ContextsNestAndRestore) {
  EXPECT_EQ(LogContext::Current(), nullptr);
  {
    const LogContext outer({.session = 1});
    ASSERT_NE(LogContext::Current(), nullptr);
    {
      const LogContext inner({.session = 2, .tensor = "a/b"});
      EXPECT_EQ(LogContext::Current()->session, 2u);
    }
    EXPECT_EQ(LogContext::Current()->session, 1u);
    EXPECT_TRUE(LogContext::Current()->tensor.empty());
  }
  EXPECT_EQ(LogContext::Current(), nullptr);
}

TEST(LoggingTest, StdoutIsTheJournalOnlyWhenJournalStreamNamesIt) {
  struct stat out{};
  ASSERT_EQ(::fstat(STDOUT_FILENO, &out), 0);
  const std::string mine = std::to_string(out.st_dev) + ":" + std::to_string(out.st_ino);
  ASSERT_EQ(::setenv("JOURNAL_STREAM", mine.c_str(), 1), 0);
  EXPECT_TRUE(StdoutIsJournal());
  const std::string other = std::to_string(out.st_dev) + ":" + std::to_string(out.st_ino + 1);
  ASSERT_EQ(::setenv("JOURNAL_STREAM", other.c_str(), 1), 0);
  EXPECT_FALSE(StdoutIsJournal());
  ASSERT_EQ(::setenv("JOURNAL_STREAM", "garbage", 1), 0);
  EXPECT_FALSE(StdoutIsJournal());
  ASSERT_EQ(::unsetenv("JOURNAL_STREAM"), 0);
  EXPECT_FALSE(StdoutIsJournal());
}

// Every line a real hurrayd writes with log_format = "json" is one JSON object, and the lines
// logged while it served this process's session carry the session, and this pid and uid.
TEST(LoggingTest, TheDaemonLogsJsonWithTheSessionsFields) {
  ASSERT_OK_AND_ASSIGN(
      auto daemon,
      testing::DaemonProcess::Start(
          {.binary = HURRAYD_PATH, .log_level = "debug", .settings = {"log_format = \"json\""}}));
  std::uint64_t session_id = 0;
  {
    auto client = Client::Connect(Client::Options{.socket_path = daemon->socket_path()});
    ASSERT_OK(client);
    ASSERT_OK_AND_ASSIGN(const DaemonStats stats, (*client)->Stats());
    EXPECT_EQ(stats.session_count, 1u);
  }
  ASSERT_OK(daemon->Stop());
  std::istringstream log(daemon->Log());
  std::string text;
  int lines = 0;
  bool saw_session = false;
  while (std::getline(log, text)) {
    ++lines;
    const json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(line.is_object()) << "not a JSON object: " << text;
    ASSERT_TRUE(line.contains("message") && line.contains("level")) << text;
    if (line.contains("session") && line["pid"] == ::getpid() && line["uid"] == ::getuid()) {
      session_id = line["session"].get<std::uint64_t>();
      saw_session = true;
    }
  }
  EXPECT_GT(lines, 3);
  EXPECT_TRUE(saw_session) << daemon->Log();
  EXPECT_GT(session_id, 0u);
}

}  // namespace
}  // namespace hurray::daemon
