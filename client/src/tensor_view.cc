// TensorView and TensorViewBatch (hurray/client.h), and what the client module does with
// views beyond their public API (client_internal.h).
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "client_internal.h"
#include "connection.h"
#include "decoded_tensor.h"
#include "device/stream_ordered.h"
#include "fast_path.h"
#include "hurray/client.h"
#include "hurray/descriptor_codec.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/fence_word.h"
#include "hurray/pool_name.h"
#include "hurray/tensor_name.h"
#include "inspection_calls.h"
#include "inspection_codec.h"
#include "mapped_buffers.h"
#include "tensor_cache.h"

namespace hurray {

using client_internal::Connection;
using client_internal::DecodedTensor;
using client_internal::FastPathPin;
using client_internal::MappedBuffer;
using client_internal::TensorViewAccess;

namespace client_internal {

Status ReleaseLeases(Connection& connection, std::span<const std::uint64_t> lease_ids,
                     std::uint64_t epoch) {
  Status outcome;
  while (!lease_ids.empty()) {
    const std::span<const std::uint64_t> chunk =
        lease_ids.first(std::min(lease_ids.size(), Client::kMaxLeasesPerRelease));
    lease_ids = lease_ids.subspan(chunk.size());
    v1::ReleaseRequest request;
    request.mutable_lease_ids()->Add(chunk.begin(), chunk.end());
    Status released = connection.Release(request, epoch);
    if (!released && outcome) outcome = std::unexpected(released.error());
  }
  return outcome;
}

void PopulateTensor(const DecodedTensor& tensor) {
  for (const MappedBuffer& buffer : tensor.buffers) {
    if (!buffer.slab) client_internal::PopulateForReading(buffer.data, buffer.size);
  }
}

}  // namespace client_internal

// ---- TensorView ----

struct TensorView::State {
  std::shared_ptr<Connection> connection;
  // The version as this process mapped it, shared with the client's cache and other views.
  std::shared_ptr<const DecodedTensor> tensor;
  // The daemon's lease; 0 on the fast path, where `pin` keeps the version instead.
  std::uint64_t lease_id = 0;
  std::optional<FastPathPin> pin;
  // SyncMode::kEvent: whether the daemon saw the fence reached at acquire.
  bool ready_at_acquire = false;
  // The fence's relay, once a stream waited on it (WaitOn, ReadyEvent). Moved only while
  // the view is made.
  struct RememberedRelay {
    RememberedRelay() = default;
    RememberedRelay(RememberedRelay&& other) noexcept : relayed(std::move(other.relayed)) {}
    RememberedRelay(const RememberedRelay&) = delete;
    RememberedRelay& operator=(const RememberedRelay&) = delete;
    RememberedRelay& operator=(RememberedRelay&&) = delete;
    ~RememberedRelay() = default;

    [[nodiscard]] std::shared_ptr<const client_internal::RelayedFence> Get() const {
      std::lock_guard lock(mutex);
      return relayed;
    }
    void Set(std::shared_ptr<const client_internal::RelayedFence> fence) const {
      std::lock_guard lock(mutex);
      relayed = std::move(fence);
    }

    mutable std::mutex mutex;
    mutable std::shared_ptr<const client_internal::RelayedFence> relayed;  // Guarded by mutex.
  } relay;

  // The relay streams wait on for the fence (Connection::RelayFence), remembered for Ready;
  // null when the fence is reached already.
  [[nodiscard]] Result<std::shared_ptr<const client_internal::RelayedFence>> Relay() const {
    HURRAY_ASSIGN_OR_RETURN(
        auto relayed,
        connection->RelayFence(tensor->fence, tensor->device.device_ordinal, tensor->daemon_epoch));
    if (relayed != nullptr) relay.Set(relayed);
    return relayed;
  }

