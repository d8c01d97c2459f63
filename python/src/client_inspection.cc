#include "client_inspection.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "errors.h"

namespace hurray::python {
namespace {

namespace py = pybind11;

// How long one wait lasts without a look at Python's signals (Ctrl-C).
constexpr std::chrono::milliseconds kSignalCheckInterval{100};

// Daemon times as integer nanoseconds since the Unix epoch (0: not recorded).
template <typename T>
auto NanosecondsOf(DaemonTime T::* member) {
  return [member](const T& value) { return (value.*member).time_since_epoch().count(); };
}

// WatchEvent.kind in Python.
const char* WatchKindName(const WatchEvent& event) {
  switch (event.kind) {
    case WatchEvent::Kind::kPublished:
      return "published";
    case WatchEvent::Kind::kDeleted:
      return "deleted";
    case WatchEvent::Kind::kEvicted:
      return "evicted";
  }
  return "unknown";
}

void BindTensorReports(py::module_& module) {
  py::class_<TensorSummary>(module, "TensorSummary",
                            "One name in a listing (Client.list), with its latest version.")
      .def_readonly("name", &TensorSummary::name, "The tensor's name.")
      .def_readonly("latest_version", &TensorSummary::latest_version,
                    "The newest version's number.")
      .def_readonly("version_count", &TensorSummary::version_count,
                    "Live versions of the name: the latest plus superseded ones still leased.")
      .def_readonly(
          "owner_uid", &TensorSummary::owner_uid,
          "The uid owning the name's namespace (its first publisher, under the default policy).")
      .def_property_readonly(
          "dtype",
          [](const TensorSummary& summary) {
            return std::string(ElementTypeName(summary.element_type));
          },
          "The element type's name (\"float32\"); hurray.dtype() makes it a hurray.DType.")
      // A tuple, as Descriptor.shape and NumPy's shapes are.
      .def_property_readonly(
          "shape",
          [](const TensorSummary& summary) {
            return pybind11::tuple(pybind11::cast(summary.shape));
          },
          "The latest version's extent of each dimension, in elements.")
      .def_readonly("byte_size", &TensorSummary::byte_size,
                    "The latest version's buffer sizes summed, in bytes.")
      .def_readonly("lease_count", &TensorSummary::lease_count,
                    "Leases held on all versions of the name.")
      .def_property_readonly("published_at", NanosecondsOf(&TensorSummary::published_at),
                             "When the latest version was published, in nanoseconds since the "
                             "Unix epoch (0: not recorded).");
  py::class_<BufferLocation>(module, "BufferLocation",
                             "Where one buffer of a published tensor lives: a byte range of a "
                             "pool segment.")
      .def_readonly("segment_id", &BufferLocation::segment_id,
                    "The pool segment holding the buffer; unique within a daemon epoch.")
      .def_readonly("segment_size", &BufferLocation::segment_size,
                    "Size of the whole segment, in bytes.")
      .def_readonly("offset", &BufferLocation::offset,
                    "Offset of the buffer's first byte from the segment's start, in bytes.")
      .def_readonly("byte_size", &BufferLocation::byte_size,
                    "Size of the buffer in bytes: its descriptor entry's byte_size.");
  py::class_<FenceLocation>(module, "FenceLocation",
                            "The fence of an \"event\" tensor: one 64-bit word in the daemon's "
                            "fence segment, which reaches `value` once the data is ready.")
      .def_readonly("segment_id", &FenceLocation::segment_id,
                    "The fence segment; 0 when there is no fence.")
      .def_readonly("segment_size", &FenceLocation::segment_size,
                    "Size of the whole fence segment, in bytes.")
      .def_readonly("offset", &FenceLocation::offset,
                    "Offset of the fence word in the segment, in bytes; a multiple of 8.")
      .def_readonly("value", &FenceLocation::value,
                    "The value the word reaches when the data is ready.");
  py::class_<VersionSummary>(module, "VersionSummary", "One live version of a name.")
      .def_readonly("version", &VersionSummary::version, "The version's number.")
      .def_readonly("lease_count", &VersionSummary::lease_count, "Leases held on this version.")
      .def_readonly("superseded", &VersionSummary::superseded,
                    "True once a newer version was published (or this one deleted): it lives only "
                    "until its last lease ends.")
      .def_readonly("byte_size", &VersionSummary::byte_size,
                    "The version's buffer sizes summed, in bytes.")
      .def_property_readonly("published_at", NanosecondsOf(&VersionSummary::published_at),
                             "When it was published, in nanoseconds since the Unix epoch (0: "
                             "not recorded).");
  py::class_<TensorDetails>(module, "TensorDetails",
                            "One version of a tensor in full, and every live version of its "
                            "name (Client.describe).")
      .def_readonly("name", &TensorDetails::name, "The tensor's name.")
      .def_readonly("version", &TensorDetails::version, "The version described.")
      .def_readonly("descriptor", &TensorDetails::descriptor, "Its hurray.Descriptor.")
      .def_readonly("buffers", &TensorDetails::buffers,
                    "One hurray.BufferLocation per buffer of the descriptor's table, in table "
                    "order (an empty buffer: byte_size 0, segment_id 0).")
      .def_property_readonly(
          "sync_mode",
          [](const TensorDetails& details) { return std::string(SyncModeName(details.sync_mode)); },
          "When the data may be read: \"producer_synced\", \"event\" (after the fence) or "
          "\"consumer_stream\".")
      .def_readonly("fence", &TensorDetails::fence,
                    "An \"event\" tensor's fence (hurray.FenceLocation); segment_id 0 otherwise.")
      .def_readonly(
          "ready", &TensorDetails::ready,
          "For an \"event\" tensor: whether the daemon saw its fence reached when it answered.")
      .def_readonly("pool", &TensorDetails::pool, "The pool the buffers live in.")
      .def_property_readonly("published_at", NanosecondsOf(&TensorDetails::published_at),
                             "When it was published, in nanoseconds since the Unix epoch (0: "
                             "not recorded).")
      .def_readonly("versions", &TensorDetails::versions,
                    "Every live version of the name (hurray.VersionSummary), oldest first.")
      .def_readonly("owner_uid", &TensorDetails::owner_uid, "The uid owning the name's namespace.")
      .def_readonly("owner_user", &TensorDetails::owner_user,
                    "That uid's user name on the daemon's host; \"\" when it has none.")
      .def_readonly("daemon_epoch", &TensorDetails::daemon_epoch,
                    "The daemon epoch of the answer; it changes when the daemon restarts.");
}

void BindDaemonReports(py::module_& module) {
  py::class_<PoolStats>(module, "PoolStats",
                        "One memory pool of the daemon (DaemonStats.pools). Sizes in bytes.")
      .def_readonly("name", &PoolStats::name, "The pool's name ('cpu', 'cuda:0', ...).")
      .def_readonly("kind", &PoolStats::kind, "'cpu' or 'cuda'.")
      .def_readonly("capacity_bytes", &PoolStats::capacity_bytes, "Bytes reserved for the pool.")
      .def_readonly("used_bytes", &PoolStats::used_bytes,
                    "Bytes in allocations: pending, published or awaiting reclamation.")
      .def_readonly("largest_free_bytes", &PoolStats::largest_free_bytes,
                    "Size of the largest free range, in bytes: the biggest buffer that fits now.")
      .def_readonly("fragmentation", &PoolStats::fragmentation,
                    "1 - largest_free / free: 0 when all free space is one range.")
      .def_readonly("segment_count", &PoolStats::segment_count, "Segments of the pool.")
      .def_readonly("allocation_count", &PoolStats::allocation_count, "Buffers allocated now.")
      .def_readonly(
          "page_size_bytes", &PoolStats::page_size_bytes,
          "Bytes of one page of the pool: the alignment and granule of every buffer in it.")
      .def_readonly("huge_pages", &PoolStats::huge_pages,
                    "Huge pages in effect: \"off\", \"transparent\" or \"explicit\"; \"\" for "
                    "pools without pages of their own (cuda).")
      .def_readonly("device_uuid", &PoolStats::device_uuid,
                    "A CUDA pool's GPU: 'GPU-<uuid>' or 'MIG-<uuid>'; '' for cpu.")
      .def_readonly("device_name", &PoolStats::device_name,
                    "A CUDA pool's device name ('NVIDIA H200'); '' for cpu.")
      .def_readonly("device_ordinal", &PoolStats::device_ordinal,
                    "A CUDA pool's device, as the daemon's CUDA ordinal; 0 for cpu.")
      .def_readonly("mechanism", &PoolStats::mechanism,
                    "How a CUDA pool's slabs reach clients: \"vmm\" (file descriptors) or "
                    "\"legacy_ipc\" (cudaIpc handles); \"\" for cpu.")
      .def_readonly("slab_bytes", &PoolStats::slab_bytes, "Bytes of each slab of a CUDA pool.")
      .def_readonly("gpu_direct_rdma", &PoolStats::gpu_direct_rdma,
                    "A CUDA pool's slabs are allocated GPUDirect RDMA capable.")
      .def_readonly("slab_mappings", &PoolStats::slab_mappings,
                    "Slab mappings the sessions reported.")
      .def_readonly("read_only_slab_mappings", &PoolStats::read_only_slab_mappings,
                    "Of slab_mappings, the read-only ones.")
      .def_readonly("fences_in_use", &PoolStats::fences_in_use, "Fence words in use.")
      .def_readonly("fences_retired", &PoolStats::fences_retired,
                    "Fence words retired for good (their producer ended before signalling).")
      .def_readonly("quarantined_bytes", &PoolStats::quarantined_bytes,
                    "Bytes held out of use until the process of a session that could still write "
                    "them has exited; counted in used_bytes too.")
      .def_readonly("quarantined_ranges", &PoolStats::quarantined_ranges,
                    "The ranges of quarantined_bytes.")
      .def_readonly("reserved_bytes", &PoolStats::reserved_bytes,
                    "Bytes of the pool's memory reserved so far; capacity_bytes once the "
                    "background reservation is done.")
      .def_readonly("namespaces", &PoolStats::namespaces,
                    "Patterns of the tensor names the pool may hold; empty: any.");
  py::class_<UidUsage>(module, "UidUsage",
                       "What one uid holds in the daemon, summed over its sessions.")
      .def_readonly("uid", &UidUsage::uid, "The uid.")
      .def_readonly("pending_bytes", &UidUsage::pending_bytes,
                    "Bytes of its unpublished allocations.")
      .def_readonly("published_bytes", &UidUsage::published_bytes,
                    "Bytes of the versions it published that still hold memory.")
      .def_readonly("leases", &UidUsage::leases, "Leases its sessions hold.")
      .def_readonly("sessions", &UidUsage::sessions, "Its sessions.");
  py::class_<DaemonStats>(module, "DaemonStats",
                          "The daemon's pools, sessions, leases and tensors (Client.stats).")
      .def_readonly("pools", &DaemonStats::pools, "Each pool's hurray.PoolStats.")
      .def_readonly("session_count", &DaemonStats::session_count, "Sessions connected now.")
      .def_readonly("lease_count", &DaemonStats::lease_count, "Leases held now.")
      .def_readonly("tensor_count", &DaemonStats::tensor_count, "Published names.")
      .def_readonly("version_count", &DaemonStats::version_count, "Live versions across all names.")
      .def_readonly("pending_allocation_count", &DaemonStats::pending_allocation_count,
                    "Allocations not yet published.")
      .def_readonly("daemon_epoch", &DaemonStats::daemon_epoch,
                    "The daemon epoch; it changes when the daemon restarts.")
      .def_property_readonly(
          "uptime", [](const DaemonStats& stats) { return stats.uptime.count(); },
          "Time since the daemon started, in whole seconds.")
      .def_readonly("published_bytes_total", &DaemonStats::published_bytes_total,
                    "Since the daemon started: bytes of every version published.")
      .def_readonly("reclaimed_bytes_total", &DaemonStats::reclaimed_bytes_total,
                    "Since the daemon started: bytes of versions returned to their pool "
                    "(superseded or deleted, after their last lease ended).")
      .def_readonly("closed_session_count", &DaemonStats::closed_session_count,
                    "Since the daemon started: sessions that ended.")
      .def_readonly("closed_session_lease_count", &DaemonStats::closed_session_lease_count,
                    "Since the daemon started: leases released because their session ended.")
      .def_readonly(
          "closed_session_allocation_count", &DaemonStats::closed_session_allocation_count,
          "Since the daemon started: unpublished allocations freed because their session ended.")
      .def_readonly("closed_session_allocation_bytes",
                    &DaemonStats::closed_session_allocation_bytes,
                    "The bytes of those allocations.")
      .def_readonly("evicted_tensor_count", &DaemonStats::evicted_tensor_count,
                    "Since the daemon started: evictable versions evicted to make room.")
      .def_readonly("evicted_bytes_total", &DaemonStats::evicted_bytes_total,
                    "The bytes of those versions.")
      .def_readonly("uids", &DaemonStats::uids,
                    "Each uid that holds something now (hurray.UidUsage), by uid.")
      .def_readonly(
          "refused_connection_count", &DaemonStats::refused_connection_count,
          "Since the daemon started: connections refused at max_sessions or max_sessions_per_uid.")
      .def_readonly("lost_tensor_count", &DaemonStats::lost_tensor_count,
                    "At this daemon's start: tensors its journal kept that could not be served "
                    "again (GPU tensors).")
      .def_readonly(
          "adopted_tensor_count", &DaemonStats::adopted_tensor_count,
          "At this daemon's start: tensors served again under the same names and versions.")
      .def_readonly("fast_path", &DaemonStats::fast_path,
                    "The fast path's hurray.FastPathStats (all 0 when it is off).")
      .def_readonly("earlier_epoch_held_versions", &DaemonStats::earlier_epoch_held_versions,
                    "Retired versions kept out of use because clients of an earlier daemon on this "
                    "state directory may still map them.")
      .def_readonly("earlier_epoch_held_bytes", &DaemonStats::earlier_epoch_held_bytes,
                    "The bytes of those versions.")
      .def_readonly("quarantined_sessions", &DaemonStats::quarantined_sessions,
                    "Ended sessions whose ranges stay held until their process has exited.");
  py::class_<FastPathStats>(module, "FastPathStats",
                            "The daemon's fast path (docs/fast-path.md): its directory and the "
                            "sessions' lease pages.")
      .def_readonly("directory_entries_used", &FastPathStats::directory_entries_used,
                    "Directory entries in use (names that have one).")
      .def_readonly("directory_entries", &FastPathStats::directory_entries,
                    "The directory's capacity, in entries.")
      .def_readonly("lease_pages", &FastPathStats::lease_pages, "Lease pages of the live sessions.")
      .def_readonly("lease_slots", &FastPathStats::lease_slots,
                    "Slots of those pages in all (each counts as a lease of its session's uid).")
      .def_readonly(
          "pinned_versions", &FastPathStats::pinned_versions,
          "Superseded or deleted versions kept only because a lease-page slot names them.")
      .def_readonly("pinned_bytes", &FastPathStats::pinned_bytes, "The bytes of those versions.")
      .def_readonly("scans", &FastPathStats::scans,
                    "Since the daemon started: scans of the lease pages.")
      .def_readonly("refused_names", &FastPathStats::refused_names,
                    "Since the daemon started: names published while the directory was full (no "
                    "fast path for them).");
  py::class_<WatchEvent>(module, "WatchEvent",
                         "One publish, delete or eviction a hurray.Watch saw.")
      .def_property_readonly("kind", &WatchKindName,
                             "\"published\", \"deleted\" or \"evicted\" (an evictable version, "
                             "to make room in its pool).")
      .def_readonly("name", &WatchEvent::name, "The tensor's name.")
      .def_readonly("version", &WatchEvent::version, "The version published, deleted or evicted.")
      .def_readonly("daemon_epoch", &WatchEvent::daemon_epoch,
                    "The daemon epoch the event happened in.")
      .def("__repr__", [](const WatchEvent& event) {
        return fmt::format("<hurray.WatchEvent {} {} v{}>", WatchKindName(event), event.name,
                           event.version);
      });
}

}  // namespace

void WatchQueue::Push(const WatchEvent& event) {
  {
    const std::scoped_lock lock(mutex_);
    events_.push_back(event);
  }
  changed_.notify_all();
}

void WatchQueue::End(const Status& status) {
  {
    const std::scoped_lock lock(mutex_);
    end_ = status;
  }
  changed_.notify_all();
}

std::optional<WatchEvent> WatchQueue::Pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [this] { return !events_.empty() || end_.has_value(); });
  if (events_.empty()) return std::nullopt;
  WatchEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

