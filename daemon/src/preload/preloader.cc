#include "preload/preloader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <span>
#include <string>
#include <system_error>
#include <utility>

#include "hurray/descriptor_codec.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/shared_mapping.h"
#include "hurray/tensor_import.h"

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

// Whether `name` is a pool the preload can fill, asked before the file is opened.
Status CheckPool(const PoolSet& pools, const std::string& name) {
  const Pool* pool = pools.Find(name);
  if (pool == nullptr) return NotFoundError(fmt::format("pool {} does not exist", name));
  if (pool->device_tag() != DeviceTag::Cpu()) {
    return FailedPreconditionError(
        fmt::format("pool {} is not a CPU pool: files are preloaded into CPU pools only", name));
  }
  return {};
}

// The pool and the registry as an import's sink: each tensor allocated by the daemon's own
// session in `pool`, its segments granted to that session and mapped read-write, and every
// tensor published with one PublishBatch. Destroying the sink unmaps the segments, then ends
// the session, which frees whatever was allocated and not published.
class PoolSink final : public TensorImport::Sink {
 public:
  PoolSink(Registry& registry, std::uint64_t session_id, std::string pool)
      : session_(registry, session_id), registry_(registry), pool_(std::move(pool)) {}

  Result<std::vector<std::span<std::byte>>> Allocate(const std::string& name,
                                                     const TensorDescriptor& descriptor) override {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() = DescriptorToProto(descriptor);
    request.set_pool(pool_);
    HURRAY_ASSIGN_OR_RETURN(const v1::AllocateResponse allocated,
                            registry_.Allocate(session_.id(), request));
    allocation_ids_.push_back(allocated.allocation_id());
    names_.push_back(name);
    std::vector<std::span<std::byte>> buffers;
    buffers.reserve(static_cast<std::size_t>(allocated.buffers_size()));
    for (const v1::BufferLocation& location : allocated.buffers()) {
      HURRAY_ASSIGN_OR_RETURN(const std::span<std::byte> bytes, Bytes(location));
      buffers.push_back(bytes);
    }
    return buffers;
  }

  Status PublishAll() override {
    // Unmapped before publishing: a sealed pool seals only memory that nobody maps writable.
    mappings_.clear();
    v1::PublishBatchRequest request;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      v1::PublishRequest& item = *request.add_items();
      item.set_allocation_id(allocation_ids_[i]);
      item.set_name(names_[i]);
    }
    HURRAY_RETURN_IF_ERROR(registry_.PublishBatch(session_.id(), request));
    return {};
  }

 private:
  // The bytes of `location` in its segment, which is granted and mapped on first use;
  // INTERNAL when they are not inside the segment.
  Result<std::span<std::byte>> Bytes(const v1::BufferLocation& location) {
    if (location.byte_size() == 0) return std::span<std::byte>();
    auto mapping = mappings_.find(location.segment_id());
    if (mapping == mappings_.end()) {
      HURRAY_ASSIGN_OR_RETURN(const SegmentAccess access,
                              registry_.GrantSegment(session_.id(), location.segment_id(), true));
      HURRAY_ASSIGN_OR_RETURN(
          SharedMapping mapped,
          SharedMapping::Map(access.fd.get(), access.segment_size, PROT_READ | PROT_WRITE,
                             fmt::format("segment {}", location.segment_id())));
      mapping = mappings_.emplace(location.segment_id(), std::move(mapped)).first;
    }
    const std::uint64_t size = mapping->second.size();
    if (location.offset() > size || location.byte_size() > size - location.offset()) {
      return InternalError(
          fmt::format("segment {}: buffer at offset {} of {} bytes is outside its {} bytes",
                      location.segment_id(), location.offset(), location.byte_size(), size));
    }
    return std::span<std::byte>(mapping->second.bytes() + location.offset(), location.byte_size());
  }

  const DaemonSession session_;  // First: ended after the segments are unmapped.
  Registry& registry_;
  const std::string pool_;
  std::map<std::uint64_t, SharedMapping> mappings_;  // By segment id.
  std::vector<std::uint64_t> allocation_ids_;
  std::vector<std::string> names_;
};

Result<PreloadSummary> Import(Registry& registry, const PoolSet& pools,
                              const Config::Preload& entry, const std::stop_token& stop) {
  HURRAY_RETURN_IF_ERROR(CheckPool(pools, entry.pool));
  HURRAY_ASSIGN_OR_RETURN(const TensorImport import,
                          TensorImport::Open(entry.path, {.prefix = entry.prefix}));
  spdlog::info("preload: reading {} tensors, {} MiB, from {} under \"{}\"", import.names().size(),
               import.file().total_bytes() >> 20, entry.path, entry.prefix);
  HURRAY_ASSIGN_OR_RETURN(
      const SessionGrant grant,
      registry.OpenSession(PeerCredentials{.pid = ::getpid(), .uid = ::getuid(), .gid = ::getgid()},
                           "hurrayd preload"));
  PoolSink sink(registry, grant.session_id, entry.pool);
  HURRAY_RETURN_IF_ERROR(import.Run(sink, {.stop = stop}));
  return PreloadSummary{.tensors = import.names().size(), .bytes = import.file().total_bytes()};
}

}  // namespace

Result<PreloadSummary> PreloadFile(Registry& registry, const PoolSet& pools,
                                   const Config::Preload& entry, const std::stop_token& stop) {
  auto imported = Import(registry, pools, entry, stop);
  // TensorImport's errors name the file already; CheckPool's and OpenSession's get it here.
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
