// Connection: what a Client, its tensors and its views share — the session socket, the
// gRPC channel, and the per-process cache of segment mappings. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "hurray/error.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "session_connection.h"

namespace hurray::client_internal {

// A whole segment mapped into this process; unmapped in the destructor. Immutable;
// thread-safe.
class Mapping {
 public:
  Mapping(void* base, std::uint64_t size, bool writable)
      : base_(base), size_(size), writable_(writable) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  [[nodiscard]] std::byte* base() const { return static_cast<std::byte*>(base_); }
  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] bool writable() const { return writable_; }

 private:
  void* base_;
  std::uint64_t size_;
  bool writable_;
};

// Fills this process's page tables for [data, data + size) of a mapping, so that reading it
// takes no page faults: madvise(MADV_POPULATE_READ) on the pages the range touches. Advice:
// without kernel support (before Linux 5.14: EINVAL, remembered for the process) or when
// the kernel declines, it does nothing, and reads fault as usual. Thread-safe.
void PopulateForReading(const std::byte* data, std::uint64_t size);

// The gRPC status of a call, as an Error with the same code and message.
[[nodiscard]] Error FromGrpcStatus(const grpc::Status& status, std::string_view call);

class Connection {
 public:
  // `use_session_socket`: send the hot path (allocate, publish, acquire without a wait,
  // release, cancel) over the session socket rather than gRPC.
  [[nodiscard]] static Result<std::shared_ptr<Connection>> Open(std::string socket_path,
                                                                std::string_view client_name,
                                                                bool use_session_socket);

  // The exchange's hot path, over the session socket or gRPC (see Open). Acquires that
  // wait always go through gRPC.
  [[nodiscard]] Result<v1::AllocateResponse> Allocate(const v1::AllocateRequest& request);
  [[nodiscard]] Result<v1::PublishResponse> Publish(const v1::PublishRequest& request);
  [[nodiscard]] Result<v1::AcquireResponse> Acquire(const v1::AcquireRequest& request);
  [[nodiscard]] Result<v1::ReleaseResponse> Release(const v1::ReleaseRequest& request);
  [[nodiscard]] Result<v1::CancelAllocationResponse> CancelAllocation(
      const v1::CancelAllocationRequest& request);

  // A context for a session call: carries the session token as metadata.
  [[nodiscard]] std::unique_ptr<grpc::ClientContext> SessionContext() const;

  [[nodiscard]] v1::Exchange::Stub& stub() const { return *stub_; }
  [[nodiscard]] std::uint64_t session_id() const { return session_->session_id(); }
  [[nodiscard]] std::uint64_t daemon_epoch() const { return session_->daemon_epoch(); }
  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }

  // The mapping of a segment, made on first use and cached for the life of the connection.
  // Read-only mappings come from O_RDONLY descriptors: the kernel refuses writes.
  [[nodiscard]] Result<std::shared_ptr<Mapping>> MapSegment(std::uint64_t segment_id,
                                                            bool writable);

 private:
  Connection(std::string socket_path, std::unique_ptr<client::SessionConnection> session,
             std::shared_ptr<grpc::Channel> channel, bool use_session_socket);

  // One hot-path call: on the session socket as request body `request_body` answered by
  // `reply_body`, or as the gRPC rpc `rpc`.
  template <typename Request, typename Response>
  Result<Response> Call(const Request& request, Request* (v1::SessionMessage::*request_body)(),
                        Response* (v1::SessionMessage::*reply_body)(),
                        v1::SessionMessage::BodyCase reply_case,
                        grpc::Status (v1::Exchange::Stub::*rpc)(grpc::ClientContext*,
                                                                const Request&, Response*),
                        std::string_view name, bool session_socket);

  const std::string socket_path_;
  const bool use_session_socket_;
  std::unique_ptr<client::SessionConnection> session_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Exchange::Stub> stub_;

  std::mutex mutex_;
  // (segment id, writable) -> mapping. Guarded by mutex_.
  std::map<std::pair<std::uint64_t, bool>, std::shared_ptr<Mapping>> mappings_;
};

}  // namespace hurray::client_internal
