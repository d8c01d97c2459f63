#include "exchange_service.h"

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>

namespace hurray::daemon {
namespace {

// The session named by the call's metadata.
Result<std::uint64_t> SessionOf(const grpc::CallbackServerContext* context,
                                const Registry& registry) {
  const auto& metadata = context->client_metadata();
  auto found = metadata.find(kSessionMetadataKey);
  if (found == metadata.end() || found->second.empty()) {
    return UnauthenticatedError(
        fmt::format("no session token: send {} metadata", kSessionMetadataKey));
  }
  return registry.Authenticate(std::string_view(found->second.data(), found->second.size()));
}

// Whom an inspection call shows the registry to: the credentials of the session its
// metadata names, or nullopt (an anonymous caller) without a session token or with one
// that names no session.
std::optional<PeerCredentials> ViewerOf(const grpc::CallbackServerContext* context,
                                        const Registry& registry) {
  Result<std::uint64_t> session = SessionOf(context, registry);
  if (!session) return std::nullopt;
  return registry.SessionPeer(*session);
}

// Finishes a unary call with a Result, moving its value into *response, and records it.
template <typename Response>
grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* context,
                                     const RequestTimer& timer, Result<Response> result,
                                     Response* response) {
  timer.Finish(result ? StatusCode::kOk : result.error().code());
  auto* reactor = context->DefaultReactor();
  if (result) {
    *response = std::move(*result);
    reactor->Finish(grpc::Status::OK);
  } else {
    reactor->Finish(ToGrpcStatus(result.error()));
  }
  return reactor;
}

// A unary call that may wait in the registry (Acquire, BatchAcquire). If the client
// cancels while it waits, the wait is dropped; if the registry completes it anyway, the
// leases it took are released, since no one will ever hear of them.
template <typename Response>
class WaitingCall final : public grpc::ServerUnaryReactor {
 public:
  // State shared with the registry's completion callback, which may outlive the reactor.
  struct Shared {
    std::mutex mutex;
    WaitingCall* reactor = nullptr;  // Guarded by mutex; null once the call is done.
    std::uint64_t wait_id = 0;       // Guarded by mutex.
    bool cancelled = false;          // Guarded by mutex.
    bool finished = false;           // Guarded by mutex.
  };

  WaitingCall(Registry& registry, const RequestTimer& timer, std::uint64_t session_id,
              Response* response)
      : registry_(registry),
        timer_(timer),
        session_id_(session_id),
        response_(response),
        shared_(std::make_shared<Shared>()) {
    shared_->reactor = this;
  }

  // The completion callback to hand the registry.
  std::function<void(Result<Response>)> Completion() {
    return [shared = shared_, &registry = registry_, timer = timer_,
            session_id = session_id_](Result<Response> result) {
      std::unique_lock lock(shared->mutex);
      if (shared->finished) return;
      shared->finished = true;
      timer.Finish(shared->cancelled ? StatusCode::kCancelled
                   : result          ? StatusCode::kOk
                                     : result.error().code());
      WaitingCall* reactor = shared->reactor;
      if (shared->cancelled || reactor == nullptr) {
        // `finished` is set: nothing else finishes the call, and OnDone (which ends the
        // reactor) runs only after the Finish below.
        lock.unlock();
        if (result) ReleaseLeases(registry, session_id, *result);
        // A call cancelled while the registry was completing its wait (its session closing,
        // say) still needs its Finish: gRPC runs OnDone, and lets a shutdown end, only after.
        if (reactor != nullptr) reactor->Finish(grpc::Status::CANCELLED);
        return;
      }
      if (result) {
        *reactor->response_ = std::move(*result);
        reactor->Finish(grpc::Status::OK);
      } else {
        reactor->Finish(ToGrpcStatus(result.error()));
      }
    };
  }

