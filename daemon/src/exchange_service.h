// ExchangeService: the gRPC face of the registry (hurray.v1.Exchange, callback API).
//
// A thin adapter: it reads the session token from the `x-hurray-session` metadata,
// calls the Registry, and turns its Result into a gRPC status. Each call is recorded in
// Options::request_metrics (channel "grpc") with its status code and its time from arrival
// to answer (an Acquire's wait included; a Watch as its stream starts). Thread-safe; holds no lock
// across a registry call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <mutex>
#include <optional>
#include <string_view>

#include "hurray/ipc/session_protocol.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "metrics/request_metrics.h"
#include "peer_counts.h"
#include "registry/registry.h"

namespace hurray::daemon {

// The gRPC status of an error: the same canonical code, the same message.
[[nodiscard]] grpc::Status ToGrpcStatus(const Error& error);

class ExchangeService final : public v1::Exchange::CallbackService {
 public:
  struct Options {
    // Most events, and bytes of them (WatchQueue), a Watch stream may have queued for a slow
    // reader; one more ends the stream with RESOURCE_EXHAUSTED naming the setting.
    std::size_t watch_queue_length = 65'536;
    std::size_t watch_queue_bytes = std::size_t{1} << 20;
    // Most Watch streams at once, overall and per uid (PeerCounts; 0: no limit). A Watch
    // beyond them ends at once with RESOURCE_EXHAUSTED naming the cap. A stream is charged
    // to the uid of its connection (connection_peer); on TCP, to its session's uid when its
    // metadata names one, else to the TCP clients together.
    std::size_t max_watchers = 256;
    std::size_t max_watchers_per_uid = 32;
    // Whom the connection of a call's peer (ServerContext::peer()) is charged to
    // (GrpcListener::PeerOf); null, or nullopt for a peer it does not know: the session's
    // uid or the TCP clients, as above.
    std::function<std::optional<PeerKey>(std::string_view peer)> connection_peer;
    // Where calls are counted and timed; null: nowhere. Must outlive the service.
    RequestMetrics* request_metrics = nullptr;
  };

  // `registry` must outlive the service; the service must outlive every call it serves
  // (the gRPC server's Shutdown and destruction come first).
  ExchangeService(Registry& registry, Options options);

  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* context,
                                     const v1::AllocateRequest* request,
                                     v1::AllocateResponse* response) override;
  grpc::ServerUnaryReactor* CancelAllocation(grpc::CallbackServerContext* context,
                                             const v1::CancelAllocationRequest* request,
                                             v1::CancelAllocationResponse* response) override;
  grpc::ServerUnaryReactor* Publish(grpc::CallbackServerContext* context,
                                    const v1::PublishRequest* request,
                                    v1::PublishResponse* response) override;
  grpc::ServerUnaryReactor* PublishBatch(grpc::CallbackServerContext* context,
                                         const v1::PublishBatchRequest* request,
                                         v1::PublishBatchResponse* response) override;
  grpc::ServerUnaryReactor* Acquire(grpc::CallbackServerContext* context,
                                    const v1::AcquireRequest* request,
                                    v1::AcquireResponse* response) override;
  grpc::ServerUnaryReactor* BatchAcquire(grpc::CallbackServerContext* context,
                                         const v1::BatchAcquireRequest* request,
                                         v1::BatchAcquireResponse* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const v1::DeleteRequest* request,
                                   v1::DeleteResponse* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListRequest* request,
                                 v1::ListResponse* response) override;
  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* context,
                                     const v1::DescribeRequest* request,
                                     v1::DescribeResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchEvent>* Watch(grpc::CallbackServerContext* context,
                                                  const v1::WatchRequest* request) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const v1::StatsRequest* request,
                                  v1::StatsResponse* response) override;

  // Watch streams open now.
  [[nodiscard]] std::size_t watcher_count() const;

 private:
  [[nodiscard]] RequestTimer Timer(RequestMethod method) const {
    return {options_.request_metrics, RequestChannel::kGrpc, method};
  }
  // What every call of a session does first: times it as `method` and finds the session
  // that the call's metadata names, finishing the call UNAUTHENTICATED without one; then
  // `serve(session_id, timer)` serves it.
  template <typename Response, typename Serve>
  grpc::ServerUnaryReactor* ForSession(grpc::CallbackServerContext* context, RequestMethod method,
                                       Response* response, Serve serve);
  // A call of a session that the registry's `call` answers at once.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* AnswerNow(grpc::CallbackServerContext* context, RequestMethod method,
                                      const Request& request, Response* response,
                                      Result<Response> (Registry::*call)(std::uint64_t,
                                                                         const Request&));

  Registry& registry_;
  const Options options_;
  mutable std::mutex watchers_mutex_;
  PeerCounts watchers_;  // Guarded by watchers_mutex_.
};

}  // namespace hurray::daemon
