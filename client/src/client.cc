#include "hurray/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "client_internal.h"
#include "connection.h"
#include "decoded_tensor.h"
#include "device/stream_ordered.h"
#include "fast_path.h"
#include "hurray/descriptor_codec.h"
#include "hurray/ipc/fence_word.h"
#include "hurray/ipc/socket_path.h"
#include "hurray/pool_name.h"
#include "hurray/tensor_name.h"
#include "inspection_calls.h"
#include "inspection_codec.h"
#include "mapped_buffers.h"
#include "tensor_cache.h"

namespace hurray {

using client_internal::Connection;
using client_internal::DecodedTensor;
using client_internal::FastPath;
using client_internal::FastPathPin;
using client_internal::FromGrpcStatus;
using client_internal::MapBuffers;
using client_internal::MappedBuffer;
using client_internal::PopulateTensor;
using client_internal::ReleaseLease;
using client_internal::ReleaseLeases;
using client_internal::TensorCache;
using client_internal::TensorViewAccess;
using client_internal::UnmapSealedBuffers;

namespace {

// A wait as the protocol's wait_timeout_ms; INVALID_ARGUMENT when negative or too long.
Result<std::uint32_t> WaitMilliseconds(std::chrono::milliseconds wait) {
  if (wait.count() < 0 || wait.count() > std::numeric_limits<std::uint32_t>::max()) {
    return InvalidArgumentError(
        fmt::format("wait of {} ms is outside 0 to 4294967295 ms", wait.count()));
  }
  return static_cast<std::uint32_t>(wait.count());
}

}  // namespace

// ---- WritableTensor ----

struct WritableTensor::State {
  std::shared_ptr<Connection> connection;
  TensorDescriptor descriptor;
  std::uint64_t allocation_id = 0;
  // The daemon epoch the allocation was made in.
  std::uint64_t daemon_epoch = 0;
  std::vector<MappedBuffer> buffers;
  DeviceInfo device;
  bool sealed = false;  // Set at allocation: Publish unmaps the buffers.
  // The allocation's fence, when its buffers declare SyncMode::kEvent in a CUDA pool.
  std::optional<v1::Fence> fence;
  // The pool as Client::Allocate was given it (empty: the default), for PublishAndAllocate.
  std::string pool;