  // Whether a consumer may read without waiting.
  [[nodiscard]] bool ready_without_fence() const {
    return tensor->sync_mode != SyncMode::kEvent || ready_at_acquire;
  }
};

TensorView::TensorView(std::unique_ptr<State> state) : state_(std::move(state)) {}
TensorView::TensorView(TensorView&&) noexcept = default;
TensorView& TensorView::operator=(TensorView&& other) noexcept {
  if (this != &other) {
    if (state_) (void)Release();
    state_ = std::move(other.state_);
  }
  return *this;
}
TensorView::~TensorView() {
  if (state_) (void)Release();
}

const std::string& TensorView::name() const { return state_->tensor->name; }
std::uint64_t TensorView::version() const { return state_->tensor->version; }
const TensorDescriptor& TensorView::descriptor() const { return state_->tensor->descriptor; }
std::size_t TensorView::buffer_count() const { return state_->tensor->buffers.size(); }
std::span<const std::byte> TensorView::buffer(std::size_t index) const {
  const MappedBuffer& buffer = state_->tensor->buffers.at(index);
  if (buffer.slab) return {};
  return {buffer.data, buffer.size};
}
const void* TensorView::data(std::size_t index) const {
  return state_->tensor->buffers.at(index).data;
}
const DeviceInfo& TensorView::device() const { return state_->tensor->device; }
SyncMode TensorView::sync_mode() const { return state_->tensor->sync_mode; }

Result<PrivateMapping> TensorView::MapPrivate(std::size_t index) const {
  if (!state_) return FailedPreconditionError("MapPrivate: the view holds no lease");
  const DecodedTensor& tensor = *state_->tensor;
  if (index >= tensor.buffers.size()) {
    return OutOfRangeError(fmt::format("MapPrivate: buffer index {} is out of range: {} has {}",
                                       index, tensor.name, tensor.buffers.size()));
  }
  const MappedBuffer& buffer = tensor.buffers[index];
  if (buffer.slab) {
    return FailedPreconditionError(fmt::format(
        "MapPrivate: {} lives in GPU memory, which has no private mappings", tensor.name));
  }
  if (!buffer.mapping || buffer.size == 0) return PrivateMapping();
  HURRAY_ASSIGN_OR_RETURN(const Connection::SegmentFile file,
                          state_->connection->SegmentDescriptor(*buffer.mapping));
  if (file.hugetlbfs) {
    return FailedPreconditionError(fmt::format(
        "MapPrivate: {} lives in a pool of explicit huge pages, whose private copies the kernel "
        "would take from the huge page pool",
        tensor.name));
  }
  // Whole pages of the segment around the buffer; it lies inside the segment (MapBuffers).
  static const auto kPage = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto offset = static_cast<std::uint64_t>(buffer.data - buffer.mapping->base());
  const std::uint64_t first = offset / kPage * kPage;
  const std::uint64_t length = (offset + buffer.size - first + kPage - 1) / kPage * kPage;
  void* pages = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd->get(),
                       static_cast<off_t>(first));
  if (pages == MAP_FAILED) {
    return ErrnoFailure("mmap", fmt::format("a private mapping of {}", tensor.name), errno);
  }
  return PrivateMapping(pages, length, static_cast<std::byte*>(pages) + (offset - first),
                        buffer.size);
}

