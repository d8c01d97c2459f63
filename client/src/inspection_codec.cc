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

namespace hurray::client_internal {
namespace {

std::int64_t NanosecondsOf(DaemonTime time) { return time.time_since_epoch().count(); }

void SetSummary(const TensorSummary& summary, v1::TensorSummary& message) {
  message.set_name(summary.name);
  message.set_latest_version(summary.latest_version);
  message.set_version_count(summary.version_count);
  message.set_element_type(static_cast<v1::ElementType>(ElementTypeTag(summary.element_type)));
  message.mutable_shape()->Add(summary.shape.begin(), summary.shape.end());
  message.set_byte_size(summary.byte_size);
  message.set_lease_count(summary.lease_count);
  message.set_published_at_ns(NanosecondsOf(summary.published_at));
  message.set_owner_uid(summary.owner_uid);
}

void SetPool(const PoolStats& pool, v1::PoolStats& message) {
  message.set_name(pool.name);
  message.set_kind(pool.kind);
  message.set_capacity_bytes(pool.capacity_bytes);
  message.set_used_bytes(pool.used_bytes);
  message.set_largest_free_bytes(pool.largest_free_bytes);
  message.set_fragmentation(pool.fragmentation);
  message.set_segment_count(pool.segment_count);
  message.set_allocation_count(pool.allocation_count);
  message.set_page_size(pool.page_size_bytes);
  message.set_huge_pages(pool.huge_pages);
  message.set_device_uuid(pool.device_uuid);
  message.set_device_name(pool.device_name);
  message.set_device_ordinal(pool.device_ordinal);
  message.set_mechanism(pool.mechanism);
  message.set_slab_bytes(pool.slab_bytes);
  message.set_slab_mappings(pool.slab_mappings);
  message.set_read_only_slab_mappings(pool.read_only_slab_mappings);
  message.set_fences_in_use(pool.fences_in_use);
  message.set_fences_retired(pool.fences_retired);
  message.set_reserved_bytes(pool.reserved_bytes);
  message.mutable_namespaces()->Add(pool.namespaces.begin(), pool.namespaces.end());
  message.set_quarantined_bytes(pool.quarantined_bytes);
  message.set_quarantined_ranges(pool.quarantined_ranges);
  message.set_gpu_direct_rdma(pool.gpu_direct_rdma);
}

}  // namespace

v1::ListResponse TensorListPageToProto(const TensorListPage& page) {
  v1::ListResponse reply;
  for (const TensorSummary& summary : page.tensors) SetSummary(summary, *reply.add_tensors());
  reply.set_next_page_token(page.next_page_token);
  reply.set_daemon_epoch(page.daemon_epoch);
  return reply;
}

v1::DescribeResponse TensorDetailsToProto(const TensorDetails& details) {
  v1::DescribeResponse reply;
  v1::TensorInfo& tensor = *reply.mutable_tensor();
  tensor.set_name(details.name);
  tensor.set_version(details.version);
  *tensor.mutable_tensor_descriptor() = DescriptorToProto(details.descriptor);
  for (const BufferLocation& location : details.buffers) {
    v1::BufferLocation& message = *tensor.add_buffers();
    message.set_segment_id(location.segment_id);
    message.set_segment_size(location.segment_size);
    message.set_offset(location.offset);
    message.set_byte_size(location.byte_size);
  }
  v1::SyncHandoff& handoff = *tensor.mutable_handoff();
  handoff.set_sync_mode(SyncModeToByte(details.sync_mode));
  // The daemon sends a fence only for a version that has one, and fence segments are never 0.
  if (details.fence.segment_id != 0) {
    v1::Fence& fence = *handoff.mutable_fence();
    fence.set_segment_id(details.fence.segment_id);
    fence.set_segment_size(details.fence.segment_size);
    fence.set_offset(details.fence.offset);
    fence.set_value(details.fence.value);
  }
  handoff.set_ready(details.ready);
  tensor.set_pool(details.pool);
  tensor.set_published_at_ns(NanosecondsOf(details.published_at));
  for (const VersionSummary& version : details.versions) {
    v1::VersionInfo& message = *reply.add_versions();
    message.set_version(version.version);
    message.set_lease_count(version.lease_count);
    message.set_superseded(version.superseded);
    message.set_byte_size(version.byte_size);
    message.set_published_at_ns(NanosecondsOf(version.published_at));
  }
  reply.set_daemon_epoch(details.daemon_epoch);
  reply.mutable_owner()->set_uid(details.owner_uid);
  reply.mutable_owner()->set_user(details.owner_user);
  return reply;
}

v1::StatsResponse DaemonStatsToProto(const DaemonStats& stats) {
  v1::StatsResponse reply;
  for (const PoolStats& pool : stats.pools) SetPool(pool, *reply.add_pools());
  reply.set_session_count(stats.session_count);
  reply.set_lease_count(stats.lease_count);
  reply.set_tensor_count(stats.tensor_count);
  reply.set_version_count(stats.version_count);
  reply.set_pending_allocation_count(stats.pending_allocation_count);
  reply.set_daemon_epoch(stats.daemon_epoch);
  reply.set_uptime_seconds(static_cast<std::uint64_t>(stats.uptime.count()));
  reply.set_published_bytes_total(stats.published_bytes_total);
  reply.set_reclaimed_bytes_total(stats.reclaimed_bytes_total);
  reply.set_closed_session_count(stats.closed_session_count);
  reply.set_closed_session_lease_count(stats.closed_session_lease_count);
  reply.set_closed_session_allocation_count(stats.closed_session_allocation_count);
  reply.set_closed_session_allocation_bytes(stats.closed_session_allocation_bytes);
  for (const UidUsage& usage : stats.uids) {
    v1::UidUsage& message = *reply.add_uids();
    message.set_uid(usage.uid);
    message.set_pending_bytes(usage.pending_bytes);
    message.set_published_bytes(usage.published_bytes);
    message.set_leases(usage.leases);
    message.set_sessions(usage.sessions);
  }
  reply.set_evicted_tensor_count(stats.evicted_tensor_count);
  reply.set_evicted_bytes_total(stats.evicted_bytes_total);
  reply.set_lost_tensor_count(stats.lost_tensor_count);
  reply.set_adopted_tensor_count(stats.adopted_tensor_count);
  reply.set_refused_connection_count(stats.refused_connection_count);
  reply.set_fast_path_directory_entries_used(stats.fast_path.directory_entries_used);
  reply.set_fast_path_directory_entries(stats.fast_path.directory_entries);
  reply.set_fast_path_lease_pages(stats.fast_path.lease_pages);
  reply.set_fast_path_lease_slots(stats.fast_path.lease_slots);
  reply.set_fast_path_pinned_versions(stats.fast_path.pinned_versions);
  reply.set_fast_path_pinned_bytes(stats.fast_path.pinned_bytes);
  reply.set_fast_path_scans(stats.fast_path.scans);
  reply.set_fast_path_refused_names(stats.fast_path.refused_names);
  reply.set_earlier_epoch_held_versions(stats.earlier_epoch_held_versions);
  reply.set_earlier_epoch_held_bytes(stats.earlier_epoch_held_bytes);
  reply.set_quarantined_sessions(stats.quarantined_sessions);
  return reply;
}

v1::WatchEvent WatchEventToProto(const WatchEvent& event) {
  v1::WatchEvent message;
  switch (event.kind) {
    case WatchEvent::Kind::kPublished:
      message.set_kind(v1::WatchEvent::KIND_PUBLISHED);
      break;
    case WatchEvent::Kind::kDeleted:
      message.set_kind(v1::WatchEvent::KIND_DELETED);
      break;
    case WatchEvent::Kind::kEvicted:
      message.set_kind(v1::WatchEvent::KIND_EVICTED);
      break;
  }
  message.set_name(event.name);
  message.set_version(event.version);
  message.set_daemon_epoch(event.daemon_epoch);
  return message;
}

}  // namespace hurray::client_internal