  // The tensor of an allocation the daemon made for this process (`response`, in `pool`),
  // its buffers mapped read-write; MapBuffers' errors, after which the allocation is
  // cancelled.
  HURRAY_CXX_HIDDEN static Result<WritableTensor> Take(
      const std::shared_ptr<Connection>& connection, const TensorDescriptor& descriptor,
      std::string_view pool, const v1::AllocateResponse& response);
  // Client::Allocate through `connection`.
  HURRAY_CXX_HIDDEN static Result<WritableTensor> Allocate(
      const std::shared_ptr<Connection>& connection, const TensorDescriptor& descriptor,
      std::string_view pool);
  // The tensor a publish of this one allocated after it (PublishAndAllocate), or the
  // daemon's refusal; asked for now when the daemon made none (an older release).
  [[nodiscard]] HURRAY_CXX_HIDDEN Result<WritableTensor> NextAfter(
      const v1::NextAllocation& next) const;
};

Result<WritableTensor> WritableTensor::State::Allocate(
    const std::shared_ptr<Connection>& connection, const TensorDescriptor& descriptor,
    std::string_view pool) {
  v1::AllocateRequest request;
  *request.mutable_tensor_descriptor() = DescriptorToProto(descriptor);
  request.set_pool(std::string(pool));
  HURRAY_ASSIGN_OR_RETURN(const v1::AllocateResponse response, connection->Allocate(request));
  return Take(connection, descriptor, pool, response);
}

Result<WritableTensor> WritableTensor::State::NextAfter(const v1::NextAllocation& next) const {
  switch (next.result_case()) {
    case v1::NextAllocation::kAllocation:
      return Take(connection, descriptor, pool, next.allocation());
    case v1::NextAllocation::kError:
      return std::unexpected(client::DaemonError(next.error().code(), next.error().message()));
    case v1::NextAllocation::RESULT_NOT_SET:
      break;
  }
  return Allocate(connection, descriptor, pool);
}

Result<WritableTensor> WritableTensor::State::Take(const std::shared_ptr<Connection>& connection,
                                                   const TensorDescriptor& descriptor,
                                                   std::string_view pool,
                                                   const v1::AllocateResponse& response) {
  auto state = std::make_unique<State>(
      State{.connection = connection,
            .descriptor = descriptor,
            .allocation_id = response.allocation_id(),
            .daemon_epoch = response.daemon_epoch(),
            .buffers = {},
            .device = {},
            .fence = response.has_fence() ? std::optional(response.fence()) : std::nullopt,
            .pool = std::string(pool)});
  auto mapped = MapBuffers(*connection, response.buffers(), descriptor, /*writable=*/true,
                           pool.empty() ? kDefaultPoolName : pool, response.daemon_epoch());
  if (!mapped) {
    WritableTensor abandoned(std::move(state));  // Cancels the allocation.
    return std::unexpected(mapped.error());
  }
  state->buffers = std::move(mapped->buffers);
  state->device = std::move(mapped->device);
  state->sealed = std::ranges::any_of(state->buffers, [](const MappedBuffer& buffer) {
    return buffer.mapping && buffer.mapping->sealed();
  });
  return WritableTensor(std::move(state));
}

WritableTensor::WritableTensor(std::unique_ptr<State> state) : state_(std::move(state)) {}
WritableTensor::WritableTensor(WritableTensor&&) noexcept = default;
WritableTensor& WritableTensor::operator=(WritableTensor&& other) noexcept {
  if (this != &other) {
    if (state_) (void)Cancel();
    state_ = std::move(other.state_);
  }
  return *this;
}
WritableTensor::~WritableTensor() {
  if (state_) (void)Cancel();
}

const TensorDescriptor& WritableTensor::descriptor() const { return state_->descriptor; }
std::size_t WritableTensor::buffer_count() const { return state_->buffers.size(); }
std::span<std::byte> WritableTensor::buffer(std::size_t index) const {
  const MappedBuffer& buffer = state_->buffers.at(index);
  if (buffer.slab) return {};
  return {buffer.data, buffer.size};
}
void* WritableTensor::data(std::size_t index) const { return state_->buffers.at(index).data; }
const DeviceInfo& WritableTensor::device() const { return state_->device; }
std::uint64_t WritableTensor::allocation_id() const { return state_->allocation_id; }
bool WritableTensor::sealed() const { return state_->sealed; }

Result<PublishedTensor> WritableTensor::Publish(std::string_view name,
                                                const PublishOptions& options) {
  return PublishWith(name, SyncMode::kProducerSynced, options);
}

Result<PublishedTensor> WritableTensor::PublishAfter(std::string_view name, CudaStream stream,
                                                     const PublishOptions& options) {
  if (!state_) return FailedPreconditionError("PublishAfter: the tensor was already published");
  const std::optional<v1::Fence>& fence_location = state_->fence;
  if (!fence_location) {
    return FailedPreconditionError(fmt::format(
        "PublishAfter: allocation {} has no fence: Event handoffs need a CUDA pool and buffers "
        "that all declare sync mode event",
        state_->allocation_id));
  }
  Connection& connection = *state_->connection;
  HURRAY_ASSIGN_OR_RETURN(
      const client_internal::DeviceAddress fence,
      connection.FenceDeviceAddress(*fence_location, /*writable=*/true,
                                    state_->device.device_ordinal, state_->daemon_epoch));
  HURRAY_ASSIGN_OR_RETURN(client_internal::DeviceSlabCache * slabs,
                          connection.DeviceSlabs(state_->daemon_epoch));
  HURRAY_RETURN_IF_ERROR(slabs->mapper().WriteValue(stream, state_->device.device_ordinal, fence,
                                                    fence_location->value()));
  const v1::Fence own_fence = *fence_location;
  const std::uint64_t epoch = state_->daemon_epoch;
  const int device_ordinal = state_->device.device_ordinal;
  std::shared_ptr<Connection> publisher = state_->connection;
  std::unique_ptr<State> kept;
  HURRAY_ASSIGN_OR_RETURN(PublishedTensor published,
                          PublishWith(name, SyncMode::kEvent, options, &kept));
  publisher->RememberOwnFence(own_fence, epoch);
  // The buffers' slab references go once the stream has passed the signal (so that no
  // unmap can come before the kernels that fill them are done); at once (with `kept`, here)
  // where that point cannot be enqueued.
  (void)client_internal::EndAfterStream(slabs->mapper(), kept, stream, device_ordinal,
                                        [](std::unique_ptr<State> /*dropped*/) {});
  return published;
}

Result<PublishedAndNext> WritableTensor::PublishAndAllocate(std::string_view name,
                                                            const PublishOptions& options) {
  Result<WritableTensor> next = std::unexpected(Error(StatusCode::kInternal, "not allocated"));
  HURRAY_ASSIGN_OR_RETURN(PublishedTensor published, PublishWith(name, SyncMode::kProducerSynced,
                                                                 options, /*kept=*/nullptr, &next));
  return PublishedAndNext{.published = std::move(published), .next = std::move(next)};
}

Result<PublishedTensor> WritableTensor::PublishWith(std::string_view name, SyncMode sync_mode,
                                                    const PublishOptions& options,
                                                    std::unique_ptr<State>* kept,
                                                    Result<WritableTensor>* next) {
  if (!state_) return FailedPreconditionError("Publish: the tensor was already published");
  v1::PublishRequest request;
  request.set_allocation_id(state_->allocation_id);
  request.set_name(std::string(name));
  request.set_evictable(options.evictable);
  request.set_allocate_next(next != nullptr);
  if (sync_mode != SyncMode::kProducerSynced) {
    request.mutable_handoff()->set_sync_mode(SyncModeToByte(sync_mode));
  }
  UnmapSealedBuffers(state_->buffers);
  auto response = state_->connection->Publish(request, state_->daemon_epoch);
  if (!response) return std::unexpected(response.error());
  if (next != nullptr) *next = state_->NextAfter(response->next());
  if (kept != nullptr) {
    *kept = std::move(state_);
  } else {
    state_.reset();
  }
  return PublishedTensor{.name = response->name(), .version = response->version()};
}

Status WritableTensor::Cancel() {
  if (!state_) return {};
  v1::CancelAllocationRequest request;
  request.set_allocation_id(state_->allocation_id);
  auto cancelled = state_->connection->CancelAllocation(request, state_->daemon_epoch);
  state_.reset();
  if (!cancelled) return std::unexpected(cancelled.error());
  return {};
}

Status WritableTensor::CancelAfter(CudaStream stream) {
  if (!state_) return {};
  if (state_->device.device_tag != DeviceTag::Cuda()) return Cancel();
  // The process's own mapper: one of no epoch in particular.
  HURRAY_ASSIGN_OR_RETURN(client_internal::FenceRelay * relay,
                          client_internal::FenceRelay::ForProcess());
  return client_internal::EndAfterStream(relay->mapper(), state_, stream,
                                         state_->device.device_ordinal,
                                         [](std::unique_ptr<State> cancelled) {
                                           (void)WritableTensor(std::move(cancelled)).Cancel();
                                         });
}

// ---- Client ----

Client::Client(std::shared_ptr<Connection> connection, bool fast_path)
    : connection_(std::move(connection)),
      cache_(std::make_unique<TensorCache>()),
      fast_path_(fast_path ? std::make_unique<FastPath>(*connection_) : nullptr) {}
Client::~Client() {
  // Before what the client holds goes: tensors it published with PublishAfter keep the
  // connection until their streams pass the signal, which may be after this process exits.
  connection_->WaitForOwnFences();
}

std::string DefaultSocketPath() { return DefaultClientSocketPath(); }

Result<std::unique_ptr<Client>> Client::Connect() { return Connect(Options{}); }

Result<std::unique_ptr<Client>> Client::Connect(Options options) {
  if (options.own_fence_wait.count() < 0) {
    return InvalidArgumentError(fmt::format("Options::own_fence_wait of {} ms is negative",
                                            options.own_fence_wait.count()));
  }
  if (options.orphaned_fence_wait.count() < 0) {
    return InvalidArgumentError(fmt::format("Options::orphaned_fence_wait of {} ms is negative",
                                            options.orphaned_fence_wait.count()));
  }
  auto connection = Connection::Open(std::move(options.socket_path), options.client_name,
                                     options.hot_path == Options::HotPath::kSessionSocket,
                                     options.max_mapped_device_bytes, options.own_fence_wait,
                                     options.orphaned_fence_wait);
  if (!connection) return std::unexpected(connection.error());
  return std::unique_ptr<Client>(new Client(std::move(*connection), options.fast_path));
}

std::uint64_t Client::session_id() const { return connection_->session_id(); }
std::uint64_t Client::daemon_epoch() const { return connection_->daemon_epoch(); }
const std::string& Client::socket_path() const { return connection_->socket_path(); }

Result<WritableTensor> Client::Allocate(const TensorDescriptor& descriptor, std::string_view pool) {
  return WritableTensor::State::Allocate(connection_, descriptor, pool);
}

Result<std::vector<PublishedTensor>> Client::PublishBatch(std::span<WritableTensor> tensors,
                                                          std::span<const std::string> names) {
  if (tensors.size() != names.size()) {
    return InvalidArgumentError(
        fmt::format("PublishBatch: {} tensors but {} names", tensors.size(), names.size()));
  }
  if (tensors.empty() || tensors.size() > kMaxBatchPublish) {
    return InvalidArgumentError(fmt::format("PublishBatch: {} tensors; 1 to {} may be published",
                                            tensors.size(), kMaxBatchPublish));
  }
  v1::PublishBatchRequest request;
  request.mutable_items()->Reserve(static_cast<int>(tensors.size()));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const WritableTensor::State* state = tensors[i].state_.get();
    const std::string shown = ShownName(names[i]);
    if (state == nullptr) {
      return FailedPreconditionError(fmt::format(
          "PublishBatch: tensors[{}] ({}) is empty: already published or cancelled", i, shown));
    }
    if (state->connection != connection_) {
      return InvalidArgumentError(fmt::format(
          "PublishBatch: tensors[{}] ({}) was allocated through another client", i, shown));
    }
    if (state->daemon_epoch != tensors[0].state_->daemon_epoch) {
      return UnavailableError(fmt::format(
          "PublishBatch: tensors[{}] ({}) was allocated in daemon epoch {}, tensors[0] in {}: "
          "the daemon restarted in between, and the older allocations are gone",
          i, shown, state->daemon_epoch, tensors[0].state_->daemon_epoch));
    }
    v1::PublishRequest& item = *request.add_items();
    item.set_allocation_id(state->allocation_id);
    item.set_name(names[i]);
  }
  for (WritableTensor& tensor : tensors) UnmapSealedBuffers(tensor.state_->buffers);
  HURRAY_ASSIGN_OR_RETURN(v1::PublishBatchResponse response,
                          connection_->PublishBatch(request, tensors[0].state_->daemon_epoch));
  if (static_cast<std::size_t>(response.items_size()) != tensors.size()) {
    return InternalError(fmt::format("daemon answered a PublishBatch of {} items with {}",
                                     tensors.size(), response.items_size()));
  }
  std::vector<PublishedTensor> published;
  published.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    tensors[i].state_.reset();
    v1::PublishResponse& item = *response.mutable_items(static_cast<int>(i));
    published.push_back(
        PublishedTensor{.name = std::move(*item.mutable_name()), .version = item.version()});
  }
  return published;
}

