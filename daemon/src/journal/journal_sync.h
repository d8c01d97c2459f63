// JournalSync: when the journal's records reach the disk (the journal_sync setting).
#pragma once

#include <cstdint>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

// When appended records are flushed to the disk (fdatasync) before a publish or delete is
// acknowledged. Whatever the policy, a record is written (write(2)) before the
// acknowledgement, so a crash of the daemon alone (kill -9) loses nothing; the policy only
// decides what a crash of the machine may lose.
enum class JournalSync : std::uint8_t {
  // "always": fdatasync before each acknowledgement, outside the registry's mutex, one for
  // every acknowledgement waiting at that moment (group commit).
  kAlways,
  kBatch,  // "batch": at most one fdatasync per 100 ms; a record may wait for the next.
  kNone,   // "none" (the default): never; the kernel writes back in its own time.
};

// "always", "batch", "none"; INVALID_ARGUMENT naming journal_sync otherwise.
[[nodiscard]] Result<JournalSync> ParseJournalSync(std::string_view text);
[[nodiscard]] std::string_view JournalSyncName(JournalSync sync);

}  // namespace hurray::daemon