std::optional<Status> WatchQueue::ended() {
  const std::scoped_lock lock(mutex_);
  return end_;
}

py::object PyWatch::Next(std::optional<double> timeout_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = timeout_seconds
                            ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(*timeout_seconds))
                            : Clock::time_point::max();
  while (true) {
    std::optional<WatchEvent> event;
    std::optional<Status> end;
    {
      const py::gil_scoped_release release;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      event = queue_->Pop(std::clamp(left, std::chrono::milliseconds(0), kSignalCheckInterval));
      if (!event) end = queue_->ended();
    }
    if (event) return py::cast(*std::move(event));
    if (end) {
      OkOrRaise(*end);
      throw py::stop_iteration();
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (Clock::now() >= deadline) return py::none();
  }
}

void PyWatch::Close() {
  const py::gil_scoped_release release;
  handle_.reset();
}

void BindInspection(py::module_& module) {
  BindTensorReports(module);
  BindDaemonReports(module);
  py::class_<PyWatch>(module, "Watch", "The publishes and deletes under a prefix, as they happen.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](PyWatch& self) { return self.Next(std::nullopt); })
      .def("get", &PyWatch::Next, py::arg("timeout") = py::none(),
           "The next event, or None when `timeout` seconds pass first.")
      .def("close", &PyWatch::Close, "Stops the watch.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyWatch& self, const py::args&) { self.Close(); });
}

}  // namespace hurray::python
