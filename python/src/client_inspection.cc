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
  py::class_<TensorSummary>(module, "TensorSummary")
      .def_readonly("name", &TensorSummary::name)
      .def_readonly("latest_version", &TensorSummary::latest_version)
      .def_readonly("version_count", &TensorSummary::version_count)
      .def_readonly("owner_uid", &TensorSummary::owner_uid)
      .def_property_readonly("dtype",
                             [](const TensorSummary& summary) {
                               return std::string(ElementTypeName(summary.element_type));
                             })
      // A tuple, as Descriptor.shape and NumPy's shapes are.
      .def_property_readonly("shape",
                             [](const TensorSummary& summary) {
                               return pybind11::tuple(pybind11::cast(summary.shape));
                             })
      .def_readonly("byte_size", &TensorSummary::byte_size)
      .def_readonly("lease_count", &TensorSummary::lease_count)
      .def_property_readonly("published_at", NanosecondsOf(&TensorSummary::published_at));
  py::class_<BufferLocation>(module, "BufferLocation")
      .def_readonly("segment_id", &BufferLocation::segment_id)
      .def_readonly("segment_size", &BufferLocation::segment_size)
      .def_readonly("offset", &BufferLocation::offset)
      .def_readonly("byte_size", &BufferLocation::byte_size);
  py::class_<FenceLocation>(module, "FenceLocation")
      .def_readonly("segment_id", &FenceLocation::segment_id)
      .def_readonly("segment_size", &FenceLocation::segment_size)
      .def_readonly("offset", &FenceLocation::offset)
      .def_readonly("value", &FenceLocation::value);
  py::class_<VersionSummary>(module, "VersionSummary")
      .def_readonly("version", &VersionSummary::version)
      .def_readonly("lease_count", &VersionSummary::lease_count)
      .def_readonly("superseded", &VersionSummary::superseded)
      .def_readonly("byte_size", &VersionSummary::byte_size)
      .def_property_readonly("published_at", NanosecondsOf(&VersionSummary::published_at));
  py::class_<TensorDetails>(module, "TensorDetails")
      .def_readonly("name", &TensorDetails::name)
      .def_readonly("version", &TensorDetails::version)
      .def_readonly("descriptor", &TensorDetails::descriptor)
      .def_readonly("buffers", &TensorDetails::buffers)
      .def_property_readonly(
          "sync_mode",
          [](const TensorDetails& details) { return std::string(SyncModeName(details.sync_mode)); })
      .def_readonly("fence", &TensorDetails::fence)
      .def_readonly("ready", &TensorDetails::ready)
      .def_readonly("pool", &TensorDetails::pool)
      .def_property_readonly("published_at", NanosecondsOf(&TensorDetails::published_at))
      .def_readonly("versions", &TensorDetails::versions)
      .def_readonly("owner_uid", &TensorDetails::owner_uid)
      .def_readonly("owner_user", &TensorDetails::owner_user)
      .def_readonly("daemon_epoch", &TensorDetails::daemon_epoch);
}

