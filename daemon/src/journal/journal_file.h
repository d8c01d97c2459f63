// JournalFile: an append-only file of checksummed records that a crash at any instant
// leaves readable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::daemon {

// The file is a 16-byte header (the magic "HRRYJRNL", a little-endian u32 format version 1,
// 4 reserved zero bytes), then records, each a 16-byte frame (u32 payload length, u32
// reserved zero, u64 XXH64 of the payload with seed 0) and the payload.
//
// Append writes a whole record with one write(2): once it returns OK, a kill -9 of the
// process loses nothing (the kernel has the bytes); only a machine crash can lose what was
// not yet synced (Sync: fdatasync). A write that fails half way is cut off again (ftruncate)
// so that later records follow the last whole one. Replace writes a whole new file beside the
// old one and renames it over it, so that a crash leaves either file, never a mix.
//
// A crash in the middle of a write leaves a torn last record: a record whose frame or
// checksum is wrong, with no whole record anywhere after it. Read drops it and reports its
// bytes as ignored. A wrong record that a whole record follows is damage, not a torn write:
// the records after it were acknowledged, and reading around it (or stopping there) would
// resurrect versions they superseded, whose memory they may have reused. Read refuses such a
// file. "A whole record follows" is tested at every byte offset after the wrong one, so that
// damage to a length field, which hides where the next record starts, is caught too.
//
// Move-only; not thread-safe (its owner serializes every call).
class JournalFile {
 public:
  struct Contents {
    std::vector<std::string> records;  // The payloads, in file order.
    std::uint64_t valid_bytes = 0;     // Header and whole records.
    std::uint64_t ignored_bytes = 0;   // A torn tail, and what Damage::kSkip skipped.
  };

  // What Read does with a damaged record that a whole record follows.
  enum class Damage : std::uint8_t {
    // DATA_LOSS naming the damaged record (its number, counted from 0, and its offset), what
    // is wrong with it, and the offset of the whole record after it. For a daemon's start.
    kRefuse,
    // Skips the damaged bytes and reads on from the next whole record; a header that is not a
    // journal's counts as damage too. Only for discarding a journal: what it returns may
    // name versions that later, lost, records superseded.
    kSkip,
  };

  // Largest payload a record may have: a larger length in a frame is corruption.
  static constexpr std::uint32_t kMaxPayloadBytes = 64u << 20;

  // The records of the file at `path`. NOT_FOUND when there is none; with kRefuse, DATA_LOSS
  // when its header is not a journal's of format version 1 or a damaged record comes before
  // a whole one; other errors name the failed call.
  [[nodiscard]] static Result<Contents> Read(const std::string& path,
                                             Damage damage = Damage::kRefuse);
  // Read over the bytes of a file, `path` only naming it in errors. Pure; for tests and the
  // fuzzer. The work is linear in the file's size, plus (only after a damaged record) the
  // payloads of the plausible frames the search for a whole record hashes.
  [[nodiscard]] static Result<Contents> Parse(std::string_view bytes, std::string_view path,
                                              Damage damage = Damage::kRefuse);

  // Writes `records` as the whole file at `path` (through "<path>.new", fdatasync'd, renamed
  // over `path`, the directory fsync'd) and returns it open for appends. On failure the old
  // file (if any) is unchanged and "<path>.new" removed; errors name the failed call.
  [[nodiscard]] static Result<JournalFile> Replace(const std::string& path,
                                                   const std::vector<std::string>& records);

  JournalFile(JournalFile&&) noexcept = default;
  JournalFile& operator=(JournalFile&&) noexcept = default;
  JournalFile(const JournalFile&) = delete;
  JournalFile& operator=(const JournalFile&) = delete;
  ~JournalFile() = default;

  // Appends one record (INVALID_ARGUMENT above kMaxPayloadBytes). A failed write (ENOSPC:
  // RESOURCE_EXHAUSTED) names the call and the file, and leaves the file as it was; if even
  // cutting it back fails, the file refuses every later Append (FAILED_PRECONDITION) until
  // it is replaced.
  [[nodiscard]] Status Append(std::string_view payload);
  // fdatasync: what was appended survives a machine crash.
  [[nodiscard]] Status Sync();

  [[nodiscard]] const std::string& path() const { return path_; }
  // Bytes of the file: header and records.
  [[nodiscard]] std::uint64_t size() const { return size_; }

 private:
  JournalFile(std::string path, UniqueFd fd, std::uint64_t size)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size) {}

  std::string path_;
  UniqueFd fd_;
  std::uint64_t size_ = 0;
  bool broken_ = false;  // A failed append could not be cut off.
};

}  // namespace hurray::daemon
