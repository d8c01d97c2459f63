// libFuzzer target for the daemon's journal reader: the input is a whole journal file, read
// by JournalFile::Parse in both of its modes, and every record it yields is decoded
// (DecodeJournalRecord), as a restarted daemon does.
//
// Whatever the bytes, both must return. Promises, checked here without the reader's help:
//   - kRefuse returns records or DATA_LOSS with a message, never another code;
//   - what it accepts is the file's whole records in order: from offset 16, each frame's
//     length is its payload's size and the payload is the file's bytes, and valid_bytes is
//     where the last one ends; valid_bytes + ignored_bytes is the file's size;
//   - kSkip never fails, and where kRefuse accepts, kSkip returns the same records (so the
//     ignored tail holds no whole record: kSkip would have read on to it);
//   - a record decodes or is DATA_LOSS with a message; a decoded record, encoded again,
//     decodes to the same record.
// A broken promise prints which one and aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "journal/journal_file.h"
#include "journal/journal_record.h"

namespace hurray::daemon {
namespace {

[[noreturn]] void Broken(std::string_view promise) {
  std::fprintf(stderr, "journal_reader_fuzzer: broken promise: %.*s\n",
               static_cast<int>(promise.size()), promise.data());
  std::abort();
}

void Require(bool holds, std::string_view promise) {
  if (!holds) Broken(promise);
}

void CheckAccepted(const JournalFile::Contents& contents, std::string_view bytes) {
  Require(contents.valid_bytes + contents.ignored_bytes == bytes.size(),
          "valid_bytes + ignored_bytes is the file's size");
  std::size_t offset = 16;
  for (const std::string& record : contents.records) {
    Require(bytes.size() - offset >= 16 + record.size(), "a record lies inside the file");
    std::uint32_t length = 0;
    std::memcpy(&length, bytes.data() + offset, sizeof(length));
    Require(length == record.size(), "a frame's length is its payload's size");
    Require(bytes.substr(offset + 16, length) == record, "a payload is the file's bytes");
    offset += 16 + record.size();
  }
  Require(offset == contents.valid_bytes, "valid_bytes is where the last whole record ends");
}

void CheckDecoding(const std::string& payload) {
  auto record = DecodeJournalRecord(payload);
  if (!record) {
    Require(record.error().code() == StatusCode::kDataLoss && !record.error().message().empty(),
            "an undecodable record is DATA_LOSS with a message");
    return;
  }
  auto again = DecodeJournalRecord(EncodeJournalRecord(*record));
  Require(again.has_value() && *again == *record, "a decoded record encodes to itself");
}

}  // namespace
}  // namespace hurray::daemon

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using hurray::daemon::JournalFile;
  using hurray::daemon::Require;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto refused = JournalFile::Parse(bytes, "fuzz", JournalFile::Damage::kRefuse);
  auto skipped = JournalFile::Parse(bytes, "fuzz", JournalFile::Damage::kSkip);
  Require(skipped.has_value(), "kSkip never fails");
  if (refused) {
    hurray::daemon::CheckAccepted(*refused, bytes);
    Require(skipped->records == refused->records, "kSkip reads what kRefuse accepts");
  } else {
    Require(refused.error().code() == hurray::StatusCode::kDataLoss &&
                !refused.error().message().empty(),
            "a refusal is DATA_LOSS with a message");
  }
  for (const std::string& record : skipped->records) hurray::daemon::CheckDecoding(record);
  return 0;
}
