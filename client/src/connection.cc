#include "connection.h"

#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/fence_word.h"
#include "hurray/ipc/frame.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/socket_path.h"

namespace hurray::client_internal {
namespace {

// Whether `fd` (segment `segment_id`) is a file of hugetlbfs, whose private mappings take
// their copied pages from the huge page pool.
Result<bool> OnHugetlbfs(int fd, std::uint64_t segment_id) {
  struct statfs file_system{};
  if (::fstatfs(fd, &file_system) != 0) {
    return ErrnoFailure("fstatfs", fmt::format("segment {}", segment_id), errno);
  }
  return file_system.f_type == HUGETLBFS_MAGIC;
}

constexpr std::uint64_t kHugePageBytes = std::uint64_t{2} << 20;

// Linux 5.14's advice value; older C libraries do not define it.
#ifdef MADV_POPULATE_READ
constexpr int kPopulateRead = MADV_POPULATE_READ;
#else
constexpr int kPopulateRead = 22;
#endif

// Cleared once the kernel answers EINVAL: it does not know the advice, so later calls skip
// the system call.
std::atomic<bool> populate_supported{true};

}  // namespace

void PopulateForReading(const std::byte* data, std::uint64_t size) {
  if (size == 0 || !populate_supported.load(std::memory_order_relaxed)) return;
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data) / page * page;
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(data) + size;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): madvise takes the page-aligned address.
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, kPopulateRead) != 0 &&
      errno == EINVAL) {
    // The range is page-aligned and mapped, so EINVAL means the advice is unknown. Other
    // failures (EFAULT, ENOMEM, EINTR) leave the mapping as it was: the read faults instead.
    populate_supported.store(false, std::memory_order_relaxed);
  }
}

Error FromGrpcStatus(const grpc::Status& status, std::string_view call) {
  std::string message = status.error_message();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    message =
        fmt::format("{}: daemon unavailable (stopped or restarting; the next call reconnects): {}",
                    call, message);
  }
  return {static_cast<StatusCode>(status.error_code()), std::move(message)};
}

Connection::Connection(std::string socket_path, std::string client_name,
                       std::unique_ptr<client::SessionConnection> session,
                       std::shared_ptr<grpc::Channel> channel, bool use_session_socket,
                       std::uint64_t max_mapped_device_bytes,
                       std::chrono::milliseconds own_fence_wait,
                       std::chrono::milliseconds orphaned_fence_wait)
    : socket_path_(std::move(socket_path)),
      client_name_(std::move(client_name)),
      use_session_socket_(use_session_socket),
      channel_(std::move(channel)),
      stub_(v1::Exchange::NewStub(channel_)),
      session_(std::move(session)),
      mappings_epoch_(session_->daemon_epoch()),
      max_mapped_device_bytes_(max_mapped_device_bytes),
      own_fence_wait_(own_fence_wait),
      orphaned_fence_wait_(orphaned_fence_wait) {}