std::optional<TensorView> Client::AcquireIfFast(std::string_view name,
                                                const AcquireOptions& options) {
  return AcquireFast(name, options, /*may_open=*/false);
}

std::optional<TensorView> Client::AcquireFast(std::string_view name, const AcquireOptions& options,
                                              bool may_open) {
  if (!fast_path_) return std::nullopt;
  std::shared_ptr<const DecodedTensor> tensor = cache_->Find(name);
  if (!tensor || (options.version != 0 && options.version != tensor->version)) {
    return std::nullopt;
  }
  std::optional<FastPathPin> pin = fast_path_->TryPin(*tensor, may_open);
  if (!pin) return std::nullopt;
  if (options.populate) PopulateTensor(*tensor);
  return TensorViewAccess::FromPin(connection_, std::move(tensor), std::move(*pin));
}

Result<TensorView> Client::Acquire(std::string_view name, AcquireOptions options) {
  if (std::optional<TensorView> view = AcquireFast(name, options, /*may_open=*/true)) {
    return std::move(*view);
  }
  return AcquireAsked(name, options);
}

Result<TensorView> Client::AcquireAsked(std::string_view name, const AcquireOptions& options) {
  v1::AcquireRequest request;
  request.set_name(std::string(name));
  request.set_version(options.version);
  auto wait = WaitMilliseconds(options.wait);
  if (!wait) return std::unexpected(wait.error());
  request.set_wait_timeout_ms(*wait);
  auto response = connection_->Acquire(request, options.spin);
  if (!response) {
    if (response.error().code() == StatusCode::kNotFound && options.version == 0) {
      cache_->Erase(name, connection_->daemon_epoch());
    }
    return std::unexpected(response.error());
  }
  cache_->ForgetOtherEpochs(response->daemon_epoch());
  // Only the latest version replaces the cached one: a reply for the latest, or for a
  // version the directory shows as the latest.
  const bool latest =
      options.version == 0 ||
      (fast_path_ && fast_path_->ShowsLatest(response->daemon_epoch(), response->directory_entry(),
                                             response->version_id()));
  auto view = TensorViewAccess::FromReply(connection_, *response, response->daemon_epoch(),
                                          options.populate, latest ? cache_.get() : nullptr);
  if (!view) (void)ReleaseLease(*connection_, response->lease_id(), response->daemon_epoch());
  return view;
}

