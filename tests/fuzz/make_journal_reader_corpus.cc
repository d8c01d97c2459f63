// Writes the seed corpus of journal_reader_fuzzer into the directory given as its one
// argument: a journal as a daemon writes it (a pool's segments, publishes, a removal), and
// that journal cut and bit-flipped where a crash or a bad disk would: in the header, in each
// field of a middle record's frame, in its payload, in the last record, and cut at every part
// of the last record. Each seed is read back before it is written: valid_ and torn_ seeds
// must be accepted (torn_ ones with the last record dropped), damaged_ ones refused with
// DATA_LOSS; the run fails otherwise.
//
// Usage: make_journal_reader_corpus tests/fuzz/corpus/journal_reader
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "journal/journal_file.h"
#include "journal/journal_record.h"

namespace hurray::daemon {
namespace {

namespace fs = std::filesystem;

// Checks each seed against JournalFile::Parse and writes it. Not thread-safe.
class SeedSet {
 public:
  SeedSet(fs::path directory, std::size_t whole_records)
      : directory_(std::move(directory)), whole_records_(whole_records) {}

  void Seed(std::string_view name, const std::string& bytes) {
    auto contents = JournalFile::Parse(bytes, name);
    const bool refused = name.starts_with("damaged_");
    const std::size_t expected = name.starts_with("torn_") ? whole_records_ - 1 : whole_records_;
    if (refused ? contents.has_value()
                : !contents.has_value() ||
                      (!name.starts_with("valid_empty") && contents->records.size() != expected)) {
      std::fprintf(stderr, "%.*s: expected %s, got %s\n", static_cast<int>(name.size()),
                   name.data(), refused ? "a refusal" : "its records",
                   contents ? (std::to_string(contents->records.size()) + " records").c_str()
                            : contents.error().ToString().c_str());
      ++failures_;
      return;
    }
    if (!contents) {
      std::printf("%.*s: %s\n", static_cast<int>(name.size()), name.data(),
                  contents.error().message().c_str());
    }
    const fs::path path = directory_ / std::string(name);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    if (!fs::exists(path)) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      ++failures_;
    }
  }

  [[nodiscard]] int failures() const { return failures_; }

 private:
  fs::path directory_;
  std::size_t whole_records_;
  int failures_ = 0;
};

std::vector<std::string> Records() {
  const std::vector<JournalRecord> records = {
      {.kind = JournalRecord::Kind::kSegments,
       .name = "cpu",
       .segments = {{.path = "/dev/shm/hurray-0123456789abcdef0123456789abcdef", .size = 1 << 26}}},
      {.kind = JournalRecord::Kind::kPublish,
       .name = "j/t",
       .number = 1,
       .publisher_uid = 1000,
       .namespace_owner_uid = 1000,
       .info_without_name = std::string("\x22\x03\x63\x70\x75", 5)},
      {.kind = JournalRecord::Kind::kPublish,
       .name = "j/t",
       .number = 2,
       .publisher_uid = 1000,
       .namespace_owner_uid = 1000,
       .evictable = true,
       .info_without_name = std::string("\x22\x03\x63\x70\x75", 5)},
      {.kind = JournalRecord::Kind::kRemoval, .name = "j/old", .number = 7},
      {.kind = JournalRecord::Kind::kRetained,
       .name = "j/t",
       .number = 1,
       .publisher_uid = 1000,
       .namespace_owner_uid = 1000,
       .info_without_name = std::string("\x22\x03\x63\x70\x75", 5)},
      {.kind = JournalRecord::Kind::kFreed, .name = "j/t", .number = 1},
      {.kind = JournalRecord::Kind::kPublish,
       .name = "j/u",
       .number = 1,
       .info_without_name = std::string("\x22\x03\x63\x70\x75", 5)},
  };
  std::vector<std::string> payloads;
  payloads.reserve(records.size());
  for (const JournalRecord& record : records) payloads.push_back(EncodeJournalRecord(record));
  return payloads;
}

std::string ReadBack(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

std::string Flipped(std::string bytes, std::size_t offset, char mask = 0x01) {
  bytes[offset] = static_cast<char>(bytes[offset] ^ mask);
  return bytes;
}

std::string WithLength(std::string bytes, std::size_t frame, std::uint32_t length) {
  std::memcpy(bytes.data() + frame, &length, sizeof(length));
  return bytes;
}

}  // namespace
}  // namespace hurray::daemon

int main(int argc, char** argv) {
  using hurray::daemon::JournalFile;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 1;
  }
  const hurray::daemon::fs::path directory = argv[1];
  const std::vector<std::string> records = hurray::daemon::Records();
  // The journal as JournalFile writes it, through a file beside the corpus seeds.
  const hurray::daemon::fs::path scratch = directory / "scratch.journal";
  if (auto written = JournalFile::Replace(scratch, records); !written) {
    std::fprintf(stderr, "%s\n", written.error().ToString().c_str());
    return 1;
  }
  const std::string journal = hurray::daemon::ReadBack(scratch);
  hurray::daemon::fs::remove(scratch);
  if (auto empty = JournalFile::Replace(scratch, {}); !empty) return 1;
  const std::string empty = hurray::daemon::ReadBack(scratch);
  hurray::daemon::fs::remove(scratch);

  // Where each record's frame starts.
  std::vector<std::size_t> frames;
  std::size_t offset = 16;
  for (const std::string& record : records) {
    frames.push_back(offset);
    offset += 16 + record.size();
  }
  const std::size_t middle = frames[2];
  const std::size_t last = frames.back();

  using hurray::daemon::Flipped;
  using hurray::daemon::WithLength;
  hurray::daemon::SeedSet seeds(directory, records.size());
  seeds.Seed("valid_journal", journal);
  seeds.Seed("valid_empty_journal", empty);
  seeds.Seed("damaged_shorter_than_header", journal.substr(0, 10));
  seeds.Seed("damaged_header_magic", Flipped(journal, 3));
  seeds.Seed("damaged_header_version", Flipped(journal, 8, 0x02));
  seeds.Seed("damaged_middle_length_shorter", WithLength(journal, middle, 20));
  seeds.Seed("damaged_middle_length_longer",
             WithLength(journal, middle, static_cast<std::uint32_t>(records[2].size() + 40)));
  seeds.Seed("damaged_middle_length_past_end", WithLength(journal, middle, 0x00ffffff));
  seeds.Seed("damaged_middle_length_above_limit", WithLength(journal, middle, 0xffffffff));
  seeds.Seed("damaged_middle_reserved", Flipped(journal, middle + 5));
  seeds.Seed("damaged_middle_checksum", Flipped(journal, middle + 12, 0x40));
  seeds.Seed("damaged_middle_payload_kind", Flipped(journal, middle + 16));
  seeds.Seed("damaged_middle_payload_name", Flipped(journal, middle + 16 + 33, 0x20));
  seeds.Seed("damaged_first_record_payload", Flipped(journal, frames[0] + 16 + 40));
  seeds.Seed("torn_last_payload_flipped", Flipped(journal, last + 16 + 2, 0x10));
  seeds.Seed("torn_last_length", WithLength(journal, last, 1000));
  seeds.Seed("torn_last_frame_cut", journal.substr(0, last + 7));
  seeds.Seed("torn_last_payload_cut", journal.substr(0, journal.size() - 3));
  return seeds.failures() == 0 ? 0 : 1;
}
