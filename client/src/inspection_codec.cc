#include "inspection_codec.h"

#include <fmt/format.h>

#include <limits>

#include "hurray/descriptor_codec.h"

namespace hurray::client_internal {
namespace {

DaemonTime TimeFromNanoseconds(std::int64_t unix_nanos) {
  return DaemonTime(std::chrono::nanoseconds(unix_nanos));
}

Result<TensorSummary> TensorSummaryFromProto(const v1::TensorSummary& summary) {
  const int tag = summary.element_type();
  if (tag <= 0 || tag > std::numeric_limits<std::uint8_t>::max()) {
    return InvalidArgumentError(
        fmt::format("daemon sent {}: element type {} is not a type tag", summary.name(), tag));
  }
  auto element_type = ElementTypeFromTag(static_cast<std::uint8_t>(tag));
  if (!element_type) {
    return std::unexpected(
        element_type.error().WithContext(fmt::format("daemon sent {}", summary.name())));
  }
  return TensorSummary{.name = summary.name(),
                       .latest_version = summary.latest_version(),
                       .version_count = summary.version_count(),
                       .element_type = *element_type,
                       .shape = {summary.shape().begin(), summary.shape().end()},
                       .byte_size = summary.byte_size(),
                       .lease_count = summary.lease_count(),
                       .published_at = TimeFromNanoseconds(summary.published_at_ns()),
                       .owner_uid = summary.owner_uid()};
}

Result<SyncMode> SyncModeFromProto(std::uint32_t sync_mode) {
  if (sync_mode > std::numeric_limits<std::uint8_t>::max()) {
    return InvalidArgumentError(
        fmt::format("daemon sent an invalid handoff: sync mode {} is not a byte", sync_mode));
  }
  auto mode = SyncModeFromByte(static_cast<std::uint8_t>(sync_mode));
  if (!mode) return std::unexpected(mode.error().WithContext("daemon sent an invalid handoff"));
  return *mode;
}

}  // namespace

Result<TensorListPage> TensorListPageFromProto(const v1::ListResponse& reply) {
  TensorListPage page{.tensors = {},
                      .next_page_token = reply.next_page_token(),
                      .daemon_epoch = reply.daemon_epoch()};
  page.tensors.reserve(static_cast<std::size_t>(reply.tensors_size()));
  for (const v1::TensorSummary& summary : reply.tensors()) {
    HURRAY_ASSIGN_OR_RETURN(TensorSummary converted, TensorSummaryFromProto(summary));
    page.tensors.push_back(std::move(converted));
  }
  return page;
}

Result<TensorDetails> TensorDetailsFromProto(const v1::DescribeResponse& reply) {
  const v1::TensorInfo& tensor = reply.tensor();
  auto descriptor = DescriptorFromProto(tensor.tensor_descriptor());
  if (!descriptor) {
    return std::unexpected(descriptor.error().WithContext("daemon sent an invalid descriptor"));
  }
  HURRAY_ASSIGN_OR_RETURN(const SyncMode sync_mode,
                          SyncModeFromProto(tensor.handoff().sync_mode()));
  const v1::Fence& fence = tensor.handoff().fence();
  TensorDetails details{.name = tensor.name(),
                        .version = tensor.version(),
                        .descriptor = std::move(*descriptor),
                        .buffers = {},
                        .sync_mode = sync_mode,
                        .fence = FenceLocation{.segment_id = fence.segment_id(),
                                               .segment_size = fence.segment_size(),
                                               .offset = fence.offset(),
                                               .value = fence.value()},
                        .ready = tensor.handoff().ready(),
                        .pool = tensor.pool(),
                        .published_at = TimeFromNanoseconds(tensor.published_at_ns()),
                        .versions = {},
                        .daemon_epoch = reply.daemon_epoch(),
                        .owner_uid = reply.owner().uid(),
                        .owner_user = reply.owner().user()};
  details.buffers.reserve(static_cast<std::size_t>(tensor.buffers_size()));
  for (const v1::BufferLocation& location : tensor.buffers()) {
    details.buffers.push_back(BufferLocation{.segment_id = location.segment_id(),
                                             .segment_size = location.segment_size(),
                                             .offset = location.offset(),
                                             .byte_size = location.byte_size()});
  }
  details.versions.reserve(static_cast<std::size_t>(reply.versions_size()));
  for (const v1::VersionInfo& version : reply.versions()) {
    details.versions.push_back(
        VersionSummary{.version = version.version(),
                       .lease_count = version.lease_count(),
                       .superseded = version.superseded(),
                       .byte_size = version.byte_size(),
                       .published_at = TimeFromNanoseconds(version.published_at_ns())});
  }
  return details;
}

namespace {

FastPathStats FastPathStatsFromProto(const v1::StatsResponse& reply) {
  return FastPathStats{.directory_entries_used = reply.fast_path_directory_entries_used(),
                       .directory_entries = reply.fast_path_directory_entries(),
                       .lease_pages = reply.fast_path_lease_pages(),
                       .lease_slots = reply.fast_path_lease_slots(),
                       .pinned_versions = reply.fast_path_pinned_versions(),
                       .pinned_bytes = reply.fast_path_pinned_bytes(),
                       .scans = reply.fast_path_scans(),
                       .refused_names = reply.fast_path_refused_names()};
}

PoolStats PoolStatsFromProto(const v1::PoolStats& pool) {
  return PoolStats{.name = pool.name(),
                   .kind = pool.kind(),
                   .capacity_bytes = pool.capacity_bytes(),
                   .used_bytes = pool.used_bytes(),
                   .largest_free_bytes = pool.largest_free_bytes(),
                   .fragmentation = pool.fragmentation(),
                   .segment_count = pool.segment_count(),
                   .allocation_count = pool.allocation_count(),
                   .page_size_bytes = pool.page_size(),
                   .huge_pages = pool.huge_pages(),
                   .device_uuid = pool.device_uuid(),
                   .device_name = pool.device_name(),
                   .device_ordinal = pool.device_ordinal(),
                   .mechanism = pool.mechanism(),
                   .slab_bytes = pool.slab_bytes(),
                   .gpu_direct_rdma = pool.gpu_direct_rdma(),
                   .slab_mappings = pool.slab_mappings(),
                   .read_only_slab_mappings = pool.read_only_slab_mappings(),
                   .fences_in_use = pool.fences_in_use(),
                   .fences_retired = pool.fences_retired(),
                   .quarantined_bytes = pool.quarantined_bytes(),
                   .quarantined_ranges = pool.quarantined_ranges(),
                   .reserved_bytes = pool.reserved_bytes(),
                   .namespaces = {pool.namespaces().begin(), pool.namespaces().end()}};
}

}  // namespace

DaemonStats DaemonStatsFromProto(const v1::StatsResponse& reply) {
  DaemonStats stats{.pools = {},
                    .session_count = reply.session_count(),
                    .lease_count = reply.lease_count(),
                    .tensor_count = reply.tensor_count(),
                    .version_count = reply.version_count(),
                    .pending_allocation_count = reply.pending_allocation_count(),
                    .daemon_epoch = reply.daemon_epoch(),
                    .uptime = std::chrono::seconds(
                        static_cast<std::chrono::seconds::rep>(reply.uptime_seconds())),
                    .published_bytes_total = reply.published_bytes_total(),
                    .reclaimed_bytes_total = reply.reclaimed_bytes_total(),
                    .closed_session_count = reply.closed_session_count(),
                    .closed_session_lease_count = reply.closed_session_lease_count(),
                    .closed_session_allocation_count = reply.closed_session_allocation_count(),
                    .closed_session_allocation_bytes = reply.closed_session_allocation_bytes(),
                    .evicted_tensor_count = reply.evicted_tensor_count(),
                    .evicted_bytes_total = reply.evicted_bytes_total(),
                    .uids = {},
                    .refused_connection_count = reply.refused_connection_count(),
                    .lost_tensor_count = reply.lost_tensor_count(),
                    .adopted_tensor_count = reply.adopted_tensor_count(),
                    .fast_path = FastPathStatsFromProto(reply),
                    .earlier_epoch_held_versions = reply.earlier_epoch_held_versions(),
                    .earlier_epoch_held_bytes = reply.earlier_epoch_held_bytes(),
                    .quarantined_sessions = reply.quarantined_sessions()};
  for (const v1::UidUsage& usage : reply.uids()) {
    stats.uids.push_back(UidUsage{.uid = usage.uid(),
                                  .pending_bytes = usage.pending_bytes(),
                                  .published_bytes = usage.published_bytes(),
                                  .leases = usage.leases(),
                                  .sessions = usage.sessions()});
  }
  stats.pools.reserve(static_cast<std::size_t>(reply.pools_size()));
  for (const v1::PoolStats& pool : reply.pools()) stats.pools.push_back(PoolStatsFromProto(pool));
  return stats;
}

std::optional<WatchEvent> WatchEventFromProto(const v1::WatchEvent& event) {
  WatchEvent::Kind kind;
  switch (event.kind()) {
    case v1::WatchEvent::KIND_PUBLISHED:
      kind = WatchEvent::Kind::kPublished;
      break;
    case v1::WatchEvent::KIND_DELETED:
      kind = WatchEvent::Kind::kDeleted;
      break;
    case v1::WatchEvent::KIND_EVICTED:
      kind = WatchEvent::Kind::kEvicted;
      break;
    default:
      return std::nullopt;
  }
  return WatchEvent{.kind = kind,
                    .name = event.name(),
                    .version = event.version(),
                    .daemon_epoch = event.daemon_epoch()};
}

}  // namespace hurray::client_internal
