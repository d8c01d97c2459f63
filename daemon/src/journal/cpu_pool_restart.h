// RestartCpuPool: the CPU pool of a starting daemon, made of the segments an earlier daemon
// left when its journal says tensors live in them, and the journal that goes on from there.
#pragma once

#include <memory>
#include <vector>

#include "hurray/error.h"
#include "journal/journal_record.h"
#include "journal/state_directory.h"
#include "journal/tensor_journal.h"
#include "pool/cpu_pool.h"
#include "pool/segment_place.h"

namespace hurray::daemon {

struct RestartedCpuPool {
  std::unique_ptr<CpuPool> pool;
  std::unique_ptr<TensorJournal> journal;
  // The versions the journal kept (of every pool), for Registry::Adopt: the CPU ones find
  // their memory in `pool` only when it adopted the old segments.
  std::vector<JournalRecord> versions;
  // When the pool adopted the old segments: the versions retired but still mapped when the
  // earlier daemon ended (kRetained), whose memory Registry::Adopt holds for its clients.
  std::vector<JournalRecord> retained;
  bool adopted = false;  // The pool is the earlier daemon's segments.
};

// Reads the journal of `state` and makes the CPU pool of `options`:
//
// - when the journal names segments of pool `options.name` and CPU versions live in them,
//   the pool adopts those segments at the sizes the journal recorded
//   (CpuPool::Options::adopt_segments), whatever capacity today's settings or free /dev/shm
//   would make; if it cannot (a segment gone, as after a reboot, or changed), that is
//   logged, the CPU versions will be lost, and it goes on as below;
// - otherwise every segment the journal names is removed, when it is a file of this user in
//   this pool's place (SegmentPlace: /dev/shm or its hugetlbfs directory, under its
//   shm_prefix); the journal is no authority, so any other path it names is logged and left
//   alone, and its segments are not adopted either; then the new segments are named in a new
//   journal before they are created, so that a kill at any instant leaves no segment that
//   a later start cannot find.
//
// /dev/shm so never holds more than one pool's worth of this directory's segments. The
// journal returned holds the segments and the versions it kept (when adopted); the registry
// removes from it those it cannot adopt. Errors: those of RecoverJournal,
// TensorJournal::Create and CpuPool::Create.
[[nodiscard]] Result<RestartedCpuPool> RestartCpuPool(const StateDirectory& state, JournalSync sync,
                                                      CpuPool::Options options);

// hurrayd --discard-state: removes every segment the journal of `state` names that `place`
// passes (SegmentPlace::Remove; any other is logged and left alone) and the journal itself,
// so that the next daemon starts empty. Returns the segments removed (or gone already).
// Errors of RecoverJournal, and of unlinkat naming the journal.
[[nodiscard]] Result<std::size_t> DiscardState(const StateDirectory& state,
                                               const SegmentPlace& place);

}  // namespace hurray::daemon
