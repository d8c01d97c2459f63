#include "registry/inspection.h"

#include <fmt/format.h>
#include <pwd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "registry/registry.h"
#include "registry/registry_errors.h"
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

// The user name of `uid` on this host; empty when it has none.
std::string UserName(std::uint32_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return "";
  }
  return entry.pw_name;
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

// ---- Registry: List, Describe, Stats ----

Result<v1::ListResponse> Registry::List(const v1::ListRequest& request,
                                        const PeerCredentials* viewer) const {
  v1::ListResponse response;
  const auto visible = [this, viewer](std::string_view name) {
    return access_->MayRead(name, viewer);
  };
  {
    std::lock_guard lock(mutex_);
    FillListPage(versions_, request, visible, response);
  }
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

Result<v1::DescribeResponse> Registry::Describe(const v1::DescribeRequest& request,
                                                const PeerCredentials* viewer) const {
  HURRAY_RETURN_IF_ERROR(ValidateTensorName(request.name()));
  HURRAY_RETURN_IF_ERROR(access_->Check(AccessVerb::kRead, request.name(), viewer, std::nullopt));
  v1::DescribeResponse response;
  std::shared_ptr<const TensorVersion> version;
  {
    std::lock_guard lock(mutex_);
    version = versions_.Find(request.name(), request.version());
    if (version == nullptr) {
      if (request.version() == 0) {
        return NotFoundError(fmt::format("{} is not published", ShownName(request.name())));
      }
      return NotFoundError(fmt::format("{} version {} is not published", ShownName(request.name()),
                                       request.version()));
    }
    FillVersionInfos(*versions_.FindEntry(request.name()), response);
  }
  version->FillTensorInfo(request.name(), *response.mutable_tensor());
  if (version->fence) {
    response.mutable_tensor()->mutable_handoff()->set_ready(version->fence.State() ==
                                                            FenceState::kReady);
  }
  response.mutable_owner()->set_uid(version->namespace_owner_uid);
  response.mutable_owner()->set_user(UserName(version->namespace_owner_uid));
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

v1::StatsResponse Registry::Stats() const {
  v1::StatsResponse response;
  FillPoolStats(pools_, response);
  for (v1::PoolStats& pool : *response.mutable_pools()) {
    for (std::string& pattern : access_->PoolNamespaces(pool.name())) {
      pool.add_namespaces(std::move(pattern));
    }
  }
  std::map<const Pool*, RegistryPoolCounts> counts;
  for (const auto& [pool, table] : fence_tables_) {
    const FenceTable::Counts fences = table->counts();
    counts[pool].fences_in_use = fences.in_use;
    counts[pool].fences_retired = fences.retired;
  }
  {
    std::lock_guard lock(mutex_);
    FillQuarantineCountsLocked(counts, response);
    for (const auto& [id, session] : sessions_.sessions()) {
      for (const auto& [segment_id, mapping] : session.slab_mappings) {
        RegistryPoolCounts& pool = counts[mapping.pool];
        ++pool.slab_mappings;
        if (mapping.read_only) ++pool.read_only_slab_mappings;
      }
    }
    response.set_session_count(static_cast<std::uint32_t>(sessions_.size()));
    response.set_lease_count(leases_.size());
    response.set_tensor_count(versions_.TensorCount());
    response.set_version_count(versions_.version_count());
    response.set_pending_allocation_count(allocations_.size());
    response.set_published_bytes_total(versions_.published_bytes());
    response.set_reclaimed_bytes_total(versions_.reclaimed_bytes());
    response.set_closed_session_count(closed_sessions_.sessions);
    response.set_closed_session_lease_count(closed_sessions_.leases);
    response.set_closed_session_allocation_count(closed_sessions_.allocations);
    response.set_closed_session_allocation_bytes(closed_sessions_.allocation_bytes);
    response.set_evicted_tensor_count(evicted_.tensors);
    response.set_evicted_bytes_total(evicted_.bytes);
    response.set_refused_connection_count(refused_connections_.load(std::memory_order_relaxed));
    uid_quotas_.FillStats(response);
    response.set_lost_tensor_count(lost_count_);
    response.set_adopted_tensor_count(adopted_count_);
    if (const auto& directory = options_.fast_path.directory) {
      response.set_fast_path_directory_entries_used(directory->used_entries());
      response.set_fast_path_directory_entries(directory->entry_count());
    }
    response.set_fast_path_lease_pages(lease_pages_.page_count());
    response.set_fast_path_lease_slots(lease_pages_.slot_count());
    response.set_fast_path_pinned_versions(versions_.pinned_count());
    response.set_fast_path_pinned_bytes(versions_.pinned_bytes());
    response.set_fast_path_scans(lease_pages_.scans());
    response.set_fast_path_refused_names(versions_.refused_entries());
  }
  response.set_earlier_epoch_held_versions(versions_.earlier_held_count());
  response.set_earlier_epoch_held_bytes(versions_.earlier_held_bytes());
  FillRegistryPoolCounts(counts, response);
  response.set_daemon_epoch(options_.daemon_epoch);
  response.set_uptime_seconds(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count()));
  return response;
}

void Registry::FillQuarantineCountsLocked(std::map<const Pool*, RegistryPoolCounts>& counts,
                                          v1::StatsResponse& response) const {
  for (const auto& [name, pool] : pools_.pools()) {
    const RangeQuarantine::PoolTotals quarantined = quarantine_.Totals(pool.get());
    if (quarantined.ranges == 0) continue;
    counts[pool.get()].quarantined_bytes = quarantined.bytes;
    counts[pool.get()].quarantined_ranges = quarantined.ranges;
  }
  response.set_quarantined_sessions(quarantine_.hold_count());
}

}  // namespace hurray::daemon