  // Hands the registry's wait id (0 when the call already completed) to a call that may
  // already be finished and gone: only the shared state is used.
  static void Attach(const std::shared_ptr<Shared>& shared, Registry& registry,
                     const RequestTimer& timer, std::uint64_t wait_id) {
    std::lock_guard lock(shared->mutex);
    if (shared->reactor == nullptr) return;
    shared->wait_id = wait_id;
    if (shared->cancelled && !shared->finished && wait_id != 0 && registry.CancelWait(wait_id)) {
      shared->finished = true;
      timer.Finish(StatusCode::kCancelled);
      shared->reactor->Finish(grpc::Status::CANCELLED);
    }
  }

  [[nodiscard]] const std::shared_ptr<Shared>& shared() const { return shared_; }

  void OnCancel() override {
    std::lock_guard lock(shared_->mutex);
    shared_->cancelled = true;
    if (!shared_->finished && shared_->wait_id != 0 && registry_.CancelWait(shared_->wait_id)) {
      shared_->finished = true;
      timer_.Finish(StatusCode::kCancelled);
      Finish(grpc::Status::CANCELLED);
    }
  }

  void OnDone() override {
    {
      std::lock_guard lock(shared_->mutex);
      shared_->reactor = nullptr;
    }
    delete this;
  }

 private:
  static void ReleaseLeases(Registry& registry, std::uint64_t session_id,
                            const v1::AcquireResponse& response) {
    v1::ReleaseRequest release;
    release.add_lease_ids(response.lease_id());
    (void)registry.Release(session_id, release);
  }
  static void ReleaseLeases(Registry& registry, std::uint64_t session_id,
                            const v1::BatchAcquireResponse& response) {
    v1::ReleaseRequest release;
    for (const auto& tensor : response.tensors()) release.add_lease_ids(tensor.lease_id());
    (void)registry.Release(session_id, release);
  }

  Registry& registry_;
  const RequestTimer timer_;
  const std::uint64_t session_id_;
  Response* const response_;
  std::shared_ptr<Shared> shared_;
};

// Starts a WaitingCall: `start(done)` calls the registry and returns its wait id.
template <typename Response, typename Start>
grpc::ServerUnaryReactor* StartWaiting(Registry& registry, const RequestTimer& timer,
                                       std::uint64_t session_id, Response* response, Start start) {
  auto* call = new WaitingCall<Response>(registry, timer, session_id, response);
  auto shared = call->shared();
  WaitingCall<Response>::Attach(shared, registry, timer, start(call->Completion()));
  // gRPC runs OnDone only after this handler returns, so `call` is still valid here.
  return call;
}

// Streams watch events. Events are queued by registry callbacks (in a WatchQueue, bounded
// in events and bytes) and written one at a time; a reader that falls behind a bound ends
// with the queue's RESOURCE_EXHAUSTED. `on_done` runs once, as the stream goes.
class WatchStream final : public grpc::ServerWriteReactor<v1::WatchEvent> {
 public:
  WatchStream(Registry& registry, std::string prefix, WatchQueue::Limits limits,
              const std::optional<PeerCredentials>& viewer, std::function<void()> on_done)
      : registry_(registry), queue_(limits), on_done_(std::move(on_done)) {
    v1::WatchEvent hello;
    hello.set_kind(v1::WatchEvent::KIND_WATCHING);
    hello.set_name(prefix);
    hello.set_daemon_epoch(registry.daemon_epoch());
    Push(std::move(hello));
    watch_id_ = registry_.Watch(
        std::move(prefix), [this](const v1::WatchEvent& event) { Push(event); },
        viewer ? &*viewer : nullptr);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mutex_);
    if (!ok || done_) {
      writing_ = false;
      return;
    }
    queue_.PopFront();
    if (queue_.empty()) {
      writing_ = false;
      return;
    }
    const v1::WatchEvent* next = &queue_.front();
    lock.unlock();
    StartWrite(next);
  }

  void OnCancel() override {
    registry_.Unwatch(watch_id_);
    std::lock_guard lock(mutex_);
    if (!done_) {
      done_ = true;
      Finish(grpc::Status::CANCELLED);
    }
  }

  void OnDone() override {
    registry_.Unwatch(watch_id_);
    if (on_done_) on_done_();
    delete this;
  }

