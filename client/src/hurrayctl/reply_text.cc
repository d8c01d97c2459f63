#include "hurrayctl/reply_text.h"

#include <fmt/format.h>

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

std::string RenderCudaPools(const v1::StatsResponse& stats) {
  TextTable table({"POOL", "GPU", "DEVICE", "MECHANISM", "SLAB", "SLAB MAPPINGS", "READ-ONLY",
                   "FENCES IN USE", "FENCES RETIRED"});
  bool any = false;
  for (const v1::PoolStats& pool : stats.pools()) {
    if (pool.kind() != "cuda") continue;
    any = true;
    table.AddRow({pool.name(), pool.device_uuid(),
                  fmt::format("{} (daemon ordinal {})", pool.device_name(), pool.device_ordinal()),
                  pool.mechanism(), FormatBytes(pool.slab_bytes()),
                  fmt::to_string(pool.slab_mappings()),
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
