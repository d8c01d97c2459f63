#include "registry/inspection.h"

#include <algorithm>

#include "registry/tensor_name.h"

namespace hurray::daemon {
namespace {

void FillSummary(const std::string& name, const NameEntry& entry, const TensorVersion& latest,
                 v1::TensorSummary& summary) {
  summary.set_name(name);
  summary.set_latest_version(latest.number);
  summary.set_version_count(static_cast<std::uint32_t>(entry.versions.size()));
  summary.set_element_type(latest.element_type);
  summary.mutable_shape()->Add(latest.shape.begin(), latest.shape.end());
  summary.set_byte_size(latest.byte_size);
  summary.set_lease_count(entry.LeaseCount());
  summary.set_published_at_ns(latest.published_at_ns);
  summary.set_owner_uid(latest.namespace_owner_uid);
}

}  // namespace

void FillListPage(const VersionStore& versions, const v1::ListRequest& request,
                  const std::function<bool(std::string_view)>& visible,
                  v1::ListResponse& response) {
  const std::uint32_t page_size = std::min(
      request.page_size() == 0 ? kDefaultListPageSize : request.page_size(), kMaxListPageSize);
  const VersionStore::Names& names = versions.names();
  auto it = request.page_token().empty() ? names.lower_bound(request.prefix())
                                         : names.upper_bound(request.page_token());
  for (; it != names.end() && HasPrefix(it->first, request.prefix()); ++it) {
    const TensorVersion* latest = it->second.Latest();
    if (latest == nullptr || !visible(it->first)) continue;
    if (static_cast<std::uint32_t>(response.tensors_size()) == page_size) {
      response.set_next_page_token(response.tensors(response.tensors_size() - 1).name());
      break;
    }
    FillSummary(it->first, it->second, *latest, *response.add_tensors());
  }
}

void FillVersionInfos(const NameEntry& entry, v1::DescribeResponse& response) {
  for (const auto& live : entry.versions) {
    v1::VersionInfo& info = *response.add_versions();
    info.set_version(live->number);
    info.set_lease_count(live->lease_count);
    info.set_superseded(live->superseded || live->deleted);
    info.set_byte_size(live->byte_size);
    info.set_published_at_ns(live->published_at_ns);
  }
}

void FillPoolStats(const PoolSet& pools, v1::StatsResponse& response) {
  for (const auto& [name, pool] : pools.pools()) {
    const PoolUsage usage = pool->Usage();
    v1::PoolStats& stats = *response.add_pools();
    stats.set_name(usage.name);
    stats.set_kind(usage.kind);
    stats.set_capacity_bytes(usage.capacity_bytes);
    stats.set_used_bytes(usage.used_bytes);
    stats.set_largest_free_bytes(usage.largest_free_bytes);
    stats.set_fragmentation(usage.fragmentation);
    stats.set_segment_count(usage.segment_count);
    stats.set_allocation_count(usage.allocation_count);
    stats.set_page_size(usage.page_size);
    stats.set_huge_pages(usage.huge_pages);
    stats.set_device_uuid(usage.device_uuid);
    stats.set_device_name(usage.device_name);
    stats.set_device_ordinal(usage.device_ordinal);
    stats.set_mechanism(usage.mechanism);
    stats.set_slab_bytes(usage.slab_bytes);
    stats.set_gpu_direct_rdma(usage.gpu_direct_rdma);
    stats.set_reserved_bytes(usage.reserved_bytes);
  }
}

void FillRegistryPoolCounts(const std::map<const Pool*, RegistryPoolCounts>& counts,
                            v1::StatsResponse& response) {
  for (v1::PoolStats& stats : *response.mutable_pools()) {
    auto found = std::ranges::find_if(
        counts, [&stats](const auto& entry) { return entry.first->name() == stats.name(); });
    if (found == counts.end()) continue;
    const RegistryPoolCounts& pool = found->second;
    stats.set_fences_in_use(pool.fences_in_use);
    stats.set_fences_retired(pool.fences_retired);
    stats.set_slab_mappings(pool.slab_mappings);
    stats.set_read_only_slab_mappings(pool.read_only_slab_mappings);
    stats.set_quarantined_bytes(pool.quarantined_bytes);
    stats.set_quarantined_ranges(pool.quarantined_ranges);
  }
}

}  // namespace hurray::daemon