 private:
  void Push(v1::WatchEvent event) {
    std::unique_lock lock(mutex_);
    if (done_) return;
    if (std::optional<Error> overflow = queue_.Push(std::move(event))) {
      done_ = true;
      queue_.DropAllButFront();  // Only the event being written, if any, is still sent.
      Finish(ToGrpcStatus(*overflow));
      return;
    }
    if (writing_) return;
    writing_ = true;
    const v1::WatchEvent* next = &queue_.front();
    lock.unlock();
    StartWrite(next);
  }

  Registry& registry_;
  std::uint64_t watch_id_ = 0;
  std::mutex mutex_;
  WatchQueue queue_;      // Guarded by mutex_; front() is being written.
  bool writing_ = false;  // Guarded by mutex_.
  bool done_ = false;     // Guarded by mutex_.
  const std::function<void()> on_done_;
};

// A Watch refused before it starts: it ends at once with `status`.
class RefusedWatch final : public grpc::ServerWriteReactor<v1::WatchEvent> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::Status ToGrpcStatus(const Error& error) {
  return {static_cast<grpc::StatusCode>(error.code()), error.message()};
}

template <typename Response, typename Serve>
grpc::ServerUnaryReactor* ExchangeService::ForSession(grpc::CallbackServerContext* context,
                                                      RequestMethod method, Response* response,
                                                      Serve serve) {
  const RequestTimer timer = Timer(method);
  const Result<std::uint64_t> session = SessionOf(context, registry_);
  if (!session) {
    return FinishWith<Response>(context, timer, std::unexpected(session.error()), response);
  }
  return serve(*session, timer);
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* ExchangeService::AnswerNow(
    grpc::CallbackServerContext* context, RequestMethod method, const Request& request,
    Response* response, Result<Response> (Registry::*call)(std::uint64_t, const Request&)) {
  return ForSession(
      context, method, response, [&](std::uint64_t session, const RequestTimer& timer) {
        return FinishWith(context, timer, (registry_.*call)(session, request), response);
      });
}

grpc::ServerUnaryReactor* ExchangeService::Allocate(grpc::CallbackServerContext* context,
                                                    const v1::AllocateRequest* request,
                                                    v1::AllocateResponse* response) {
  return AnswerNow(context, RequestMethod::kAllocate, *request, response, &Registry::Allocate);
}

grpc::ServerUnaryReactor* ExchangeService::CancelAllocation(
    grpc::CallbackServerContext* context, const v1::CancelAllocationRequest* request,
    v1::CancelAllocationResponse* response) {
  return AnswerNow(context, RequestMethod::kCancelAllocation, *request, response,
                   &Registry::CancelAllocation);
}

grpc::ServerUnaryReactor* ExchangeService::Publish(grpc::CallbackServerContext* context,
                                                   const v1::PublishRequest* request,
                                                   v1::PublishResponse* response) {
  return AnswerNow(context, RequestMethod::kPublish, *request, response, &Registry::Publish);
}

grpc::ServerUnaryReactor* ExchangeService::PublishBatch(grpc::CallbackServerContext* context,
                                                        const v1::PublishBatchRequest* request,
                                                        v1::PublishBatchResponse* response) {
  return AnswerNow(context, RequestMethod::kPublishBatch, *request, response,
                   &Registry::PublishBatch);
}

grpc::ServerUnaryReactor* ExchangeService::Acquire(grpc::CallbackServerContext* context,
                                                   const v1::AcquireRequest* request,
                                                   v1::AcquireResponse* response) {
  return ForSession(context, RequestMethod::kAcquire, response,
                    [&](std::uint64_t session, const RequestTimer& timer) {
                      return StartWaiting(registry_, timer, session, response, [&](auto done) {
                        return registry_.Acquire(session, *request, std::move(done));
                      });
                    });
}

grpc::ServerUnaryReactor* ExchangeService::BatchAcquire(grpc::CallbackServerContext* context,
                                                        const v1::BatchAcquireRequest* request,
                                                        v1::BatchAcquireResponse* response) {
  return ForSession(context, RequestMethod::kBatchAcquire, response,
                    [&](std::uint64_t session, const RequestTimer& timer) {
                      return StartWaiting(registry_, timer, session, response, [&](auto done) {
                        return registry_.BatchAcquire(session, *request, std::move(done));
                      });
                    });
}

grpc::ServerUnaryReactor* ExchangeService::Release(grpc::CallbackServerContext* context,
                                                   const v1::ReleaseRequest* request,
                                                   v1::ReleaseResponse* response) {
  return AnswerNow(context, RequestMethod::kRelease, *request, response, &Registry::Release);
}

grpc::ServerUnaryReactor* ExchangeService::Delete(grpc::CallbackServerContext* context,
                                                  const v1::DeleteRequest* request,
                                                  v1::DeleteResponse* response) {
  return AnswerNow(context, RequestMethod::kDelete, *request, response, &Registry::Delete);
}

grpc::ServerUnaryReactor* ExchangeService::List(grpc::CallbackServerContext* context,
                                                const v1::ListRequest* request,
                                                v1::ListResponse* response) {
  const RequestTimer timer = Timer(RequestMethod::kList);
  const std::optional<PeerCredentials> viewer = ViewerOf(context, registry_);
  return FinishWith(context, timer, registry_.List(*request, viewer ? &*viewer : nullptr),
                    response);
}

grpc::ServerUnaryReactor* ExchangeService::Describe(grpc::CallbackServerContext* context,
                                                    const v1::DescribeRequest* request,
                                                    v1::DescribeResponse* response) {
  const RequestTimer timer = Timer(RequestMethod::kDescribe);
  const std::optional<PeerCredentials> viewer = ViewerOf(context, registry_);
  return FinishWith(context, timer, registry_.Describe(*request, viewer ? &*viewer : nullptr),
                    response);
}

ExchangeService::ExchangeService(Registry& registry, Options options)
    : registry_(registry),
      options_(std::move(options)),
      watchers_(PeerCounts::Limits{.max_total = options_.max_watchers,
                                   .max_per_peer = options_.max_watchers_per_uid,
                                   .total_setting = "max_watchers",
                                   .per_peer_setting = "max_watchers_per_uid",
                                   .what = "Watch streams"}) {}

std::size_t ExchangeService::watcher_count() const {
  std::lock_guard lock(watchers_mutex_);
  return watchers_.total();
}

grpc::ServerWriteReactor<v1::WatchEvent>* ExchangeService::Watch(
    grpc::CallbackServerContext* context, const v1::WatchRequest* request) {
  const RequestTimer timer = Timer(RequestMethod::kWatch);
  const std::optional<PeerCredentials> viewer = ViewerOf(context, registry_);
  // The connection's uid, which the kernel vouches for; on TCP, the session's, if any.
  std::optional<PeerKey> connection;
  if (options_.connection_peer) connection = options_.connection_peer(context->peer());
  PeerKey watcher = connection.value_or(std::nullopt);
  if (!watcher && viewer) watcher = viewer->uid;
  std::optional<Error> refusal;
  {
    std::lock_guard lock(watchers_mutex_);
    refusal = watchers_.TryAdd(watcher);
  }
  if (refusal) {
    timer.Finish(refusal->code());
    return new RefusedWatch(ToGrpcStatus(*refusal));
  }
  auto* stream = new WatchStream(
      registry_, request->prefix(),
      {.max_events = options_.watch_queue_length, .max_bytes = options_.watch_queue_bytes}, viewer,
      [this, watcher] {
        std::lock_guard lock(watchers_mutex_);
        watchers_.Remove(watcher);
      });
  timer.Finish(StatusCode::kOk);  // A stream is counted as it starts.
  return stream;
}

grpc::ServerUnaryReactor* ExchangeService::Stats(grpc::CallbackServerContext* context,
                                                 const v1::StatsRequest* /*request*/,
                                                 v1::StatsResponse* response) {
  const RequestTimer timer = Timer(RequestMethod::kStats);
  return FinishWith(context, timer, Result<v1::StatsResponse>(registry_.Stats()), response);
}

}  // namespace hurray::daemon
