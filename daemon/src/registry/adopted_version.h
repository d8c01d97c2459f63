// AdoptedVersion: a tensor version an earlier daemon published, rebuilt from its journal
// record for the registry of a restarted daemon.
#pragma once

#include <memory>

#include "hurray/error.h"
#include "journal/journal_record.h"
#include "pool/pool_set.h"
#include "registry/version_store.h"

namespace hurray::daemon {

// What an adopted version is for: served again (kPublish), or only holding its memory for
// the clients of an earlier daemon (kRetained, never served: its handoff does not matter).
enum class AdoptedFor : std::uint8_t { kServing, kHolding };

// The version `record` (kPublish, or kRetained for kHolding) describes, its buffers taken
// from their pool (Pool::Adopt). FAILED_PRECONDITION saying why it cannot be: a pool that is
// gone or whose memory dies with its daemon (CUDA), an Event-mode handoff when serving (its
// fence died), a range that is not free; DATA_LOSS for a stored TensorInfo that does not
// parse or disagrees with the record. Takes nothing from any pool on failure.
[[nodiscard]] Result<std::shared_ptr<TensorVersion>> AdoptVersion(
    const JournalRecord& record, const PoolSet& pools,
    AdoptedFor adopted_for = AdoptedFor::kServing);

}  // namespace hurray::daemon