void BindDaemonReports(py::module_& module) {
  py::class_<PoolStats>(module, "PoolStats")
      .def_readonly("name", &PoolStats::name)
      .def_readonly("kind", &PoolStats::kind)
      .def_readonly("capacity_bytes", &PoolStats::capacity_bytes)
      .def_readonly("used_bytes", &PoolStats::used_bytes)
      .def_readonly("largest_free_bytes", &PoolStats::largest_free_bytes)
      .def_readonly("fragmentation", &PoolStats::fragmentation)
      .def_readonly("segment_count", &PoolStats::segment_count)
      .def_readonly("allocation_count", &PoolStats::allocation_count)
      .def_readonly("page_size_bytes", &PoolStats::page_size_bytes)
      .def_readonly("huge_pages", &PoolStats::huge_pages)
      .def_readonly("device_uuid", &PoolStats::device_uuid)
      .def_readonly("device_name", &PoolStats::device_name)
      .def_readonly("device_ordinal", &PoolStats::device_ordinal)
      .def_readonly("mechanism", &PoolStats::mechanism)
      .def_readonly("slab_bytes", &PoolStats::slab_bytes)
      .def_readonly("gpu_direct_rdma", &PoolStats::gpu_direct_rdma)
      .def_readonly("slab_mappings", &PoolStats::slab_mappings)
      .def_readonly("read_only_slab_mappings", &PoolStats::read_only_slab_mappings)
      .def_readonly("fences_in_use", &PoolStats::fences_in_use)
      .def_readonly("fences_retired", &PoolStats::fences_retired)
      .def_readonly("quarantined_bytes", &PoolStats::quarantined_bytes)
      .def_readonly("quarantined_ranges", &PoolStats::quarantined_ranges)
      .def_readonly("reserved_bytes", &PoolStats::reserved_bytes)
      .def_readonly("namespaces", &PoolStats::namespaces);
  py::class_<UidUsage>(module, "UidUsage")
      .def_readonly("uid", &UidUsage::uid)
      .def_readonly("pending_bytes", &UidUsage::pending_bytes)
      .def_readonly("published_bytes", &UidUsage::published_bytes)
      .def_readonly("leases", &UidUsage::leases)
      .def_readonly("sessions", &UidUsage::sessions);
  py::class_<DaemonStats>(module, "DaemonStats")
      .def_readonly("pools", &DaemonStats::pools)
      .def_readonly("session_count", &DaemonStats::session_count)
      .def_readonly("lease_count", &DaemonStats::lease_count)
      .def_readonly("tensor_count", &DaemonStats::tensor_count)
      .def_readonly("version_count", &DaemonStats::version_count)
      .def_readonly("pending_allocation_count", &DaemonStats::pending_allocation_count)
      .def_readonly("daemon_epoch", &DaemonStats::daemon_epoch)
      .def_property_readonly("uptime",
                             [](const DaemonStats& stats) { return stats.uptime.count(); })
      .def_readonly("published_bytes_total", &DaemonStats::published_bytes_total)
      .def_readonly("reclaimed_bytes_total", &DaemonStats::reclaimed_bytes_total)
      .def_readonly("closed_session_count", &DaemonStats::closed_session_count)
      .def_readonly("closed_session_lease_count", &DaemonStats::closed_session_lease_count)
      .def_readonly("closed_session_allocation_count",
                    &DaemonStats::closed_session_allocation_count)
      .def_readonly("closed_session_allocation_bytes",
                    &DaemonStats::closed_session_allocation_bytes)
      .def_readonly("evicted_tensor_count", &DaemonStats::evicted_tensor_count)
      .def_readonly("evicted_bytes_total", &DaemonStats::evicted_bytes_total)
      .def_readonly("uids", &DaemonStats::uids)
      .def_readonly("refused_connection_count", &DaemonStats::refused_connection_count)
      .def_readonly("lost_tensor_count", &DaemonStats::lost_tensor_count)
      .def_readonly("adopted_tensor_count", &DaemonStats::adopted_tensor_count)
      .def_readonly("fast_path", &DaemonStats::fast_path)
      .def_readonly("earlier_epoch_held_versions", &DaemonStats::earlier_epoch_held_versions)
      .def_readonly("earlier_epoch_held_bytes", &DaemonStats::earlier_epoch_held_bytes)
      .def_readonly("quarantined_sessions", &DaemonStats::quarantined_sessions);
  py::class_<FastPathStats>(module, "FastPathStats")
      .def_readonly("directory_entries_used", &FastPathStats::directory_entries_used)
      .def_readonly("directory_entries", &FastPathStats::directory_entries)
      .def_readonly("lease_pages", &FastPathStats::lease_pages)
      .def_readonly("lease_slots", &FastPathStats::lease_slots)
      .def_readonly("pinned_versions", &FastPathStats::pinned_versions)
      .def_readonly("pinned_bytes", &FastPathStats::pinned_bytes)
      .def_readonly("scans", &FastPathStats::scans)
      .def_readonly("refused_names", &FastPathStats::refused_names);
  py::class_<WatchEvent>(module, "WatchEvent")
      .def_property_readonly("kind", &WatchKindName)
      .def_readonly("name", &WatchEvent::name)
      .def_readonly("version", &WatchEvent::version)
      .def_readonly("daemon_epoch", &WatchEvent::daemon_epoch)
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