Status Client::Release(std::span<TensorView> views) {
  if (auto mine = TensorViewAccess::CheckAllOf(*connection_, views); !mine) return mine;
  return TensorViewAccess::ReleaseAll(*connection_, views);
}

Status Client::SyncReleases() { return connection_->SyncReleases(); }

Result<TensorViewBatch> Client::BatchAcquire(const std::vector<std::string>& names,
                                             std::string_view prefix,
                                             std::chrono::milliseconds wait) {
  v1::BatchAcquireRequest request;
  for (const std::string& name : names) request.add_names(name);
  request.set_prefix(std::string(prefix));
  auto wait_ms = WaitMilliseconds(wait);
  if (!wait_ms) return std::unexpected(wait_ms.error());
  request.set_wait_timeout_ms(*wait_ms);
  v1::BatchAcquireResponse response;
  HURRAY_ASSIGN_OR_RETURN(auto context, connection_->SessionContext("BatchAcquire"));
  grpc::Status status = connection_->stub().BatchAcquire(context.get(), request, &response);
  if (!status.ok()) return std::unexpected(FromGrpcStatus(status, "BatchAcquire"));
  std::vector<TensorView> views;
  views.reserve(static_cast<std::size_t>(response.tensors_size()));
  for (int i = 0; i < response.tensors_size(); ++i) {
    auto view =
        TensorViewAccess::FromReply(connection_, response.tensors(i), response.daemon_epoch(),
                                    /*populate=*/false, cache_.get());
    if (!view) {
      // Every lease of the batch ends, in one request: the views made so far are emptied
      // without releasing on their own.
      std::vector<std::uint64_t> lease_ids;
      lease_ids.reserve(static_cast<std::size_t>(response.tensors_size()));
      for (const v1::AcquireResponse& taken : response.tensors()) {
        lease_ids.push_back(taken.lease_id());
      }
      for (TensorView& made : views) TensorViewAccess::Forget(made);
      (void)ReleaseLeases(*connection_, lease_ids, response.daemon_epoch());
      return std::unexpected(view.error());
    }
    views.push_back(std::move(*view));
  }
  return TensorViewBatch(connection_, std::move(views));
}