namespace {

// How long a CUDA slab no tensor or view of this process holds stays mapped, for a later
// acquire to find it: the daemon frees no slab a process maps (SlabMapped), and releases
// empty ones idle_slab_release_ms (60 s by default) after they emptied.
constexpr std::chrono::milliseconds kIdleSlabUnmap{10'000};

// Whether a fence word says its fence is done with: reached, or given up on (poison).
bool FenceSettled(const std::uint64_t* word, std::uint64_t value) {
  // The producer's GPU writes the word in place: read it as the atomic it is.
  const std::uint64_t now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
  return now == kFencePoison || FenceWordReaches(now, value);
}

}  // namespace

Connection::~Connection() { WaitForOwnFences(); }

void Connection::WaitForOwnFences() {
  const auto deadline = std::chrono::steady_clock::now() + own_fence_wait_;
  std::uint64_t epoch = 0;
  {
    std::lock_guard lock(session_mutex_);
    epoch = session_->daemon_epoch();
  }
  std::lock_guard lock(own_fences_mutex_);
  // Fences of an earlier daemon are gone with it: nothing waits for them.
  std::erase_if(own_fences_, [&](const OwnFence& fence) {
    return fence.epoch != epoch || FenceSettled(fence.word, fence.value);
  });
  while (!own_fences_.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::erase_if(own_fences_,
                  [](const OwnFence& fence) { return FenceSettled(fence.word, fence.value); });
  }
}

void Connection::RememberOwnFence(const v1::Fence& fence, std::uint64_t epoch) {
  if (own_fence_wait_.count() == 0) return;
  auto mapped = MapFence(fence, /*writable=*/true, epoch);
  if (!mapped) return;
  const auto* word = reinterpret_cast<const std::uint64_t*>(mapped->first->base() + mapped->second);
  std::lock_guard lock(own_fences_mutex_);
  std::erase_if(own_fences_, [](const OwnFence& own) { return FenceSettled(own.word, own.value); });
  own_fences_.push_back(OwnFence{
      .mapping = std::move(mapped->first), .word = word, .value = fence.value(), .epoch = epoch});
}

Connection::DeviceState::~DeviceState() {
  // Host registrations end before their mappings are unmapped; the slab cache unmaps its
  // slabs as it goes. A fence page a GPU relay may still read stays registered and mapped.
  FenceRelay* relay = FenceRelay::IfCreated();
  for (const auto& [key, registration] : registrations) {
    if (relay != nullptr && relay->GpuMayRead(registration.mapping.get())) {
      relay->KeepForever(registration.mapping);
      continue;
    }
    slabs->mapper().UnregisterHostMemory(registration.mapping->base());
  }
}

Result<std::shared_ptr<Connection>> Connection::Open(
    std::string socket_path, std::string_view client_name, bool use_session_socket,
    std::uint64_t max_mapped_device_bytes, std::chrono::milliseconds own_fence_wait,
    std::chrono::milliseconds orphaned_fence_wait) {
  if (socket_path.empty()) socket_path = DefaultClientSocketPath();
  auto session = client::SessionConnection::Connect(SessionSocketPath(socket_path), client_name);
  if (!session) return std::unexpected(session.error());
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(fmt::format("unix:{}", socket_path),
                                           grpc::InsecureChannelCredentials(), arguments);
  return std::shared_ptr<Connection>(new Connection(
      std::move(socket_path), std::string(client_name), std::move(*session), std::move(channel),
      use_session_socket, max_mapped_device_bytes, own_fence_wait, orphaned_fence_wait));
}

Result<std::shared_ptr<client::SessionConnection>> Connection::Session(bool probe) {
  std::lock_guard lock(session_mutex_);
  if (session_->StillOpen(probe)) return session_;
  auto fresh = client::SessionConnection::Connect(SessionSocketPath(socket_path_), client_name_);
  if (!fresh) {
    return UnavailableError(fmt::format(
        "the session of daemon epoch {} ended (the daemon stopped or restarted) and a new one "
        "cannot be opened: {}",
        session_->daemon_epoch(), fresh.error().ToString()));
  }
  session_ = std::move(*fresh);
  {
    // The old daemon's segments stay mapped only by the tensors and views that hold them,
    // so that their epoch hold closes with the last of those.
    std::lock_guard mappings_lock(mutex_);
    mappings_.clear();
    mappings_epoch_ = session_->daemon_epoch();
  }
  // The gRPC channel lost its connection with the old daemon and may be waiting out a
  // reconnect backoff: the new daemon listens now, so the next rpc may connect at once.
  grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
  return session_;
}

Result<std::shared_ptr<client::SessionConnection>> Connection::SessionOfEpoch(
    std::uint64_t epoch, bool probe, std::string_view what) {
  HURRAY_ASSIGN_OR_RETURN(std::shared_ptr<client::SessionConnection> session, Session(probe));
  if (epoch != 0 && session->daemon_epoch() != epoch) {
    return UnavailableError(fmt::format(
        "{}: the daemon restarted (epoch {} ended; it now runs epoch {}): this client's "
        "session of that epoch, its leases and its unpublished allocations are gone",
        what, epoch, session->daemon_epoch()));
  }
  return session;
}

Result<std::shared_ptr<client::SessionConnection>> Connection::CurrentSession(std::uint64_t epoch) {
  return SessionOfEpoch(epoch, /*probe=*/false, "fast path");
}

std::uint64_t Connection::session_id() {
  std::lock_guard lock(session_mutex_);
  return session_->session_id();
}

std::uint64_t Connection::daemon_epoch() {
  std::lock_guard lock(session_mutex_);
  return session_->daemon_epoch();
}

template <typename Request, typename Response>
Result<Response> Connection::Call(
    const Request& request, Request* (v1::SessionMessage::*request_body)(),
    Response* (v1::SessionMessage::*reply_body)(), v1::SessionMessage::BodyCase reply_case,
    grpc::Status (v1::Exchange::Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
    std::string_view name, bool session_socket, std::uint64_t epoch,
    std::chrono::microseconds spin) {
  if (session_socket) {
    v1::SessionMessage message;
    *(message.*request_body)() = request;
    HURRAY_ASSIGN_OR_RETURN(auto session, SessionOfEpoch(epoch, /*probe=*/false, name));
    bool sent = false;
    auto reply = session->Exchange(message, reply_case, &sent, spin);
    if (!reply && !sent) {
      // The daemon never saw the request (its end had hung up): once more, on a new session.
      HURRAY_ASSIGN_OR_RETURN(session, SessionOfEpoch(epoch, /*probe=*/false, name));
      reply = session->Exchange(message, reply_case, nullptr, spin);
    }
    if (!reply) return std::unexpected(reply.error());
    return std::move(*((*reply).*reply_body)());
  }
  Response response;
  HURRAY_ASSIGN_OR_RETURN(auto context, SessionContext(name, epoch));
  grpc::Status status = ((*stub_).*rpc)(context.get(), request, &response);
  if (!status.ok()) return std::unexpected(FromGrpcStatus(status, name));
  return response;
}

Result<v1::AllocateResponse> Connection::Allocate(const v1::AllocateRequest& request) {
  return Call(request, &v1::SessionMessage::mutable_allocate,
              &v1::SessionMessage::mutable_allocate_reply, v1::SessionMessage::kAllocateReply,
              &v1::Exchange::Stub::Allocate, "Allocate", use_session_socket_, /*epoch=*/0);
}

Result<v1::PublishResponse> Connection::Publish(const v1::PublishRequest& request,
                                                std::uint64_t epoch) {
  return Call(request, &v1::SessionMessage::mutable_publish,
              &v1::SessionMessage::mutable_publish_reply, v1::SessionMessage::kPublishReply,
              &v1::Exchange::Stub::Publish, "Publish", use_session_socket_, epoch);
}

Result<v1::PublishBatchResponse> Connection::PublishBatch(const v1::PublishBatchRequest& request,
                                                          std::uint64_t epoch) {
  const std::size_t request_bytes = request.ByteSizeLong();
  std::size_t name_bytes = 0;
  for (const v1::PublishRequest& item : request.items()) name_bytes += item.name().size();
  // The request travels as a SessionMessage: its body's tag and length, and a request_id.
  constexpr std::size_t kEnvelopeBytes = 2 + 5 + 1 + 10;
  const bool fits_frame = request_bytes + kEnvelopeBytes <= kMaxSessionFrameBytes &&
                          PublishBatchReplyBound(static_cast<std::size_t>(request.items_size()),
                                                 name_bytes) <= kMaxSessionFrameBytes;
  auto response = Call(request, &v1::SessionMessage::mutable_publish_batch,
                       &v1::SessionMessage::mutable_publish_batch_reply,
                       v1::SessionMessage::kPublishBatchReply, &v1::Exchange::Stub::PublishBatch,
                       "PublishBatch", use_session_socket_ && fits_frame, epoch);
  if (!response && response.error().code() == StatusCode::kResourceExhausted && !fits_frame) {
    return ResourceExhaustedError(fmt::format(
        "PublishBatch: the request of {} items takes {} bytes, above the session socket's frame "
        "limit {} and what the daemon accepts through gRPC: {}",
        request.items_size(), request_bytes, kMaxSessionFrameBytes, response.error().message()));
  }
  return response;
}

Result<v1::AcquireResponse> Connection::Acquire(const v1::AcquireRequest& request,
                                                std::chrono::microseconds spin) {
  // A wait goes on the session socket when the daemon answers it there out of order (the
  // socket serves the process's other calls meanwhile); otherwise gRPC serves it.
  bool session_socket = use_session_socket_;
  if (session_socket && request.wait_timeout_ms() != 0) {
    std::lock_guard lock(session_mutex_);
    session_socket = session_->acquire_waits();
  }
  return Call(request, &v1::SessionMessage::mutable_acquire,
              &v1::SessionMessage::mutable_acquire_reply, v1::SessionMessage::kAcquireReply,
              &v1::Exchange::Stub::Acquire, "Acquire", session_socket, /*epoch=*/0, spin);
}

Status Connection::Release(const v1::ReleaseRequest& request, std::uint64_t epoch) {
  if (!use_session_socket_) {
    auto released =
        Call(request, &v1::SessionMessage::mutable_release,
             &v1::SessionMessage::mutable_release_reply, v1::SessionMessage::kReleaseReply,
             &v1::Exchange::Stub::Release, "Release", /*session_socket=*/false, epoch);
    if (!released) return std::unexpected(released.error());
    return {};
  }
  HURRAY_ASSIGN_OR_RETURN(auto session, SessionOfEpoch(epoch, /*probe=*/false, "Release"));
  bool sent = false;
  Status released = session->SendReleaseOneWay(request, &sent);
  if (!released && !sent) {
    // The daemon never saw the request (its end had hung up): once more, on a new session.
    HURRAY_ASSIGN_OR_RETURN(session, SessionOfEpoch(epoch, /*probe=*/false, "Release"));
    released = session->SendReleaseOneWay(request);
  }
  return released;
}

Status Connection::SyncReleases() {
  HURRAY_ASSIGN_OR_RETURN(auto session, Session(/*probe=*/false));
  return session->SyncReleases();
}

void Connection::SyncUnansweredReleases() {
  std::shared_ptr<client::SessionConnection> session;
  {
    std::lock_guard lock(session_mutex_);
    session = session_;
  }
  if (session->ReleasesUnanswered()) (void)session->Sync();
}

Result<v1::CancelAllocationResponse> Connection::CancelAllocation(
    const v1::CancelAllocationRequest& request, std::uint64_t epoch) {
  return Call(request, &v1::SessionMessage::mutable_cancel_allocation,
              &v1::SessionMessage::mutable_cancel_allocation_reply,
              v1::SessionMessage::kCancelAllocationReply, &v1::Exchange::Stub::CancelAllocation,
              "CancelAllocation", use_session_socket_, epoch);
}

Result<std::unique_ptr<grpc::ClientContext>> Connection::SessionContext(std::string_view call,
                                                                        std::uint64_t epoch) {
  SyncUnansweredReleases();
  HURRAY_ASSIGN_OR_RETURN(auto session, SessionOfEpoch(epoch, /*probe=*/true, call));
  auto context = std::make_unique<grpc::ClientContext>();
  context->AddMetadata(kSessionMetadataKey, session->token());
  return context;
}

Result<std::shared_ptr<Mapping>> Connection::MapSegment(std::uint64_t segment_id, bool writable,
                                                        std::uint64_t epoch) {
  HURRAY_ASSIGN_OR_RETURN(auto session, SessionOfEpoch(epoch, /*probe=*/false,
                                                       fmt::format("map segment {}", segment_id)));
  std::lock_guard lock(mutex_);
  if (mappings_epoch_ != session->daemon_epoch()) {
    // The old epoch's mappings stay with the tensors and views that hold them.
    mappings_.clear();
    mappings_epoch_ = session->daemon_epoch();
  }
  auto key = std::make_pair(segment_id, writable);
  if (auto found = mappings_.find(key); found != mappings_.end()) return found->second;
  auto granted = session->MapSegment(segment_id, writable);
  if (!granted) return std::unexpected(granted.error());
  const int protection = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  HURRAY_ASSIGN_OR_RETURN(SharedMapping mapped,
                          SharedMapping::Map(granted->fd.get(), granted->size, protection,
                                             fmt::format("segment {}", segment_id)));
  // A pool with huge pages: ask for huge page mappings of them. Only advice: a kernel that
  // declines (hugetlbfs needs none, a tmpfs policy may refuse) leaves a working mapping.
  if (granted->page_size >= kHugePageBytes) {
    (void)::madvise(mapped.data(), granted->size, MADV_HUGEPAGE);
  }
  const bool sealed = granted->kind == v1::SEGMENT_KIND_SEALED_MEMFD;
  Mapping::Origin origin{.fd = nullptr,
                         .hugetlbfs = false,
                         .segment_id = segment_id,
                         .epoch = session->daemon_epoch()};
  if (!sealed) {
    HURRAY_ASSIGN_OR_RETURN(origin.hugetlbfs, OnHugetlbfs(granted->fd.get(), segment_id));
    origin.fd = std::make_shared<const UniqueFd>(std::move(granted->fd));
  }
  auto mapping = std::make_shared<Mapping>(std::move(mapped), writable, sealed,
                                           session->epoch_hold(), std::move(origin));
  if (!sealed) mappings_.emplace(key, mapping);
  return mapping;
}

Result<Connection::SegmentFile> Connection::SegmentDescriptor(const Mapping& mapping) {
  const std::optional<Mapping::Origin>& of_segment = mapping.origin();
  if (!of_segment.has_value()) {
    return FailedPreconditionError("the mapping is of no pool segment");
  }
  const Mapping::Origin& origin = *of_segment;
  if (origin.fd != nullptr) return SegmentFile{.fd = origin.fd, .hugetlbfs = origin.hugetlbfs};
  HURRAY_ASSIGN_OR_RETURN(
      auto session, SessionOfEpoch(origin.epoch, /*probe=*/false,
                                   fmt::format("map segment {} privately", origin.segment_id)));
  auto granted = session->MapSegment(origin.segment_id, /*writable=*/false);
  if (!granted) return std::unexpected(granted.error());
  HURRAY_ASSIGN_OR_RETURN(const bool hugetlbfs, OnHugetlbfs(granted->fd.get(), origin.segment_id));
  return SegmentFile{.fd = std::make_shared<const UniqueFd>(std::move(granted->fd)),
                     .hugetlbfs = hugetlbfs};
}

Result<Connection::DeviceState*> Connection::Device(std::uint64_t epoch) {
  HURRAY_ASSIGN_OR_RETURN(auto session, SessionOfEpoch(epoch, /*probe=*/false, "CUDA slabs"));
  const std::uint64_t current = session->daemon_epoch();
  std::lock_guard lock(device_mutex_);
  if (device_ && device_->epoch != current) {
    // That daemon is gone: what no tensor or view of it holds is unmapped now.
    device_->slabs->Retire();
    retired_devices_.push_back(std::move(device_));
  }
  if (device_) return device_.get();
  HURRAY_ASSIGN_OR_RETURN(auto mapper, CreateCudaDeviceMemoryMapper());
  // Grants and reports go to the session of the cache's epoch only: slab ids of another
  // epoch name other slabs.
  auto session_of = [this, current](std::uint64_t segment_id) {
    return SessionOfEpoch(current, /*probe=*/false, fmt::format("map slab {}", segment_id));
  };
  device_ = std::make_unique<DeviceState>();
  device_->epoch = current;
  device_->slabs = std::make_unique<DeviceSlabCache>(
      std::move(mapper), max_mapped_device_bytes_,
      [session_of](std::uint64_t segment_id, bool writable) -> Result<client::GrantedSegment> {
        HURRAY_ASSIGN_OR_RETURN(auto granting, session_of(segment_id));
        return granting->MapSegment(segment_id, writable);
      },
      [session_of](std::uint64_t segment_id, bool read_only, bool unmapped) {
        // The mapping works all the same on a refusal: the daemon's Stats lose by it, and
        // an unmap it never heard of keeps the slab until the session ends.
        if (auto reporting = session_of(segment_id)) {
          (void)(*reporting)->ReportSlabMapped(segment_id, read_only, unmapped);
        }
      },
      kIdleSlabUnmap);
  return device_.get();
}

Result<DeviceSlabCache*> Connection::DeviceSlabs(std::uint64_t epoch) {
  HURRAY_ASSIGN_OR_RETURN(DeviceState * device, Device(epoch));
  return device->slabs.get();
}

Result<std::pair<std::shared_ptr<Mapping>, std::uint64_t>> Connection::MapFence(
    const v1::Fence& fence, bool writable, std::uint64_t epoch) {
  HURRAY_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> mapping,
                          MapSegment(fence.segment_id(), writable, epoch));
  if (fence.offset() % sizeof(std::uint64_t) != 0 || fence.offset() > mapping->size() ||
      mapping->size() - fence.offset() < sizeof(std::uint64_t)) {
    return InternalError(fmt::format("daemon sent a fence at offset {} of segment {} of {} bytes",
                                     fence.offset(), fence.segment_id(), mapping->size()));
  }
  return std::make_pair(std::move(mapping), fence.offset());
}

Result<DeviceAddress> Connection::FenceDeviceAddress(const v1::Fence& fence, bool writable,
                                                     int device_ordinal, std::uint64_t epoch) {
  HURRAY_ASSIGN_OR_RETURN(auto mapped, MapFence(fence, writable, epoch));
  HURRAY_ASSIGN_OR_RETURN(DeviceState * device, Device(epoch));
  std::lock_guard lock(device_mutex_);
  const Mapping* key = mapped.first.get();
  auto found = device->registrations.find(key);
  if (found == device->registrations.end()) {
    HURRAY_ASSIGN_OR_RETURN(
        const DeviceAddress base,
        device->slabs->mapper().RegisterHostMemory(mapped.first->base(), mapped.first->size(),
                                                   device_ordinal, !writable));
    found = device->registrations.emplace(key, Registration{.mapping = mapped.first, .base = base})
                .first;
  }
  return found->second.base + mapped.second;
}

Result<std::shared_ptr<const RelayedFence>> Connection::RelayFence(const v1::Fence& fence,
                                                                   int device_ordinal,
                                                                   std::uint64_t epoch) {
  HURRAY_ASSIGN_OR_RETURN(FenceRelay * relay, FenceRelay::ForProcess());
  HURRAY_ASSIGN_OR_RETURN(auto mapped, MapFence(fence, /*writable=*/false, epoch));
  HURRAY_ASSIGN_OR_RETURN(auto session, SessionOfEpoch(epoch, /*probe=*/false, "fence relay"));
  FenceToRelay relayed{
      .word = reinterpret_cast<const std::uint64_t*>(mapped.first->base() + mapped.second),
      .keep = mapped.first,
      .value = fence.value(),
      .device_ordinal = device_ordinal,
      .device_word = 0,
      .daemon_pidfd = session->daemon_pidfd(),
      .orphaned_wait = orphaned_fence_wait_};
  // FAILED_PRECONDITION: this device registers no read-only host memory; the relay's thread
  // reads the word instead.
  auto registered = FenceDeviceAddress(fence, /*writable=*/false, device_ordinal, epoch);
  if (registered) {
    relayed.device_word = *registered;
  } else if (registered.error().code() != StatusCode::kFailedPrecondition) {
    return std::unexpected(registered.error());
  }
  return relay->Relay(std::move(relayed));
}

Result<std::uint64_t> Connection::ReadFence(const v1::Fence& fence, std::uint64_t epoch) {
  HURRAY_ASSIGN_OR_RETURN(auto mapped, MapFence(fence, /*writable=*/false, epoch));
  const auto* word = reinterpret_cast<const std::uint64_t*>(mapped.first->base() + mapped.second);
  // The producer's GPU writes the word in place: read it as the atomic it is.
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

}  // namespace hurray::client_internal