PrivateMapping::PrivateMapping(PrivateMapping&& other) noexcept
    : pages_(std::exchange(other.pages_, nullptr)),
      pages_size_(std::exchange(other.pages_size_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

PrivateMapping& PrivateMapping::operator=(PrivateMapping&& other) noexcept {
  if (this != &other) {
    PrivateMapping gone(std::move(*this));
    pages_ = std::exchange(other.pages_, nullptr);
    pages_size_ = std::exchange(other.pages_size_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PrivateMapping::~PrivateMapping() {
  if (pages_ != nullptr) ::munmap(pages_, pages_size_);
}

Status TensorView::WaitOn(CudaStream stream) const {
  if (!state_) return FailedPreconditionError("WaitOn: the view holds no lease");
  if (state_->ready_without_fence()) return {};
  HURRAY_ASSIGN_OR_RETURN(const auto relayed, state_->Relay());
  if (relayed == nullptr) return {};
  HURRAY_ASSIGN_OR_RETURN(client_internal::FenceRelay * relay,
                          client_internal::FenceRelay::ForProcess());
  return relay->mapper().WaitValue(stream, state_->tensor->device.device_ordinal,
                                   relayed->device_word(), relayed->value());
}

Result<bool> TensorView::Ready() const {
  if (!state_) return FailedPreconditionError("Ready: the view holds no lease");
  if (state_->ready_without_fence()) return true;
  const std::shared_ptr<const client_internal::RelayedFence> relayed = state_->relay.Get();
  if (relayed != nullptr && relayed->abandoned()) {
    return std::unexpected(
        Error(StatusCode::kDataLoss,
              fmt::format("{} version {}: the daemon ended, and the fence was not reached within "
                          "Options::orphaned_fence_wait after: streams that waited have moved on "
                          "without the data",
                          state_->tensor->name, state_->tensor->version)));
  }
  // Once a stream waited, the relay's mapping of the word answers even with the daemon gone.
  std::uint64_t value = 0;
  if (relayed != nullptr) {
    value = relayed->daemon_word();
  } else {
    HURRAY_ASSIGN_OR_RETURN(
        value, state_->connection->ReadFence(state_->tensor->fence, state_->tensor->daemon_epoch));
  }
  if (value == kFencePoison) {
    return std::unexpected(Error(
        StatusCode::kDataLoss,
        fmt::format("{} version {}: the daemon gave up on the data (its producer ended, or the "
                    "daemon stopped, before it was ready)",
                    state_->tensor->name, state_->tensor->version)));
  }
  // The compare the waiting streams make (cyclic), so that Ready() and WaitOn agree.
  return FenceWordReaches(value, state_->tensor->fence.value());
}

Result<std::shared_ptr<void>> TensorViewAccess::ReadyEvent(const TensorView& view) {
  const TensorView::State* state = view.state_.get();
  if (state == nullptr) return FailedPreconditionError("ReadyEvent: the view holds no lease");
  if (state->tensor->device.device_tag != DeviceTag::Cuda()) {
    return FailedPreconditionError(
        fmt::format("{} version {} is not in a CUDA pool: it has no device event",
                    state->tensor->name, state->tensor->version));
  }
  std::shared_ptr<Connection> connection = state->connection;
  HURRAY_ASSIGN_OR_RETURN(client_internal::DeviceSlabCache * slabs,
                          connection->DeviceSlabs(state->tensor->daemon_epoch));
  std::shared_ptr<const client_internal::RelayedFence> relayed;
  if (!state->ready_without_fence()) {
    HURRAY_ASSIGN_OR_RETURN(relayed, state->Relay());
  }
  HURRAY_ASSIGN_OR_RETURN(void* event, slabs->mapper().RecordEventAfterWait(
                                           state->tensor->device.device_ordinal,
                                           relayed != nullptr ? relayed->device_word() : 0,
                                           relayed != nullptr ? relayed->value() : 0));
  return std::shared_ptr<void>(
      event, [connection, slabs](void* recorded) { slabs->mapper().DestroyEvent(recorded); });
}
std::uint64_t TensorView::lease_id() const { return state_->lease_id; }
bool TensorView::fast_path() const { return state_->pin.has_value(); }
std::uint64_t TensorView::daemon_epoch() const { return state_->tensor->daemon_epoch; }

Status TensorView::ReleaseAfter(CudaStream stream) {
  if (!state_) return {};
  if (state_->tensor->device.device_tag != DeviceTag::Cuda()) return Release();
  // The process's own mapper: the view may be of an earlier daemon's epoch.
  HURRAY_ASSIGN_OR_RETURN(client_internal::FenceRelay * relay,
                          client_internal::FenceRelay::ForProcess());
  return client_internal::EndAfterStream(
      relay->mapper(), state_, stream, state_->tensor->device.device_ordinal,
      [](std::unique_ptr<State> released) { (void)TensorView(std::move(released)).Release(); });
}

Status TensorView::Release() {
  if (!state_) return {};
  if (state_->pin) {
    state_.reset();  // Unpins.
    return {};
  }
  auto status = ReleaseLease(*state_->connection, state_->lease_id, state_->tensor->daemon_epoch);
  state_.reset();
  return status;
}

Status TensorViewAccess::CheckAllOf(const Connection& connection,
                                    std::span<const TensorView> views) {
  for (std::size_t i = 0; i < views.size(); ++i) {
    const TensorView::State* state = views[i].state_.get();
    if (state == nullptr || state->connection.get() == &connection) continue;
    return InvalidArgumentError(
        fmt::format("Release: views[{}] ({} version {}, lease {}) was acquired through another "
                    "client; nothing was released",
                    i, ShownName(state->tensor->name), state->tensor->version, state->lease_id));
  }
  return {};
}

Status TensorViewAccess::ReleaseAll(Connection& connection, std::span<TensorView> views) {
  // Epoch -> its leases: views acquired before and after a daemon restart may be mixed.
  std::map<std::uint64_t, std::vector<std::uint64_t>> lease_ids;
  for (TensorView& view : views) {
    if (!view.state_) continue;
    if (view.state_->pin) {
      view.state_.reset();  // Unpins.
      continue;
    }
    lease_ids[view.state_->tensor->daemon_epoch].push_back(view.state_->lease_id);
    view.state_.reset();
  }
  Status outcome;
  for (const auto& [epoch, ids] : lease_ids) {
    auto released = ReleaseLeases(connection, ids, epoch);
    if (outcome && !released) outcome = std::move(released);
  }
  return outcome;
}

void TensorViewAccess::Forget(TensorView& view) { view.state_.reset(); }

// ---- TensorViewBatch ----

TensorViewBatch::TensorViewBatch(std::shared_ptr<Connection> connection,
                                 std::vector<TensorView> views)
    : connection_(std::move(connection)), views_(std::move(views)) {}
TensorViewBatch::TensorViewBatch(TensorViewBatch&&) noexcept = default;
TensorViewBatch& TensorViewBatch::operator=(TensorViewBatch&& other) noexcept {
  if (this != &other) {
    clear();
    connection_ = std::move(other.connection_);
    views_ = std::move(other.views_);
  }
  return *this;
}
TensorViewBatch::~TensorViewBatch() { clear(); }

Status TensorViewBatch::Release() {
  if (views_.empty()) return {};
  if (auto mine = TensorViewAccess::CheckAllOf(*connection_, views_); !mine) return mine;
  auto status = TensorViewAccess::ReleaseAll(*connection_, views_);
  views_.clear();
  return status;
}

void TensorViewBatch::clear() {
  // A foreign view moved in makes Release refuse; clearing then ends each lease through the
  // view's own client.
  (void)Release();
  views_.clear();
}

Result<TensorView> TensorViewAccess::FromReply(const std::shared_ptr<Connection>& connection,
                                               const v1::AcquireResponse& reply,
                                               std::uint64_t epoch, bool populate,
                                               TensorCache* cache) {
  std::shared_ptr<const DecodedTensor> tensor;
  if (cache != nullptr) tensor = cache->Find(reply.tensor().name(), reply.version_id(), epoch);
  if (!tensor || tensor->version != reply.tensor().version()) {
    HURRAY_ASSIGN_OR_RETURN(tensor, client_internal::DecodeTensor(*connection, reply, epoch));
    if (cache != nullptr) cache->Insert(tensor);
  }
  if (populate) PopulateTensor(*tensor);
  return TensorView(std::make_unique<TensorView::State>(
      TensorView::State{.connection = connection,
                        .tensor = std::move(tensor),
                        .lease_id = reply.lease_id(),
                        .pin = std::nullopt,
                        .ready_at_acquire = reply.tensor().handoff().ready()}));
}

TensorView TensorViewAccess::FromPin(const std::shared_ptr<Connection>& connection,
                                     std::shared_ptr<const DecodedTensor> tensor, FastPathPin pin) {
  return TensorView(
      std::make_unique<TensorView::State>(TensorView::State{.connection = connection,
                                                            .tensor = std::move(tensor),
                                                            .lease_id = 0,
                                                            .pin = std::move(pin),
                                                            .ready_at_acquire = false}));
}

}  // namespace hurray
