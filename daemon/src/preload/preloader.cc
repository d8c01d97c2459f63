#include "preload/preloader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <span>
#include <string>
#include <system_error>
#include <utility>

#include "hurray/descriptor_codec.h"
#include "hurray/errno_error.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/shared_mapping.h"
#include "hurray/tensor_file.h"

namespace hurray::daemon {
namespace {

// The daemon's own session, ended (its unpublished allocations freed) on destruction.
class DaemonSession {
 public:
  DaemonSession(Registry& registry, std::uint64_t id) : registry_(registry), id_(id) {}
  ~DaemonSession() { registry_.CloseSession(id_); }
  DaemonSession(const DaemonSession&) = delete;
  DaemonSession& operator=(const DaemonSession&) = delete;

  [[nodiscard]] std::uint64_t id() const { return id_; }

 private:
  Registry& registry_;
  const std::uint64_t id_;
};

// A read-write mapping of a whole pool segment, unmapped on destruction.
class SegmentMapping {
 public:
  static Result<SegmentMapping> Map(const SegmentAccess& access, std::uint64_t segment_id) {
    HURRAY_ASSIGN_OR_RETURN(
        SharedMapping mapping,
        SharedMapping::Map(access.fd.get(), access.segment_size, PROT_READ | PROT_WRITE,
                           fmt::format("segment {}", segment_id)));
    return SegmentMapping(std::move(mapping));
  }

  // The bytes of `location`; INTERNAL when they are not inside the segment.
  [[nodiscard]] Result<std::span<std::byte>> Bytes(const v1::BufferLocation& location) const {
    const std::uint64_t size = mapping_.size();
    if (location.offset() > size || location.byte_size() > size - location.offset()) {
      return InternalError(
          fmt::format("segment {}: buffer at offset {} of {} bytes is outside "
                      "its {} bytes",
                      location.segment_id(), location.offset(), location.byte_size(), size));
    }
    return std::span<std::byte>(mapping_.bytes() + location.offset(), location.byte_size());
  }

