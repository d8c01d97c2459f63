#include "journal/cpu_pool_restart.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hurray/v1/exchange.pb.h"

namespace hurray::daemon {
namespace {

using SegmentMap = std::map<std::string, std::vector<JournaledSegment>, std::less<>>;

SegmentMap PoolSegments(const std::string& pool, const std::vector<SegmentFile>& files) {
  std::vector<JournaledSegment> segments;
  segments.reserve(files.size());
  for (const SegmentFile& file : files) segments.push_back({.path = file.path, .size = file.size});
  return {{pool, std::move(segments)}};
}

// Whether a live version is in pool `pool`: its stored TensorInfo names it (field 4, pool).
bool InPool(const JournalRecord& record, std::string_view pool) {
  v1::TensorInfo info;
  return info.ParseFromString(record.info_without_name) && info.pool() == pool;
}

// Where the segments of the pool of `options` can be.
SegmentPlace PlaceOf(const CpuPool::Options& options) {
  return {.shm_prefix = options.shm_prefix,
          .hugetlbfs_directory = options.huge_pages.mode == HugePages::kExplicit
                                     ? options.huge_pages.hugetlbfs_directory
                                     : std::string()};
}

// Removes every segment file of `recovered` (all pools' CPU segments this directory names)
// that `place` passes; one it refuses is logged and left alone. Returns how many it removed
// (or found gone already).
std::size_t RemoveJournaledSegments(const RecoveredJournal& recovered, const SegmentPlace& place) {
  std::size_t removed = 0;
  for (const auto& [pool, segments] : recovered.segments) {
    for (const JournaledSegment& segment : segments) {
      if (Status status = place.Remove(segment.path); !status) {
        spdlog::warn("pool {}: the journal names a segment that is not removed: {}",
                     BoundedExcerpt(pool), status.error().message());
      } else {
        ++removed;
      }
    }
  }
  return removed;
}

// The pool of `options` made of an earlier daemon's `segments`, each of which must be in
// `place` (a journal naming any other file is not adopted from).
Result<std::unique_ptr<CpuPool>> AdoptPool(CpuPool::Options options,
                                           const std::vector<JournaledSegment>& segments,
                                           const SegmentPlace& place) {
  std::uint64_t adopted_bytes = 0;
  for (const JournaledSegment& segment : segments) {
    HURRAY_RETURN_IF_ERROR(place.Check(segment.path));
    options.adopt_segments.push_back({.path = segment.path, .size = segment.size});
    adopted_bytes += segment.size;
  }
  // The old segments at the sizes they were made, whatever today's settings (or today's free
  // /dev/shm, which those very segments take) would make.
  if (adopted_bytes != options.capacity_bytes) {
    spdlog::info(
        "pool {}: adopting the {} bytes of segments the daemon before left, not the {} "
        "bytes this configuration makes (hurrayd --discard-state starts anew at that size, "
        "losing the tensors)",
        options.name, adopted_bytes, options.capacity_bytes);
  }
  return CpuPool::Create(std::move(options));
}

}  // namespace

Result<RestartedCpuPool> RestartCpuPool(const StateDirectory& state, JournalSync sync,
                                        CpuPool::Options options) {
  HURRAY_ASSIGN_OR_RETURN(RecoveredJournal recovered, RecoverJournal(state.JournalPath()));
  if (recovered.ignored_bytes != 0) {
    spdlog::warn(
        "journal {}: {} bytes of a torn last record ignored (a write the daemon "
        "never acknowledged)",
        state.JournalPath(), recovered.ignored_bytes);
  }
  const TensorJournal::Options journal_options{.path = state.JournalPath(), .sync = sync};
  RestartedCpuPool restarted;
  restarted.versions = std::move(recovered.versions);
  const bool cpu_versions = std::ranges::any_of(
      restarted.versions,
      [&](const JournalRecord& record) { return InPool(record, options.name); });
  const SegmentPlace place = PlaceOf(options);
  auto old = recovered.segments.find(options.name);
  if (cpu_versions && old != recovered.segments.end()) {
    Result<std::unique_ptr<CpuPool>> pool = AdoptPool(options, old->second, place);
    if (pool) {
      HURRAY_ASSIGN_OR_RETURN(
          restarted.journal,
          TensorJournal::Create(journal_options,
                                PoolSegments(options.name, (*pool)->SegmentFiles()),
                                restarted.versions, recovered.retained));
      restarted.retained = std::move(recovered.retained);
      restarted.pool = std::move(*pool);
      restarted.adopted = true;
      return restarted;
    }
    spdlog::error(
        "pool {}: cannot adopt the segments of the daemon before: {}; its CPU tensors "
        "are lost",
        options.name, pool.error().message());
  }
  (void)RemoveJournaledSegments(recovered, place);
  options.before_create = [&](const std::vector<SegmentFile>& files) -> Status {
    HURRAY_ASSIGN_OR_RETURN(
        restarted.journal,
        TensorJournal::Create(journal_options, PoolSegments(options.name, files), {}));
    return {};
  };
  HURRAY_ASSIGN_OR_RETURN(restarted.pool, CpuPool::Create(options));
  return restarted;
}

Result<std::size_t> DiscardState(const StateDirectory& state, const SegmentPlace& place) {
  // A damaged journal is what this is for: remove every segment it still names.
  HURRAY_ASSIGN_OR_RETURN(const RecoveredJournal recovered,
                          RecoverJournal(state.JournalPath(), JournalFile::Damage::kSkip));
  const std::size_t removed = RemoveJournaledSegments(recovered, place);
  HURRAY_RETURN_IF_ERROR(state.directory().RemoveFile(StateDirectory::kJournalName));
  return removed;
}

}  // namespace hurray::daemon
