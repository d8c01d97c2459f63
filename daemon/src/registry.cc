#include "registry.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <boost/container/small_vector.hpp>

#include "hurray/descriptor_codec.h"
#include "tensor_name.h"

namespace hurray::daemon {
namespace {

constexpr std::string_view kDefaultPool = "cpu";
constexpr std::uint32_t kDefaultPageSize = 100;
constexpr std::uint32_t kMaxPageSize = 1000;
constexpr std::size_t kCudaIpcEventHandleBytes = 64;

std::string Str(std::uint64_t value) { return std::to_string(value); }

std::int64_t NowNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// 128 random bits, hex: a session token nobody can guess.
std::string RandomToken() {
  std::array<unsigned char, 16> bytes{};
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got > 0) filled += static_cast<std::size_t>(got);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char byte : bytes) {
    token += kHex[byte >> 4];
    token += kHex[byte & 0xF];
  }
  return token;
}

bool HasPrefix(std::string_view name, std::string_view prefix) {
  return name.substr(0, prefix.size()) == prefix;
}

Status ValidateHandoff(const v1::SyncHandoff& handoff, const v1::TensorDescriptor& descriptor) {
  if (handoff.sync_mode() > 1) {
    return InvalidArgumentError("handoff.sync_mode " + Str(handoff.sync_mode()) +
                                " is neither 0 (producer_synced) nor 1 (event)");
  }
  const bool event = handoff.sync_mode() == 1;
  if (event && handoff.cuda_ipc_event_handle().size() != kCudaIpcEventHandleBytes) {
    return InvalidArgumentError("handoff.cuda_ipc_event_handle has " +
                                Str(handoff.cuda_ipc_event_handle().size()) +
                                " bytes; an event handoff needs " +
                                Str(kCudaIpcEventHandleBytes));
  }
  if (!event && !handoff.cuda_ipc_event_handle().empty()) {
    return InvalidArgumentError(
        "handoff.cuda_ipc_event_handle is set but handoff.sync_mode is producer_synced");
  }
  // Every buffer must declare the mode the handoff delivers (ConsumerStream cannot cross
  // processes: the producer cannot enqueue onto another process's stream).
  for (int i = 0; i < descriptor.buffers_size(); ++i) {
    if (descriptor.buffers(i).sync_mode() != handoff.sync_mode()) {
      return InvalidArgumentError("handoff.sync_mode " + Str(handoff.sync_mode()) +
                                  " differs from tensor_descriptor.buffers[" + Str(i) +
                                  "].sync_mode " + Str(descriptor.buffers(i).sync_mode()));
    }
  }
  return {};
}

// Reads the element type and shape of the descriptor in a serialized v1::TensorInfo into
// `summary`, and nothing else: List shows only these, and parsing whole TensorInfos (buffer
// tables, layouts, metadata) made a page of 1000 names take about 1.7x as long. The bytes
// are this daemon's own serialization, which writes known fields in field-number order
// (unknown ones last), so reading stops at the first field past the one it needs. False on
// bytes that do not decode.
bool ReadElementTypeAndShape(const std::string& info, v1::TensorSummary& summary) {
  using v1::TensorDescriptor;
  using Wire = google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(info.data()),
                                            static_cast<int>(info.size()));
  std::uint32_t tag = 0;
  while ((tag = in.ReadTag()) != 0 &&
         Wire::GetTagFieldNumber(tag) < v1::TensorInfo::kTensorDescriptorFieldNumber) {
    if (!Wire::SkipField(&in, tag)) return false;
  }
  if (tag == 0 || Wire::GetTagFieldNumber(tag) > v1::TensorInfo::kTensorDescriptorFieldNumber) {
    return true;  // No descriptor: the defaults.
  }
  if (Wire::GetTagWireType(tag) != Wire::WIRETYPE_LENGTH_DELIMITED) return false;
  std::uint32_t length = 0;
  if (!in.ReadVarint32(&length)) return false;
  in.PushLimit(static_cast<int>(length));
  while ((tag = in.ReadTag()) != 0 &&
         Wire::GetTagFieldNumber(tag) <= TensorDescriptor::kShapeFieldNumber) {
    bool read = false;
    if (tag == Wire::MakeTag(TensorDescriptor::kElementTypeFieldNumber, Wire::WIRETYPE_VARINT)) {
      int element_type = 0;
      read = Wire::ReadPrimitive<int, Wire::TYPE_ENUM>(&in, &element_type);
      summary.set_element_type(static_cast<v1::ElementType>(element_type));
    } else if (tag == Wire::MakeTag(TensorDescriptor::kShapeFieldNumber,
                                    Wire::WIRETYPE_LENGTH_DELIMITED)) {
      read =
          Wire::ReadPackedPrimitive<std::uint64_t, Wire::TYPE_UINT64>(&in, summary.mutable_shape());
    } else {
      read = Wire::SkipField(&in, tag);
    }
    if (!read) return false;
  }
  return true;
}

}  // namespace

