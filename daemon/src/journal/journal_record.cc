#include "journal/journal_record.h"

#include <fmt/format.h>

#include <bit>
#include <cstddef>
#include <type_traits>

namespace hurray::daemon {
namespace {

static_assert(std::endian::native == std::endian::little, "the journal is little-endian");

// Every record starts with this header; then the name's bytes, then the kind's part:
// kPublish and kRetained: the stored TensorInfo, to the end; kSegments: `count` SegmentEntry,
// each followed by its name's bytes; kRemoval and kFreed: nothing.
struct RecordHeader {
  std::uint32_t kind = 0;
  std::uint32_t publisher_uid = 0;
  std::uint32_t namespace_owner_uid = 0;
  std::uint32_t flags = 0;  // kEvictableFlag; other bits 0.
  std::uint64_t number = 0;
  std::uint32_t name_bytes = 0;
  std::uint32_t count = 0;  // kSegments: the segments; 0 otherwise.
};
static_assert(std::is_trivially_copyable_v<RecordHeader> && sizeof(RecordHeader) == 32);

struct SegmentEntry {
  std::uint64_t size = 0;
  std::uint32_t name_bytes = 0;
  std::uint32_t reserved = 0;
};
static_assert(std::is_trivially_copyable_v<SegmentEntry> && sizeof(SegmentEntry) == 16);

constexpr std::uint32_t kEvictableFlag = 1;

bool CarriesTensorInfo(JournalRecord::Kind kind) {
  return kind == JournalRecord::Kind::kPublish || kind == JournalRecord::Kind::kRetained;
}

template <typename T>
void Put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// Reads the payload front to back; every read is checked against what is left.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  Result<T> Get(std::string_view what) {
    T value{};
    HURRAY_ASSIGN_OR_RETURN(const std::string_view raw, Bytes(sizeof(T), what));
    (void)raw.copy(reinterpret_cast<char*>(&value), sizeof(T));
    return value;
  }
  Result<std::string_view> Bytes(std::size_t count, std::string_view what) {
    if (count > bytes_.size()) {
      return DataLossError(fmt::format("journal record: {} of {} bytes runs past its end ({} left)",
                                       what, count, bytes_.size()));
    }
    std::string_view taken = bytes_.substr(0, count);
    bytes_.remove_prefix(count);
    return taken;
  }
  [[nodiscard]] std::string_view rest() const { return bytes_; }

 private:
  std::string_view bytes_;
};

Status DecodeSegments(Reader& reader, std::uint32_t count, JournalRecord& record) {
  for (std::uint32_t i = 0; i < count; ++i) {
    HURRAY_ASSIGN_OR_RETURN(const SegmentEntry entry, reader.Get<SegmentEntry>("a segment entry"));
    HURRAY_ASSIGN_OR_RETURN(const std::string_view name,
                            reader.Bytes(entry.name_bytes, "a segment name"));
    record.segments.push_back(JournaledSegment{.path = std::string(name), .size = entry.size});
  }
  return {};
}

}  // namespace

std::string EncodeJournalRecord(const JournalRecord& record) {
  const RecordHeader header{.kind = static_cast<std::uint32_t>(record.kind),
                            .publisher_uid = record.publisher_uid,
                            .namespace_owner_uid = record.namespace_owner_uid,
                            .flags = record.evictable ? kEvictableFlag : 0,
                            .number = record.number,
                            .name_bytes = static_cast<std::uint32_t>(record.name.size()),
                            .count = static_cast<std::uint32_t>(record.segments.size())};
  std::string out;
  Put(out, header);
  out += record.name;
  if (CarriesTensorInfo(record.kind)) out += record.info_without_name;
  for (const JournaledSegment& segment : record.segments) {
    Put(out, SegmentEntry{.size = segment.size,
                          .name_bytes = static_cast<std::uint32_t>(segment.path.size())});
    out += segment.path;
  }
  return out;
}

void SetJournalRecordKind(std::string& payload, JournalRecord::Kind kind) {
  const auto value = static_cast<std::uint32_t>(kind);
  if (payload.size() >= sizeof(RecordHeader)) {
    (void)std::string_view(reinterpret_cast<const char*>(&value), sizeof(value))
        .copy(payload.data() + offsetof(RecordHeader, kind), sizeof(value));
  }
}

Result<JournalRecord> DecodeJournalRecord(std::string_view payload) {
  Reader reader(payload);
  HURRAY_ASSIGN_OR_RETURN(const RecordHeader header, reader.Get<RecordHeader>("the header"));
  JournalRecord record;
  record.kind = static_cast<JournalRecord::Kind>(header.kind);
  if (header.kind < static_cast<std::uint32_t>(JournalRecord::Kind::kSegments) ||
      header.kind > static_cast<std::uint32_t>(JournalRecord::Kind::kFreed)) {
    return DataLossError(fmt::format("journal record: unknown kind {}", header.kind));
  }
  if ((header.flags & ~kEvictableFlag) != 0) {
    return DataLossError(fmt::format("journal record: unknown flags {:#x}", header.flags));
  }
  record.publisher_uid = header.publisher_uid;
  record.namespace_owner_uid = header.namespace_owner_uid;
  record.evictable = (header.flags & kEvictableFlag) != 0;
  record.number = header.number;
  HURRAY_ASSIGN_OR_RETURN(const std::string_view name, reader.Bytes(header.name_bytes, "the name"));
  record.name = name;
  if (record.kind == JournalRecord::Kind::kSegments) {
    HURRAY_RETURN_IF_ERROR(DecodeSegments(reader, header.count, record));
  } else if (header.count != 0) {
    return DataLossError(
        fmt::format("journal record: count {} in a record of kind {}", header.count, header.kind));
  }
  if (CarriesTensorInfo(record.kind)) {
    record.info_without_name = reader.rest();
  } else if (!reader.rest().empty()) {
    return DataLossError(
        fmt::format("journal record: {} bytes after its end", reader.rest().size()));
  }
  return record;
}

}  // namespace hurray::daemon
