#include "journal/cpu_pool_restart.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <utility>

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

// Removes every segment file of `recovered` (all pools' CPU segments this directory names);
// returns how many it named.
std::size_t RemoveJournaledSegments(const RecoveredJournal& recovered) {
  std::size_t named = 0;
  for (const auto& [pool, segments] : recovered.segments) {
    named += segments.size();
    for (const JournaledSegment& segment : segments) {
      if (Status removed = ShmSegment::RemoveFile(segment.path); !removed) {
        spdlog::warn("pool {}: cannot remove the earlier daemon's segment: {}", pool,
                     removed.error().message());
      }
    }
  }
  return named;
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
  auto old = recovered.segments.find(options.name);
  if (cpu_versions && old != recovered.segments.end()) {
    CpuPool::Options adopting = options;
    for (const JournaledSegment& segment : old->second) {
      adopting.adopt_segment_paths.push_back(segment.path);
    }
    Result<std::unique_ptr<CpuPool>> pool = CpuPool::Create(std::move(adopting));
    if (pool) {
      HURRAY_ASSIGN_OR_RETURN(
          restarted.journal,
          TensorJournal::Create(journal_options,
                                PoolSegments(options.name, (*pool)->SegmentFiles()),
                                restarted.versions));
      restarted.pool = std::move(*pool);
      restarted.adopted = true;
      return restarted;
    }
    spdlog::error(
        "pool {}: cannot adopt the segments of the daemon before: {}; its CPU tensors "
        "are lost",
        options.name, pool.error().message());
  }
  (void)RemoveJournaledSegments(recovered);
  options.before_create = [&](const std::vector<SegmentFile>& files) -> Status {
    HURRAY_ASSIGN_OR_RETURN(
        restarted.journal,
        TensorJournal::Create(journal_options, PoolSegments(options.name, files), {}));
    return {};
  };
  HURRAY_ASSIGN_OR_RETURN(restarted.pool, CpuPool::Create(options));
  return restarted;
}

Result<std::size_t> DiscardState(const StateDirectory& state) {
  // A damaged journal is what this is for: remove every segment it still names.
  HURRAY_ASSIGN_OR_RETURN(const RecoveredJournal recovered,
                          RecoverJournal(state.JournalPath(), JournalFile::Damage::kSkip));
  const std::size_t removed = RemoveJournaledSegments(recovered);
  HURRAY_RETURN_IF_ERROR(ShmSegment::RemoveFile(state.JournalPath()));
  return removed;
}

}  // namespace hurray::daemon