// A published tensor version. Its buffers stay allocated while it lives.
//
// A compact record rather than a v1::TensorInfo, since the daemon holds one per published
// tensor: the TensorInfo that Acquire and Describe hand out is kept serialized once,
// without its name (the key of the version's names_ entry), and parsed into each reply
// after the mutex is released. A reply being built holds a shared_ptr to the version, so
// the immutable part stays valid even if the version is reclaimed meanwhile.
struct Registry::Version {
  // Set by Publish, then immutable: replies being built read these without the mutex.
  //
  // v1::TensorInfo with every field but `name` (field 1), serialized. A message serializes
  // its fields in field-number order, so the name's field followed by these bytes is the
  // whole TensorInfo; parsing them after set_name gives the message Publish built.
  std::string info_without_name;
  std::uint64_t number = 0;
  std::int64_t published_at_ns = 0;  // Also in info_without_name; Describe lists it.
  std::uint64_t byte_size = 0;       // Sum of the buffers' sizes.

  // Set by Publish, then immutable; read under mutex_ only.
  //
  // Every buffer's range, in table order (segment_id 0 for an empty buffer): what
  // GrantSegment checks and what returns to `pool` when the version is reclaimed.
  boost::container::small_vector<PoolRange, 1> buffers;
  Pool* pool = nullptr;
  const std::string* name = nullptr;  // The key of its names_ entry (dangles once reclaimed).

  // Guarded by mutex_.
  std::uint64_t lease_count = 0;
  bool superseded = false;  // A newer version of the name exists.
  bool deleted = false;     // Delete named it: no new acquires.
};

// A lease just taken: what its reply is built from, once the mutex is released.
struct Registry::Grant {
  std::uint64_t lease_id = 0;
  std::shared_ptr<const Version> version;
};

struct Registry::NamedGrant {
  std::string name;
  Grant grant;
};

struct Registry::NameEntry {
  // Live versions, oldest first (version numbers only grow). Almost always one: a
  // superseded version lives on only while leased.
  boost::container::small_vector<std::shared_ptr<Version>, 1> versions;
  std::uint64_t next_version = 1;

  // The latest version, when it may still be acquired.
  [[nodiscard]] Version* Latest() const {
    if (versions.empty()) return nullptr;
    Version* latest = versions.back().get();
    return latest->deleted || latest->superseded ? nullptr : latest;
  }
};

struct Registry::Allocation {
  std::uint64_t session_id = 0;
  Pool* pool = nullptr;
  v1::TensorDescriptor descriptor;
  std::vector<v1::BufferLocation> buffers;
  std::uint64_t byte_size = 0;
};

struct Registry::Lease {
  std::uint64_t session_id = 0;
  Version* version = nullptr;
};

struct Registry::Session {
  PeerCredentials peer;
  std::string client_name;
  std::string token;
  std::set<std::uint64_t> allocations;
  std::set<std::uint64_t> leases;
  std::set<std::uint64_t> waits;
  std::uint64_t pending_bytes = 0;
};

struct Registry::Waiter {
  std::uint64_t session_id = 0;
  std::vector<std::string> names;
  // Under the mutex: completes the wait (queuing `done` into Deferred) and returns true,
  // or returns false to keep waiting.
  std::function<bool(Deferred&)> try_complete;
  std::function<void(Error)> fail;
  std::unique_ptr<boost::asio::steady_timer> timer;
};

struct Registry::Watcher {
  std::string prefix;
  WatchCallback callback;
};

Registry::Registry(const PoolSet& pools, boost::asio::io_context& io, Options options)
    : pools_(pools), io_(io), options_(options), started_(std::chrono::steady_clock::now()) {}

Registry::~Registry() {
  std::lock_guard lock(mutex_);
  for (auto& [id, waiter] : waiters_) {
    if (waiter->timer) waiter->timer->cancel();
  }
}

// ---- Sessions ----

Result<SessionGrant> Registry::OpenSession(const PeerCredentials& peer,
                                           std::string_view client_name) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  std::string token = RandomToken();
  Session& session = sessions_[id];
  session.peer = peer;
  session.client_name = std::string(client_name.substr(0, kMaxSessionClientNameBytes));
  session.token = token;
  session_by_token_.emplace(token, id);
  spdlog::debug("session {} opened: pid {} uid {} \"{}\"", id, peer.pid, peer.uid,
                session.client_name);
  return SessionGrant{.session_id = id, .token = std::move(token)};
}

void Registry::CloseSession(std::uint64_t session_id) {
  Deferred deferred;
  {
    std::lock_guard lock(mutex_);
    auto found = sessions_.find(session_id);
    if (found == sessions_.end()) return;
    Session& session = found->second;
    const std::size_t lease_count = session.leases.size();
    const std::size_t allocation_count = session.allocations.size();
    for (std::uint64_t lease_id : std::vector(session.leases.begin(), session.leases.end())) {
      ReleaseLeaseLocked(lease_id);
    }
    for (std::uint64_t allocation_id :
         std::vector(session.allocations.begin(), session.allocations.end())) {
      FreeAllocationLocked(allocation_id);
    }
    for (std::uint64_t wait_id : std::vector(session.waits.begin(), session.waits.end())) {
      std::unique_ptr<Waiter> waiter = RemoveWaiterLocked(wait_id);
      if (waiter == nullptr) continue;
      deferred.push_back([fail = std::move(waiter->fail)] {
        fail(CancelledError("the session ended while waiting").error());
      });
    }
    session_by_token_.erase(session.token);
    sessions_.erase(found);
    spdlog::debug("session {} closed: {} leases released, {} allocations freed", session_id,
                  lease_count, allocation_count);
  }
  for (auto& action : deferred) action();
}

