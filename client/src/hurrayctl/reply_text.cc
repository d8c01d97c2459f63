#include "hurrayctl/reply_text.h"

#include <fmt/format.h>
#include <pwd.h>

#include <vector>

#include "hurray/element_type.h"
#include "hurrayctl/hurrayctl_format.h"

namespace hurray::ctl {

std::string OwnerLabel(std::uint32_t uid, std::string_view user) {
  if (!user.empty()) return std::string(user);
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return entry.pw_name;
  }
  return fmt::to_string(uid);
}

std::vector<std::string> TensorColumns() {
  return {"NAME", "OWNER", "VERSION", "TYPE", "SHAPE", "SIZE", "LEASES", "PUBLISHED"};
}

std::vector<std::string> TensorRow(const TensorSummary& summary, std::int64_t now_nanos) {
  return {summary.name,
          OwnerLabel(summary.owner_uid, ""),
          fmt::to_string(summary.latest_version),
          std::string(ElementTypeName(summary.element_type)),
          FormatShape(summary.shape),
          FormatBytes(summary.byte_size),
          fmt::to_string(summary.lease_count),
          FormatAge(UnixNanos(summary.published_at), now_nanos)};
}

std::string RenderPoolTable(const DaemonStats& stats, std::string_view indent) {
  TextTable pools({"POOL", "KIND", "CAPACITY", "USED", "LARGEST FREE", "FRAGMENTATION", "SEGMENTS",
                   "ALLOCATIONS"});
  for (const PoolStats& pool : stats.pools) {
    pools.AddRow({pool.name, pool.kind, FormatBytes(pool.capacity_bytes),
                  FormatBytes(pool.used_bytes), FormatBytes(pool.largest_free_bytes),
                  FormatPercent(pool.fragmentation), fmt::to_string(pool.segment_count),
                  fmt::to_string(pool.allocation_count)});
  }
  return pools.Render(indent);
}

std::string RenderCudaPools(const DaemonStats& stats) {
  TextTable table({"POOL", "GPU", "DEVICE", "MECHANISM", "SLAB", "SLAB MAPPINGS", "READ-ONLY",
                   "FENCES IN USE", "FENCES RETIRED"});
  bool any = false;
  for (const PoolStats& pool : stats.pools) {
    if (pool.kind != "cuda") continue;
    any = true;
    table.AddRow({pool.name, pool.device_uuid,
                  fmt::format("{} (daemon ordinal {})", pool.device_name, pool.device_ordinal),
                  pool.gpu_direct_rdma ? pool.mechanism + ", rdma" : pool.mechanism,
                  FormatBytes(pool.slab_bytes), fmt::to_string(pool.slab_mappings),
                  fmt::to_string(pool.read_only_slab_mappings), fmt::to_string(pool.fences_in_use),
                  fmt::to_string(pool.fences_retired)});
  }
  if (!any) return {};
  return "cuda pools:\n" + table.Render("  ");
}

std::string RenderDeviceAndHandoff(const TensorDetails& tensor) {
  std::string text = fmt::format("device:     {}\n", tensor.descriptor.device_tag().Name());
  const std::string_view mode = SyncModeName(tensor.sync_mode);
  if (tensor.fence.segment_id == 0) return text + fmt::format("handoff:    {}\n", mode);
  return text + fmt::format("handoff:    {} (fence segment {} offset {} value {}, {})\n", mode,
                            tensor.fence.segment_id, tensor.fence.offset, tensor.fence.value,
                            tensor.ready ? "ready" : "not ready");
}

}  // namespace hurray::ctl
