#include "hurrayctl/reply_text.h"

#include <fmt/format.h>
#include <pwd.h>

#include <vector>

#include "hurray/element_type.h"
#include "hurrayctl/hurrayctl_format.h"

namespace hurray::ctl {

std::string SyncModeLabel(std::uint32_t value) {
  if (value <= 0xff) {
    if (auto mode = SyncModeFromByte(static_cast<std::uint8_t>(value))) {
      return std::string(SyncModeName(*mode));
    }
  }
  return fmt::format("sync mode {}", value);
}

std::string ElementTypeLabel(int value) {
  if (value > 0 && value <= 0xff) {
    if (auto type = ElementTypeFromTag(static_cast<std::uint8_t>(value))) {
      return std::string(ElementTypeName(*type));
    }
  }
  return fmt::format("type {}", value);
}

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

std::vector<std::string> TensorRow(const v1::TensorSummary& summary, std::int64_t now_nanos) {
  const std::vector<std::uint64_t> shape(summary.shape().begin(), summary.shape().end());
  return {summary.name(),
          OwnerLabel(summary.owner_uid(), ""),
          fmt::to_string(summary.latest_version()),
          ElementTypeLabel(summary.element_type()),
          FormatShape(shape),
          FormatBytes(summary.byte_size()),
          fmt::to_string(summary.lease_count()),
          FormatAge(summary.published_at_ns(), now_nanos)};
}

std::string RenderPoolTable(const v1::StatsResponse& stats, std::string_view indent) {
  TextTable pools({"POOL", "KIND", "CAPACITY", "USED", "LARGEST FREE", "FRAGMENTATION", "SEGMENTS",
                   "ALLOCATIONS"});
  for (const v1::PoolStats& pool : stats.pools()) {
    pools.AddRow({pool.name(), pool.kind(), FormatBytes(pool.capacity_bytes()),
                  FormatBytes(pool.used_bytes()), FormatBytes(pool.largest_free_bytes()),
                  FormatPercent(pool.fragmentation()), fmt::to_string(pool.segment_count()),
                  fmt::to_string(pool.allocation_count())});
  }
  return pools.Render(indent);
}

std::string RenderCudaPools(const v1::StatsResponse& stats) {
  TextTable table({"POOL", "GPU", "DEVICE", "MECHANISM", "SLAB", "SLAB MAPPINGS", "READ-ONLY",
                   "FENCES IN USE", "FENCES RETIRED"});
  bool any = false;
  for (const v1::PoolStats& pool : stats.pools()) {
    if (pool.kind() != "cuda") continue;
    any = true;
    table.AddRow({pool.name(), pool.device_uuid(),
                  fmt::format("{} (daemon ordinal {})", pool.device_name(), pool.device_ordinal()),
                  pool.gpu_direct_rdma() ? pool.mechanism() + ", rdma" : pool.mechanism(),
                  FormatBytes(pool.slab_bytes()), fmt::to_string(pool.slab_mappings()),
                  fmt::to_string(pool.read_only_slab_mappings()),
                  fmt::to_string(pool.fences_in_use()), fmt::to_string(pool.fences_retired())});
  }
  if (!any) return {};
  return "cuda pools:\n" + table.Render("  ");
}

std::string RenderDeviceAndHandoff(const v1::TensorInfo& tensor, DeviceTag device_tag) {
  std::string text = fmt::format("device:     {}\n", device_tag.Name());
  const v1::SyncHandoff& handoff = tensor.handoff();
  if (!handoff.has_fence()) {
    return text + fmt::format("handoff:    {}\n", SyncModeLabel(handoff.sync_mode()));
  }
  const v1::Fence& fence = handoff.fence();
  return text + fmt::format("handoff:    {} (fence segment {} offset {} value {}, {})\n",
                            SyncModeLabel(handoff.sync_mode()), fence.segment_id(), fence.offset(),
                            fence.value(), handoff.ready() ? "ready" : "not ready");
}

}  // namespace hurray::ctl