Result<SegmentAccess> Registry::GrantSegment(std::uint64_t session_id,
                                             std::uint64_t segment_id, bool writable) {
  Pool* pool = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto found = sessions_.find(session_id);
    if (found == sessions_.end()) return UnauthenticatedError("session " + Str(session_id) + " ended");
    const Session& session = found->second;
    bool in_allocation = false;
    for (std::uint64_t allocation_id : session.allocations) {
      const Allocation& allocation = allocations_.at(allocation_id);
      for (const auto& buffer : allocation.buffers) {
        if (buffer.segment_id() == segment_id) {
          in_allocation = true;
          pool = allocation.pool;
        }
      }
    }
    bool in_lease = false;
    for (std::uint64_t lease_id : session.leases) {
      const Version& version = *leases_.at(lease_id).version;
      for (const PoolRange& buffer : version.buffers) {
        if (buffer.segment_id == segment_id) {
          in_lease = true;
          pool = version.pool;
        }
      }
    }
    if (writable && !in_allocation) {
      return PermissionDeniedError("segment " + Str(segment_id) +
                              ": write access needs an unpublished allocation in it");
    }
    if (!in_allocation && !in_lease) {
      if (pools_.FindBySegment(segment_id) == nullptr) {
        return NotFoundError("segment " + Str(segment_id) + " does not exist");
      }
      return PermissionDeniedError("segment " + Str(segment_id) +
                              ": the session holds no lease or allocation in it");
    }
  }
  // Opening the descriptor is a system call: done outside the lock.
  return pool->OpenSegment(segment_id, writable);
}

Result<std::uint64_t> Registry::Authenticate(std::string_view token) const {
  std::lock_guard lock(mutex_);
  auto found = session_by_token_.find(std::string(token));
  if (found == session_by_token_.end()) {
    return UnauthenticatedError(token.empty()
                               ? "no session token: send x-hurray-session metadata"
                               : "unknown session token");
  }
  return found->second;
}

// ---- Allocate / publish ----

Result<v1::AllocateResponse> Registry::Allocate(std::uint64_t session_id,
                                                const v1::AllocateRequest& request) {
  auto descriptor = DescriptorFromProto(request.tensor_descriptor());
  if (!descriptor) return std::unexpected(descriptor.error().WithContext("tensor_descriptor"));
  const std::string_view pool_name = request.pool().empty() ? kDefaultPool : request.pool();
  Pool* pool = pools_.Find(pool_name);
  if (pool == nullptr) {
    return NotFoundError("pool \"" + std::string(pool_name.substr(0, 64)) + "\" does not exist");
  }
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < descriptor->buffers().size(); ++i) {
    const BufferHandle& buffer = descriptor->buffers()[i];
    if (buffer.device_tag() != pool->device_tag()) {
      return FailedPreconditionError(
          "tensor_descriptor.buffers[" + Str(i) + "].device_tag " +
          std::string(buffer.device_tag().Name()) + " does not match pool " +
          std::string(pool->name()) + " (" + std::string(pool->device_tag().Name()) + ")");
    }
    if (buffer.memory_class() != MemoryClass::Standard()) {
      return FailedPreconditionError("tensor_descriptor.buffers[" + Str(i) + "].memory_class " +
                                     std::string(buffer.memory_class().Name()) + ": pool " +
                                     std::string(pool->name()) + " holds standard memory");
    }
    if (buffer.alignment() > pool->page_size()) {
      return InvalidArgumentError("tensor_descriptor.buffers[" + Str(i) + "].alignment " +
                                  Str(buffer.alignment()) + " is above pool " +
                                  std::string(pool->name()) + "'s page size " +
                                  Str(pool->page_size()));
    }
    if (__builtin_add_overflow(total, buffer.byte_size(), &total)) {
      return ResourceExhaustedError("tensor_descriptor: the buffers' sizes add up to more "
                                    "than 2^64 bytes");
    }
  }

  // Copied before the lock is taken: nothing else needs the mutex to wait for it.
  Allocation allocation{.session_id = session_id,
                        .pool = pool,
                        .descriptor = request.tensor_descriptor(),
                        .buffers = {},
                        .byte_size = total};
  allocation.buffers.reserve(descriptor->buffers().size());

  std::unique_lock lock(mutex_);
  auto session = sessions_.find(session_id);
  if (session == sessions_.end()) return UnauthenticatedError("session " + Str(session_id) + " ended");
  if (options_.session_quota_bytes != 0 &&
      (total > options_.session_quota_bytes ||
       session->second.pending_bytes > options_.session_quota_bytes - total)) {
    return ResourceExhaustedError("session quota: " + Str(total) + " more bytes would exceed " +
                                  Str(options_.session_quota_bytes) + " (" +
                                  Str(session->second.pending_bytes) + " pending)");
  }
  for (const BufferHandle& buffer : descriptor->buffers()) {
    v1::BufferLocation location;
    location.set_byte_size(buffer.byte_size());
    if (buffer.byte_size() != 0) {
      auto range = pool->Allocate(buffer.byte_size());
      if (!range) {
        for (const auto& done : allocation.buffers) {
          if (done.segment_id() != 0) {
            pool->Free(PoolRange{done.segment_id(), done.offset(), done.byte_size()});
          }
        }
        return std::unexpected(range.error());
      }
      location.set_segment_id(range->segment_id);
      location.set_segment_size(pool->SegmentSize(range->segment_id).value_or(0));
      location.set_offset(range->offset);
    }
    allocation.buffers.push_back(std::move(location));
  }
  const std::uint64_t id = next_id_++;
  v1::AllocateResponse response;
  response.set_allocation_id(id);
  for (const auto& location : allocation.buffers) *response.add_buffers() = location;
  response.set_daemon_epoch(options_.daemon_epoch);
  session->second.allocations.insert(id);
  session->second.pending_bytes += total;
  allocations_.emplace(id, std::move(allocation));
  return response;
}

