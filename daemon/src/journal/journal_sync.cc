#include "journal/journal_sync.h"

#include <fmt/format.h>

namespace hurray::daemon {

Result<JournalSync> ParseJournalSync(std::string_view text) {
  if (text == "always") return JournalSync::kAlways;
  if (text == "batch") return JournalSync::kBatch;
  if (text == "none") return JournalSync::kNone;
  return InvalidArgumentError(
      fmt::format("journal_sync \"{}\": must be always, batch or none", text.substr(0, 64)));
}

std::string_view JournalSyncName(JournalSync sync) {
  switch (sync) {
    case JournalSync::kAlways:
      return "always";
    case JournalSync::kBatch:
      return "batch";
    case JournalSync::kNone:
      return "none";
  }
  return "always";
}

}  // namespace hurray::daemon