 private:
  explicit SegmentMapping(SharedMapping mapping) : mapping_(std::move(mapping)) {}
  SharedMapping mapping_;
};

Status CheckPool(const PoolSet& pools, const std::string& name) {
  const Pool* pool = pools.Find(name);
  if (pool == nullptr) return NotFoundError(fmt::format("pool {} does not exist", name));
  if (pool->device_tag() != DeviceTag::Cpu()) {
    return FailedPreconditionError(
        fmt::format("pool {} is not a CPU pool: files are preloaded into CPU pools only", name));
  }
  return {};
}

// Where each tensor's buffers are: allocations made, their segments mapped.
struct Placement {
  std::vector<std::uint64_t> allocation_ids;
  std::vector<std::vector<std::span<std::byte>>> destinations;
  std::map<std::uint64_t, SegmentMapping> mappings;  // By segment id.
};

Result<std::span<std::byte>> Destination(Registry& registry, std::uint64_t session_id,
                                         const v1::BufferLocation& location, Placement& placement) {
  if (location.byte_size() == 0) return std::span<std::byte>();
  auto mapping = placement.mappings.find(location.segment_id());
  if (mapping == placement.mappings.end()) {
    HURRAY_ASSIGN_OR_RETURN(const SegmentAccess access,
                            registry.GrantSegment(session_id, location.segment_id(), true));
    HURRAY_ASSIGN_OR_RETURN(SegmentMapping mapped,
                            SegmentMapping::Map(access, location.segment_id()));
    mapping = placement.mappings.emplace(location.segment_id(), std::move(mapped)).first;
  }
  return mapping->second.Bytes(location);
}

Result<Placement> Place(Registry& registry, std::uint64_t session_id, const TensorFile& file,
                        const std::string& pool) {
  Placement placement;
  for (const TensorFile::Tensor& tensor : file.tensors()) {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() = DescriptorToProto(tensor.descriptor);
    request.set_pool(pool);
    auto allocated = registry.Allocate(session_id, request);
    if (!allocated) {
      return std::unexpected(
          allocated.error().WithContext(fmt::format("tensor \"{}\"", tensor.name)));
    }
    placement.allocation_ids.push_back(allocated->allocation_id());
    std::vector<std::span<std::byte>>& buffers = placement.destinations.emplace_back();
    for (const v1::BufferLocation& location : allocated->buffers()) {
      HURRAY_ASSIGN_OR_RETURN(const std::span<std::byte> bytes,
                              Destination(registry, session_id, location, placement));
      buffers.push_back(bytes);
    }
  }
  return placement;
}

Status Publish(Registry& registry, std::uint64_t session_id, const Placement& placement,
               const std::vector<std::string>& names) {
  v1::PublishBatchRequest request;
  for (std::size_t i = 0; i < names.size(); ++i) {
    v1::PublishRequest& item = *request.add_items();
    item.set_allocation_id(placement.allocation_ids[i]);
    item.set_name(names[i]);
  }
  HURRAY_RETURN_IF_ERROR(registry.PublishBatch(session_id, request));
  return {};
}

Result<PreloadSummary> Import(Registry& registry, const PoolSet& pools,
                              const Config::Preload& entry, const std::stop_token& stop) {
  HURRAY_RETURN_IF_ERROR(CheckPool(pools, entry.pool));
  HURRAY_ASSIGN_OR_RETURN(const TensorFile file, TensorFile::Open(entry.path));
  HURRAY_ASSIGN_OR_RETURN(const std::vector<std::string> names, file.PrefixedNames(entry.prefix));
  spdlog::info("preload: reading {} tensors, {} MiB, from {} under \"{}\"", names.size(),
               file.total_bytes() >> 20, entry.path, entry.prefix);
  HURRAY_ASSIGN_OR_RETURN(
      const SessionGrant grant,
      registry.OpenSession(PeerCredentials{.pid = ::getpid(), .uid = ::getuid(), .gid = ::getgid()},
                           "hurrayd preload"));
  const DaemonSession session(registry, grant.session_id);
  HURRAY_ASSIGN_OR_RETURN(Placement placement, Place(registry, session.id(), file, entry.pool));
  HURRAY_RETURN_IF_ERROR(file.Read(placement.destinations, {.stop = stop}));
  if (stop.stop_requested()) return CancelledError("stopped before publishing");
  // Unmapped before publishing: a sealed pool seals only memory that nobody maps writable.
  placement.destinations.clear();
  placement.mappings.clear();
  HURRAY_RETURN_IF_ERROR(Publish(registry, session.id(), placement, names));
  return PreloadSummary{.tensors = names.size(), .bytes = file.total_bytes()};
}

}  // namespace

Result<PreloadSummary> PreloadFile(Registry& registry, const PoolSet& pools,
                                   const Config::Preload& entry, const std::stop_token& stop) {
  auto imported = Import(registry, pools, entry, stop);
  // TensorFile's and ReadFileRanges' errors name the file already; the others get it here.
  if (!imported && imported.error().message().find(entry.path) == std::string::npos) {
    return std::unexpected(imported.error().WithContext(entry.path));
  }
  return imported;
}

Result<std::unique_ptr<Preloader>> Preloader::Start(Registry& registry, const PoolSet& pools,
                                                    std::vector<Config::Preload> entries,
                                                    Callbacks callbacks) {
  std::unique_ptr<Preloader> preloader(
      new Preloader(registry, pools, std::move(entries), std::move(callbacks)));
  try {
    preloader->thread_ = std::jthread(
        [preloader = preloader.get()](const std::stop_token& stop) { preloader->Run(stop); });
  } catch (const std::system_error& error) {
    return ResourceExhaustedError(fmt::format("starting the preload thread: {}", error.what()));
  }
  return preloader;
}

Preloader::Preloader(Registry& registry, const PoolSet& pools, std::vector<Config::Preload> entries,
                     Callbacks callbacks)
    : registry_(registry),
      pools_(pools),
      entries_(std::move(entries)),
      callbacks_(std::move(callbacks)) {}

Preloader::~Preloader() { Stop(); }

void Preloader::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void Preloader::Run(const std::stop_token& stop) {
  for (std::size_t i = 0; i < entries_.size() && !stop.stop_requested(); ++i) {
    const Config::Preload& entry = entries_[i];
    if (callbacks_.loading) callbacks_.loading(entry, i, entries_.size());
    const auto started = std::chrono::steady_clock::now();
    auto imported = PreloadFile(registry_, pools_, entry, stop);
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - started;
    if (stop.stop_requested()) {
      spdlog::info("preload: stopped while importing {}; nothing of it was published", entry.path);
      return;
    }
    if (imported) {
      spdlog::info("preload: {} tensors, {} MiB, from {} published under \"{}\" in {:.2f} s",
                   imported->tensors, imported->bytes >> 20, entry.path, entry.prefix,
                   seconds.count());
    } else if (entry.required) {
      spdlog::error("preload[{}] failed (required): {}", i, imported.error().ToString());
      if (callbacks_.done)
        callbacks_.done(
            std::unexpected(imported.error().WithContext(fmt::format("preload[{}]", i))));
      return;
    } else {
      spdlog::warn("preload[{}] skipped (required = false): {}", i, imported.error().ToString());
    }
  }
  if (!stop.stop_requested() && callbacks_.done) callbacks_.done({});
}

}  // namespace hurray::daemon