Result<v1::CancelAllocationResponse> Registry::CancelAllocation(
    std::uint64_t session_id, const v1::CancelAllocationRequest& request) {
  std::lock_guard lock(mutex_);
  auto found = allocations_.find(request.allocation_id());
  if (found == allocations_.end() || found->second.session_id != session_id) {
    return NotFoundError("allocation_id " + Str(request.allocation_id()) +
                         " is not a pending allocation of this session");
  }
  FreeAllocationLocked(request.allocation_id());
  v1::CancelAllocationResponse response;
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

void Registry::FreeAllocationLocked(std::uint64_t allocation_id) {
  auto found = allocations_.find(allocation_id);
  if (found == allocations_.end()) return;
  Allocation& allocation = found->second;
  for (const auto& buffer : allocation.buffers) {
    if (buffer.segment_id() != 0) {
      allocation.pool->Free(PoolRange{buffer.segment_id(), buffer.offset(), buffer.byte_size()});
    }
  }
  auto session = sessions_.find(allocation.session_id);
  if (session != sessions_.end()) {
    session->second.allocations.erase(allocation_id);
    session->second.pending_bytes -= allocation.byte_size;
  }
  allocations_.erase(found);
}

Result<v1::PublishResponse> Registry::Publish(std::uint64_t session_id,
                                              const v1::PublishRequest& request) {
  if (auto valid = ValidateTensorName(request.name()); !valid) {
    return std::unexpected(valid.error());
  }
  std::unique_lock lock(mutex_);
  auto found = allocations_.find(request.allocation_id());
  if (found == allocations_.end() || found->second.session_id != session_id) {
    return NotFoundError("allocation_id " + Str(request.allocation_id()) +
                         " is not a pending allocation of this session");
  }
  Allocation& allocation = found->second;
  if (auto valid = ValidateHandoff(request.handoff(), allocation.descriptor); !valid) {
    return std::unexpected(valid.error());
  }
  auto named = names_.try_emplace(request.name()).first;
  NameEntry& entry = named->second;
  auto version = std::make_shared<Version>();
  const std::uint64_t number = entry.next_version++;
  version->number = number;
  version->published_at_ns = NowNanoseconds();
  version->byte_size = allocation.byte_size;
  version->pool = allocation.pool;
  version->name = &named->first;
  for (const auto& location : allocation.buffers) {
    version->buffers.push_back(
        PoolRange{location.segment_id(), location.offset(), location.byte_size()});
  }
  {
    v1::TensorInfo info;  // Without the name: see Version::info_without_name.
    info.set_version(number);
    *info.mutable_tensor_descriptor() = std::move(allocation.descriptor);
    for (auto& location : allocation.buffers) *info.add_buffers() = std::move(location);
    *info.mutable_handoff() = request.handoff();
    info.set_pool(std::string(allocation.pool->name()));
    info.set_published_at_ns(version->published_at_ns);
    info.SerializeToString(&version->info_without_name);
  }

  // The allocation becomes the version: its memory now belongs to the daemon.
  auto session = sessions_.find(session_id);
  session->second.allocations.erase(request.allocation_id());
  session->second.pending_bytes -= allocation.byte_size;
  allocations_.erase(found);

  // The previous latest is superseded: it lives on only while leased.
  std::vector<Version*> superseded;
  for (const auto& old : entry.versions) {
    if (!old->superseded) {
      old->superseded = true;
      superseded.push_back(old.get());
    }
  }
  entry.versions.push_back(std::move(version));
  ++version_count_;
  for (Version* old : superseded) ReclaimIfUnusedLocked(old);

  Deferred deferred;
  WakeWaitersLocked(request.name(), deferred);

  v1::PublishResponse response;
  response.set_name(request.name());
  response.set_version(number);
  response.set_daemon_epoch(options_.daemon_epoch);

  v1::WatchEvent event;
  event.set_kind(v1::WatchEvent::KIND_PUBLISHED);
  event.set_name(request.name());
  event.set_version(number);
  event.set_daemon_epoch(options_.daemon_epoch);
  Notify(lock, {std::move(event)});
  for (auto& action : deferred) action();
  return response;
}

// ---- Acquire ----

std::shared_ptr<Registry::Version> Registry::FindVersionLocked(const std::string& name,
                                                               std::uint64_t number) const {
  auto entry = names_.find(name);
  if (entry == names_.end()) return nullptr;
  if (number == 0) {
    if (entry->second.Latest() == nullptr) return nullptr;
    return entry->second.versions.back();
  }
  for (const auto& version : entry->second.versions) {
    if (version->number == number) return version->deleted ? nullptr : version;
  }
  return nullptr;
}

Result<Registry::Grant> Registry::AcquireLocked(std::uint64_t session_id, const std::string& name,
                                                std::uint64_t version_number) {
  auto session = sessions_.find(session_id);
  if (session == sessions_.end()) return UnauthenticatedError("session " + Str(session_id) + " ended");
  std::shared_ptr<Version> version = FindVersionLocked(name, version_number);
  if (version == nullptr) {
    std::string shown = name.substr(0, 200);
    if (version_number != 0) return NotFoundError(shown + " version " + Str(version_number) +
                                                  " is not published");
    return NotFoundError(shown + " is not published");
  }
  const std::uint64_t lease_id = next_id_++;
  leases_.emplace(lease_id, Lease{.session_id = session_id, .version = version.get()});
  session->second.leases.insert(lease_id);
  ++version->lease_count;
  return Grant{.lease_id = lease_id, .version = std::move(version)};
}

void Registry::FillTensorInfo(const std::string& name, const Version& version,
                              v1::TensorInfo& info) {
  info.set_name(name);
  // Bytes this daemon serialized: parsing them cannot fail short of a bug.
  if (!info.MergeFromString(version.info_without_name)) {
    spdlog::error("{} version {}: the stored TensorInfo does not parse",
                  std::string_view(name).substr(0, 200), version.number);
  }
}

void Registry::FillAcquireResponse(const std::string& name, const Grant& grant,
                                   v1::AcquireResponse& response) const {
  response.set_lease_id(grant.lease_id);
  FillTensorInfo(name, *grant.version, *response.mutable_tensor());
  response.set_daemon_epoch(options_.daemon_epoch);
}

Result<v1::AcquireResponse> Registry::AcquireReply(const std::string& name,
                                                   Result<Grant> grant) const {
  if (!grant) return std::unexpected(std::move(grant.error()));
  v1::AcquireResponse response;
  FillAcquireResponse(name, *grant, response);
  return response;
}

std::uint64_t Registry::Acquire(std::uint64_t session_id, const v1::AcquireRequest& request,
                                AcquireDone done) {
  if (request.wait_timeout_ms() > options_.max_wait_ms) {
    done(InvalidArgumentError("wait_timeout_ms " + Str(request.wait_timeout_ms()) +
                              " is above the limit " + Str(options_.max_wait_ms)));
    return 0;
  }
  if (auto valid = ValidateTensorName(request.name()); !valid) {
    done(std::unexpected(valid.error()));
    return 0;
  }
  std::unique_lock lock(mutex_);
  auto grant = AcquireLocked(session_id, request.name(), request.version());
  if (grant || grant.error().code() != StatusCode::kNotFound || request.wait_timeout_ms() == 0) {
    lock.unlock();
    done(AcquireReply(request.name(), std::move(grant)));
    return 0;
  }
  auto shared_done = std::make_shared<AcquireDone>(std::move(done));
  auto try_complete = [this, session_id, name = request.name(), version = request.version(),
                       shared_done](Deferred& deferred) {
    auto retry = AcquireLocked(session_id, name, version);
    if (!retry && retry.error().code() == StatusCode::kNotFound) return false;
    deferred.push_back([this, shared_done, name, retry = std::move(retry)]() mutable {
      (*shared_done)(AcquireReply(name, std::move(retry)));
    });
    return true;
  };
  auto fail = [shared_done](Error error) { (*shared_done)(std::unexpected(std::move(error))); };
  return StartWaitLocked(session_id, {request.name()}, request.wait_timeout_ms(),
                         std::move(try_complete), std::move(fail));
}

Result<v1::AcquireResponse> Registry::AcquireNow(std::uint64_t session_id,
                                                 const v1::AcquireRequest& request) {
  if (request.wait_timeout_ms() != 0) {
    return InvalidArgumentError("wait_timeout_ms " + Str(request.wait_timeout_ms()) +
                                ": an acquire that waits goes through gRPC");
  }
  std::optional<Result<v1::AcquireResponse>> result;
  Acquire(session_id, request,
          [&result](Result<v1::AcquireResponse> done) { result = std::move(done); });
  return std::move(*result);  // Without a wait, Acquire completes before it returns.
}

Result<std::vector<Registry::NamedGrant>> Registry::BatchAcquireLocked(
    std::uint64_t session_id, const v1::BatchAcquireRequest& request) {
  // First find every version, then take the leases: all or none.
  std::vector<std::string> wanted(request.names().begin(), request.names().end());
  std::set<std::string, std::less<>> listed(wanted.begin(), wanted.end());
  if (!request.prefix().empty()) {
    for (auto it = names_.lower_bound(request.prefix());
         it != names_.end() && HasPrefix(it->first, request.prefix()); ++it) {
      if (it->second.Latest() != nullptr && !listed.contains(it->first)) {
        wanted.push_back(it->first);
        listed.insert(it->first);
      }
    }
  }
  for (const std::string& name : wanted) {
    if (FindVersionLocked(name, 0) == nullptr) {
      return NotFoundError(name.substr(0, 200) + " is not published");
    }
  }
  std::vector<NamedGrant> grants;
  grants.reserve(wanted.size());
  std::set<std::string, std::less<>> done;
  for (std::string& name : wanted) {
    if (!done.insert(name).second) continue;  // Listed twice: one lease.
    auto acquired = AcquireLocked(session_id, name, 0);
    if (!acquired) {
      for (const auto& taken : grants) ReleaseLeaseLocked(taken.grant.lease_id);
      return std::unexpected(acquired.error());
    }
    grants.push_back(NamedGrant{.name = std::move(name), .grant = std::move(*acquired)});
  }
  return grants;
}

Result<v1::BatchAcquireResponse> Registry::BatchAcquireReply(
    Result<std::vector<NamedGrant>> grants) const {
  if (!grants) return std::unexpected(std::move(grants.error()));
  v1::BatchAcquireResponse response;
  response.mutable_tensors()->Reserve(static_cast<int>(grants->size()));
  for (const NamedGrant& named : *grants) {
    FillAcquireResponse(named.name, named.grant, *response.add_tensors());
  }
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

std::uint64_t Registry::BatchAcquire(std::uint64_t session_id,
                                     const v1::BatchAcquireRequest& request,
                                     BatchAcquireDone done) {
  if (request.wait_timeout_ms() > options_.max_wait_ms) {
    done(InvalidArgumentError("wait_timeout_ms " + Str(request.wait_timeout_ms()) +
                              " is above the limit " + Str(options_.max_wait_ms)));
    return 0;
  }
  if (static_cast<std::size_t>(request.names_size()) > options_.max_batch_names) {
    done(InvalidArgumentError("names has " + Str(request.names_size()) +
                              " entries, above the limit " + Str(options_.max_batch_names)));
    return 0;
  }
  if (request.names_size() == 0 && request.prefix().empty()) {
    done(InvalidArgumentError("names and prefix are both empty: nothing to acquire"));
    return 0;
  }
  for (int i = 0; i < request.names_size(); ++i) {
    if (auto valid = ValidateTensorName(request.names(i), "names[" + Str(i) + "]"); !valid) {
      done(std::unexpected(valid.error()));
      return 0;
    }
  }
  std::unique_lock lock(mutex_);
  auto grants = BatchAcquireLocked(session_id, request);
  if (grants || grants.error().code() != StatusCode::kNotFound || request.wait_timeout_ms() == 0) {
    lock.unlock();
    done(BatchAcquireReply(std::move(grants)));
    return 0;
  }
  auto shared_done = std::make_shared<BatchAcquireDone>(std::move(done));
  auto try_complete = [this, session_id, request, shared_done](Deferred& deferred) {
    auto retry = BatchAcquireLocked(session_id, request);
    if (!retry && retry.error().code() == StatusCode::kNotFound) return false;
    deferred.push_back([this, shared_done, retry = std::move(retry)]() mutable {
      (*shared_done)(BatchAcquireReply(std::move(retry)));
    });
    return true;
  };
  auto fail = [shared_done](Error error) { (*shared_done)(std::unexpected(std::move(error))); };
  return StartWaitLocked(session_id, {request.names().begin(), request.names().end()},
                         request.wait_timeout_ms(), std::move(try_complete), std::move(fail));
}

std::uint64_t Registry::StartWaitLocked(std::uint64_t session_id, std::vector<std::string> names,
                                        std::uint32_t timeout_ms,
                                        std::function<bool(Deferred&)> try_complete,
                                        std::function<void(Error)> fail) {
  const std::uint64_t id = next_id_++;
  auto waiter = std::make_unique<Waiter>();
  waiter->session_id = session_id;
  waiter->names = std::move(names);
  waiter->try_complete = std::move(try_complete);
  waiter->fail = std::move(fail);
  waiter->timer = std::make_unique<boost::asio::steady_timer>(
      io_, std::chrono::milliseconds(timeout_ms));
  waiter->timer->async_wait([this, id](const boost::system::error_code& error) {
    if (!error) OnWaitTimeout(id);
  });
  for (const std::string& name : waiter->names) waiters_by_name_.emplace(name, id);
  sessions_.at(session_id).waits.insert(id);
  waiters_.emplace(id, std::move(waiter));
  return id;
}

void Registry::WakeWaitersLocked(const std::string& name, Deferred& deferred) {
  std::vector<std::uint64_t> candidates;
  auto [begin, end] = waiters_by_name_.equal_range(name);
  for (auto it = begin; it != end; ++it) candidates.push_back(it->second);
  for (std::uint64_t id : candidates) {
    auto found = waiters_.find(id);
    if (found == waiters_.end() || !found->second->try_complete(deferred)) continue;
    RemoveWaiterLocked(id);
  }
}

std::unique_ptr<Registry::Waiter> Registry::RemoveWaiterLocked(std::uint64_t wait_id) {
  auto found = waiters_.find(wait_id);
  if (found == waiters_.end()) return nullptr;
  std::unique_ptr<Waiter> waiter = std::move(found->second);
  waiters_.erase(found);
  for (const std::string& name : waiter->names) {
    auto [begin, end] = waiters_by_name_.equal_range(name);
    for (auto it = begin; it != end; ++it) {
      if (it->second == wait_id) {
        waiters_by_name_.erase(it);
        break;
      }
    }
  }
  auto session = sessions_.find(waiter->session_id);
  if (session != sessions_.end()) session->second.waits.erase(wait_id);
  waiter->timer->cancel();
  return waiter;
}

bool Registry::CancelWait(std::uint64_t wait_id) {
  std::lock_guard lock(mutex_);
  return RemoveWaiterLocked(wait_id) != nullptr;
}

void Registry::OnWaitTimeout(std::uint64_t wait_id) {
  std::function<void(Error)> fail;
  std::string names;
  {
    std::lock_guard lock(mutex_);
    auto found = waiters_.find(wait_id);
    if (found == waiters_.end()) return;
    fail = found->second->fail;
    for (const std::string& name : found->second->names) {
      if (!names.empty()) names += ", ";
      names += name.substr(0, 200);
    }
  }
  // CancelWait removes the waiter; only the caller that removes it reports the outcome.
  if (!CancelWait(wait_id)) return;
  fail(Error(StatusCode::kDeadlineExceeded, "not published before the wait timed out: " +
                                                (names.empty() ? "prefix" : names)));
}

// ---- Release / delete ----

void Registry::ReleaseLeaseLocked(std::uint64_t lease_id) {
  auto found = leases_.find(lease_id);
  if (found == leases_.end()) return;
  Version* version = found->second.version;
  auto session = sessions_.find(found->second.session_id);
  if (session != sessions_.end()) session->second.leases.erase(lease_id);
  leases_.erase(found);
  --version->lease_count;
  ReclaimIfUnusedLocked(version);
}

void Registry::ReclaimIfUnusedLocked(Version* version) {
  if (version->lease_count != 0 || !(version->superseded || version->deleted)) return;
  for (const PoolRange& buffer : version->buffers) {
    if (buffer.segment_id != 0) version->pool->Free(buffer);
  }
  auto entry = names_.find(*version->name);
  auto& versions = entry->second.versions;
  // Drops the entry's reference: *version is destroyed now, or by the last reply being
  // built from it.
  versions.erase(std::find_if(versions.begin(), versions.end(),
                              [version](const auto& live) { return live.get() == version; }));
  --version_count_;
  if (versions.empty()) names_.erase(entry);
}

Result<v1::ReleaseResponse> Registry::Release(std::uint64_t session_id,
                                              const v1::ReleaseRequest& request) {
  std::lock_guard lock(mutex_);
  for (std::uint64_t lease_id : request.lease_ids()) {
    auto found = leases_.find(lease_id);
    if (found == leases_.end() || found->second.session_id != session_id) {
      return NotFoundError("lease_id " + Str(lease_id) + " is not a lease of this session");
    }
    ReleaseLeaseLocked(lease_id);
  }
  v1::ReleaseResponse response;
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

Result<v1::DeleteResponse> Registry::Delete(const v1::DeleteRequest& request) {
  if (auto valid = ValidateTensorName(request.name()); !valid) {
    return std::unexpected(valid.error());
  }
  std::unique_lock lock(mutex_);
  auto entry = names_.find(request.name());
  std::vector<Version*> deleted;
  if (entry != names_.end()) {
    for (const auto& version : entry->second.versions) {
      if (!version->deleted && (request.version() == 0 || request.version() == version->number)) {
        version->deleted = true;
        deleted.push_back(version.get());
      }
    }
  }
  if (deleted.empty()) {
    return NotFoundError(request.name().substr(0, 200) +
                         (request.version() == 0 ? std::string(" has no versions")
                                                 : " has no version " + Str(request.version())));
  }
  std::vector<v1::WatchEvent> events;
  for (Version* version : deleted) {
    v1::WatchEvent event;
    event.set_kind(v1::WatchEvent::KIND_DELETED);
    event.set_name(request.name());
    event.set_version(version->number);
    event.set_daemon_epoch(options_.daemon_epoch);
    events.push_back(std::move(event));
  }
  for (Version* version : deleted) ReclaimIfUnusedLocked(version);  // May erase the entry.
  v1::DeleteResponse response;
  response.set_versions_deleted(static_cast<std::uint32_t>(deleted.size()));
  response.set_daemon_epoch(options_.daemon_epoch);
  Notify(lock, std::move(events));
  return response;
}

// ---- Inspection ----

Result<v1::ListResponse> Registry::List(const v1::ListRequest& request) const {
  std::uint32_t page_size = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  page_size = std::min(page_size, kMaxPageSize);
  v1::ListResponse response;
  std::lock_guard lock(mutex_);
  auto it = request.page_token().empty() ? names_.lower_bound(request.prefix())
                                         : names_.upper_bound(request.page_token());
  for (; it != names_.end() && HasPrefix(it->first, request.prefix()); ++it) {
    const Version* latest = it->second.Latest();
    if (latest == nullptr) continue;
    if (static_cast<std::uint32_t>(response.tensors_size()) == page_size) {
      response.set_next_page_token(response.tensors(response.tensors_size() - 1).name());
      break;
    }
    v1::TensorSummary& summary = *response.add_tensors();
    summary.set_name(it->first);
    summary.set_latest_version(latest->number);
    summary.set_version_count(static_cast<std::uint32_t>(it->second.versions.size()));
    // Bytes this daemon serialized: they decode short of a bug.
    if (!ReadElementTypeAndShape(latest->info_without_name, summary)) {
      spdlog::error("{} version {}: the stored TensorInfo does not decode",
                    it->first.substr(0, 200), latest->number);
    }
    summary.set_byte_size(latest->byte_size);
    std::uint64_t leases = 0;
    for (const auto& version : it->second.versions) leases += version->lease_count;
    summary.set_lease_count(leases);
    summary.set_published_at_ns(latest->published_at_ns);
  }
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

Result<v1::DescribeResponse> Registry::Describe(const v1::DescribeRequest& request) const {
  if (auto valid = ValidateTensorName(request.name()); !valid) {
    return std::unexpected(valid.error());
  }
  v1::DescribeResponse response;
  std::shared_ptr<const Version> version;
  {
    std::lock_guard lock(mutex_);
    version = FindVersionLocked(request.name(), request.version());
    if (version == nullptr) {
      return NotFoundError(request.name().substr(0, 200) +
                           (request.version() == 0 ? std::string(" is not published")
                                                   : " version " + Str(request.version()) +
                                                         " is not published"));
    }
    for (const auto& live : names_.find(request.name())->second.versions) {
      v1::VersionInfo& info = *response.add_versions();
      info.set_version(live->number);
      info.set_lease_count(live->lease_count);
      info.set_superseded(live->superseded || live->deleted);
      info.set_byte_size(live->byte_size);
      info.set_published_at_ns(live->published_at_ns);
    }
  }
  FillTensorInfo(request.name(), *version, *response.mutable_tensor());
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

v1::StatsResponse Registry::Stats() const {
  v1::StatsResponse response;
  for (const auto& [name, pool] : pools_.pools()) {
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
  }
  std::lock_guard lock(mutex_);
  response.set_session_count(static_cast<std::uint32_t>(sessions_.size()));
  response.set_lease_count(leases_.size());
  std::uint64_t tensors = 0;
  for (const auto& [name, entry] : names_) tensors += entry.Latest() != nullptr ? 1 : 0;
  response.set_tensor_count(tensors);
  response.set_version_count(version_count_);
  response.set_pending_allocation_count(allocations_.size());
  response.set_daemon_epoch(options_.daemon_epoch);
  response.set_uptime_seconds(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                       started_)
          .count()));
  return response;
}

// ---- Watch ----

std::uint64_t Registry::Watch(std::string prefix, WatchCallback callback) {
  std::lock_guard lock(watch_mutex_);
  const std::uint64_t id = next_watch_id_++;
  watchers_.emplace(id, std::make_shared<Watcher>(
                            Watcher{.prefix = std::move(prefix), .callback = std::move(callback)}));
  return id;
}

void Registry::Unwatch(std::uint64_t watch_id) {
  std::lock_guard lock(watch_mutex_);
  watchers_.erase(watch_id);
}

void Registry::Notify(std::unique_lock<std::mutex>& lock, std::vector<v1::WatchEvent> events) {
  // Taking watch_mutex_ before releasing mutex_ keeps events in registry order.
  std::lock_guard watch_lock(watch_mutex_);
  lock.unlock();
  for (const auto& event : events) {
    for (const auto& [id, watcher] : watchers_) {
      if (HasPrefix(event.name(), watcher->prefix)) watcher->callback(event);
    }
  }
}

}  // namespace hurray::daemon
