// Inspection: what List, Describe and Stats report of the registry's state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string_view>

#include "hurray/v1/exchange.pb.h"
#include "pool/pool_set.h"
#include "registry/version_store.h"

namespace hurray::daemon {

// List pages hold this many tensors unless the request asks for another size, and at
// most kMaxListPageSize.
inline constexpr std::uint32_t kDefaultListPageSize = 100;
inline constexpr std::uint32_t kMaxListPageSize = 1000;

// These read the tables they are given and build messages from them; they keep no state.
// Not thread-safe: the tables are guarded by Registry::mutex_, which the caller holds,
// except where a function says otherwise.

// The tensors of the page `request` asks for (names with its prefix whose latest version
// may be acquired, in name order, after its page token), and the next page's token when
// more follow; only names `visible` accepts. Leaves daemon_epoch to the caller.
void FillListPage(const VersionStore& versions, const v1::ListRequest& request,
                  const std::function<bool(std::string_view)>& visible, v1::ListResponse& response);

// Describe's version list: every live version of `entry`, oldest first.
void FillVersionInfos(const NameEntry& entry, v1::DescribeResponse& response);

// The usage of every pool, in name order. Needs no lock: pools are thread-safe.
void FillPoolStats(const PoolSet& pools, v1::StatsResponse& response);

// What the registry counts of a pool, beyond the pool's own usage.
struct RegistryPoolCounts {
  std::uint64_t fences_in_use = 0;
  std::uint64_t fences_retired = 0;
  std::uint64_t slab_mappings = 0;  // Reported by live sessions (SlabMapped).
  std::uint64_t read_only_slab_mappings = 0;
  // In quarantine (RangeQuarantine): ranges ended sessions' live processes could still write.
  std::uint64_t quarantined_bytes = 0;
  std::uint64_t quarantined_ranges = 0;
};

// Sets the counts of each pool `counts` has into its entry of `response.pools` (filled by
// FillPoolStats). Needs no lock.
void FillRegistryPoolCounts(const std::map<const Pool*, RegistryPoolCounts>& counts,
                            v1::StatsResponse& response);

}  // namespace hurray::daemon
