// A journal damaged on disk between a kill -9 of hurrayd and its restart. One flipped byte
// in a record that later records follow makes the next hurrayd refuse to start, exit status
// 1, with a DATA_LOSS naming the record and the way out, and leave the journal and the
// segments as they were; `hurrayd --discard-state` then removes them and a daemon starts
// empty. The same byte flipped in the last record is a torn tail: that record is dropped and
// every earlier tensor is served byte for byte.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "integration_test.h"
#include "testing/daemon_expectations.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

// One record of a journal file, read with the layout journal_file.h and journal_record.h
// give: a 16-byte file header; per record a 16-byte frame (u32 payload length, u32 zero,
// u64 checksum) and the payload, which starts with a 32-byte header (u32 kind at 0, u64
// version number at 16, u32 name length at 24) and the name.
struct JournalEntry {
  std::size_t offset = 0;  // Of its frame.
  std::size_t payload_bytes = 0;
  std::uint32_t kind = 0;  // 1 segments, 2 publish, 3 removal.
  std::uint64_t number = 0;
  std::string name;
};

template <typename T>
T Load(const std::string& bytes, std::size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

std::vector<JournalEntry> Entries(const std::string& bytes) {
  std::vector<JournalEntry> entries;
  std::size_t offset = 16;
  while (offset + 16 <= bytes.size()) {
    const auto payload_bytes = Load<std::uint32_t>(bytes, offset);
    const std::size_t payload = offset + 16;
    if (payload_bytes < 32 || payload + payload_bytes > bytes.size()) break;
    const auto name_bytes = Load<std::uint32_t>(bytes, payload + 24);
    if (32 + std::size_t{name_bytes} > payload_bytes) break;
    entries.push_back({.offset = offset,
                       .payload_bytes = payload_bytes,
                       .kind = Load<std::uint32_t>(bytes, payload),
                       .number = Load<std::uint64_t>(bytes, payload + 16),
                       .name = bytes.substr(payload + 32, name_bytes)});
    offset = payload + payload_bytes;
  }
  return entries;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

class JournalDamageTest : public IntegrationTest {
 protected:
  [[nodiscard]] std::string JournalPath() { return daemon().directory() + "/state/journal"; }

  // The audit's scenario: j/t v1, then j/t v2 (v1's range is reclaimed), then j/u v1 (which
  // may land in v1's old range); then kill -9. Returns the journal's entries.
  std::vector<JournalEntry> PublishAndKill() {
    EXPECT_EQ(RunAgent({"produce", "j/t", "dense", "1"}), "version 1\n");
    EXPECT_EQ(RunAgent({"produce", "j/t", "dense", "2"}), "version 2\n");
    EXPECT_EQ(RunAgent({"produce", "j/u", "dense", "3"}), "version 1\n");
    segments_ = daemon().Segments();
    EXPECT_FALSE(segments_.empty());
    EXPECT_OK(daemon().Kill());
    return Entries(ReadFile(JournalPath()));
  }

  // Flips one bit in the middle of the payload of `entry`.
  void Damage(const JournalEntry& entry) {
    std::fstream file(JournalPath(), std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(entry.offset + 16 + entry.payload_bytes / 2);
    file.seekg(at);
    const char byte = static_cast<char>(file.get());
    file.seekp(at);
    file.put(static_cast<char>(byte ^ 0x04));
    ASSERT_TRUE(file.good());
  }

  // Runs hurrayd on the killed daemon's directory and configuration (as DaemonProcess does,
  // with `extra` arguments) to its end: its wait status and output.
  AgentOutcome RunDaemonToEnd(const std::vector<std::string>& extra) {
    const std::string log = daemon().directory() + "/refused.log";
    std::vector<std::string> argv = {HURRAYD_PATH,
                                     "--socket",
                                     daemon().directory() + "/d.sock",
                                     "--cpu-pool-capacity",
                                     std::to_string(daemon().pool_capacity_bytes()),
                                     "--log-level",
                                     "warn",
                                     "--config",
                                     daemon().directory() + "/hurrayd.toml"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::remove(log.c_str());
    auto process = ChildProcess::Start(argv, {.stdout_path = log, .stderr_path = log});
    EXPECT_OK(process);
    if (!process) return {};
    AgentOutcome outcome{.status = process->Wait(120s)};
    if (!outcome.status) process->Kill();
    outcome.out = ReadFile(log);
    return outcome;
  }

  // A daemon on the killed one's directory, state directory and shared-memory prefix.
  Result<std::unique_ptr<DaemonProcess>> Restart() {
    DaemonProcess::Options options = daemon_options();
    options.directory = daemon().directory();
    options.shm_prefix = daemon().shm_prefix();
    return DaemonProcess::Start(options);
  }

  std::vector<std::string> segments_;  // The killed daemon's.
};

const JournalEntry* Find(const std::vector<JournalEntry>& entries, const std::string& name,
                         std::uint64_t number) {
  for (const JournalEntry& entry : entries) {
    if (entry.kind == 2 && entry.name == name && entry.number == number) return &entry;
  }
  return nullptr;
}

TEST_F(JournalDamageTest, DamageBeforeTheLastRecordRefusesTheStartUntilStateIsDiscarded) {
  const std::vector<JournalEntry> entries = PublishAndKill();
  const JournalEntry* superseding = Find(entries, "j/t", 2);
  ASSERT_NE(superseding, nullptr) << entries.size() << " records";
  ASSERT_NE(Find(entries, "j/u", 1), nullptr);
  ASSERT_NE(&entries.back(), superseding) << "a record must follow the damaged one";
  const auto index = static_cast<std::size_t>(superseding - entries.data());
  ASSERT_NO_FATAL_FAILURE(Damage(*superseding));
  const std::string damaged = ReadFile(JournalPath());

  const AgentOutcome refused = RunDaemonToEnd({});
  ASSERT_TRUE(refused.status.has_value()) << "hurrayd still ran after 120 s:\n" << refused.out;
  EXPECT_TRUE(WIFEXITED(*refused.status) && WEXITSTATUS(*refused.status) == 1)
      << DescribeWaitStatus(*refused.status) << "\n"
      << refused.out;
  for (const std::string& part :
       {std::string("DATA_LOSS"), JournalPath(),
        "record " + std::to_string(index) + " (counted from 0) at offset " +
            std::to_string(superseding->offset) + " is damaged (checksum mismatch)",
        std::string("not a torn last write"), std::string("hurrayd --discard-state")}) {
    EXPECT_NE(refused.out.find(part), std::string::npos) << part << "\nin:\n" << refused.out;
  }
  EXPECT_EQ(refused.out.find("torn last record ignored"), std::string::npos) << refused.out;
  // Nothing was lost or rewritten by the refusal: the journal and the segments are as left.
  EXPECT_EQ(ReadFile(JournalPath()), damaged);
  EXPECT_EQ(daemon().Segments(), segments_);
  struct stat status{};
  EXPECT_NE(::lstat(socket().c_str(), &status), 0) << "a socket file is left";

  const AgentOutcome discarded = RunDaemonToEnd({"--discard-state"});
  ASSERT_TRUE(discarded.status.has_value());
  EXPECT_TRUE(WIFEXITED(*discarded.status) && WEXITSTATUS(*discarded.status) == 0)
      << DescribeWaitStatus(*discarded.status) << "\n"
      << discarded.out;
  EXPECT_NE(discarded.out.find("removed " + JournalPath() + " and the " +
                               std::to_string(segments_.size()) + " segments it kept"),
            std::string::npos)
      << discarded.out;
  EXPECT_TRUE(daemon().Segments().empty());

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> restarted, Restart());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client,
                       Client::Connect({.socket_path = restarted->socket_path()}));
  ASSERT_OK_AND_ASSIGN(const DaemonStats stats, client->Stats());
  EXPECT_EQ(stats.tensor_count, 0u);
  for (const char* name : {"j/t", "j/u"}) {
    auto acquired = client->Acquire(name);
    ASSERT_FALSE(acquired.has_value()) << name;
    EXPECT_EQ(acquired.error().code(), StatusCode::kNotFound) << name;
  }
  client.reset();
  ::hurray::testing::ExpectStopsCleanly(*restarted);
}

TEST_F(JournalDamageTest, DamageInTheLastRecordDropsOnlyThatRecord) {
  const std::vector<JournalEntry> entries = PublishAndKill();
  ASSERT_FALSE(entries.empty());
  const JournalEntry& last = entries.back();
  ASSERT_EQ(last.kind, 2u);
  ASSERT_EQ(last.name, "j/u");
  ASSERT_NO_FATAL_FAILURE(Damage(last));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> restarted, Restart());
  EXPECT_NE(restarted->Log().find("torn last record ignored"), std::string::npos)
      << restarted->Log();
  EXPECT_EQ(RunAgent({"consume", "j/t", "2", "2"}), "OK dense v2\n");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client,
                       Client::Connect({.socket_path = restarted->socket_path()}));
  auto lost = client->Acquire("j/u");
  ASSERT_FALSE(lost.has_value());
  EXPECT_EQ(lost.error().code(), StatusCode::kNotFound);
  ASSERT_OK(client->Delete("j/t"));
  client.reset();
  ::hurray::testing::ExpectStopsCleanly(*restarted);
}

}  // namespace
}  // namespace hurray::integration