Result<std::uint32_t> Client::Delete(std::string_view name, std::uint64_t version) {
  v1::DeleteRequest request;
  request.set_name(std::string(name));
  request.set_version(version);
  v1::DeleteResponse response;
  HURRAY_ASSIGN_OR_RETURN(auto context, connection_->SessionContext("Delete"));
  grpc::Status status = connection_->stub().Delete(context.get(), request, &response);
  if (!status.ok()) return std::unexpected(FromGrpcStatus(status, "Delete"));
  return response.versions_deleted();
}

Result<TensorListPage> Client::List(std::string_view prefix, std::uint32_t page_size,
                                    std::string_view page_token) {
  HURRAY_ASSIGN_OR_RETURN(const v1::ListResponse reply,
                          client_internal::CallList(*connection_, prefix, page_size, page_token));
  return client_internal::TensorListPageFromProto(reply);
}

Result<TensorDetails> Client::Describe(std::string_view name, std::uint64_t version) {
  HURRAY_ASSIGN_OR_RETURN(const v1::DescribeResponse reply,
                          client_internal::CallDescribe(*connection_, name, version));
  return client_internal::TensorDetailsFromProto(reply);
}

Result<DaemonStats> Client::Stats() {
  HURRAY_ASSIGN_OR_RETURN(const v1::StatsResponse reply, client_internal::CallStats(*connection_));
  return client_internal::DaemonStatsFromProto(reply);
}

Result<std::unique_ptr<WatchHandle>> Client::Watch(std::string_view prefix,
                                                   std::function<void(const WatchEvent&)> on_event,
                                                   std::function<void(const Status&)> on_end) {
  auto on_reply = [on_event = std::move(on_event)](const v1::WatchEvent& reply) {
    if (!on_event) return;
    if (auto event = client_internal::WatchEventFromProto(reply)) on_event(*event);
  };
  return client_internal::StartWatch(connection_, std::string(prefix), std::move(on_reply),
                                     std::move(on_end));
}

}  // namespace hurray
