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

#include "device/device_memory_mapper.h"
#include "device/device_slab_cache.h"
#include "hurray/error.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "session_connection.h"

namespace hurray::client_internal {

// A whole segment mapped into this process; unmapped in the destructor. Immutable;
// thread-safe.
class Mapping {
 public:
  // `sealed`: a sealed pool's memfd (one buffer), which the connection does not cache.
  Mapping(void* base, std::uint64_t size, bool writable, bool sealed)
      : base_(base), size_(size), writable_(writable), sealed_(sealed) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  [[nodiscard]] std::byte* base() const { return static_cast<std::byte*>(base_); }
  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] bool writable() const { return writable_; }
  [[nodiscard]] bool sealed() const { return sealed_; }

 private:
  void* base_;
  std::uint64_t size_;
  bool writable_;
  bool sealed_;
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
  // `max_mapped_device_bytes`: Client::Options' cap on the CUDA slabs kept mapped.
  [[nodiscard]] static Result<std::shared_ptr<Connection>> Open(
      std::string socket_path, std::string_view client_name, bool use_session_socket,
      std::uint64_t max_mapped_device_bytes = 0);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The exchange's hot path, over the session socket or gRPC (see Open). Acquires that
  // wait always go through gRPC.
  [[nodiscard]] Result<v1::AllocateResponse> Allocate(const v1::AllocateRequest& request);
  [[nodiscard]] Result<v1::PublishResponse> Publish(const v1::PublishRequest& request);
  // On the session socket when the hot path goes there and both the request and its
  // largest reply fit one frame; otherwise through gRPC. RESOURCE_EXHAUSTED naming the
  // request's size when gRPC refuses it as too large too.
  [[nodiscard]] Result<v1::PublishBatchResponse> PublishBatch(
      const v1::PublishBatchRequest& request);
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
  // Read-only mappings come from O_RDONLY descriptors: the kernel refuses writes. A sealed
  // pool's segment (one buffer's memfd) is mapped anew on each call and never cached: its
  // mapping lives as long as the tensor or view that holds it, so that a producer's
  // writable mapping can end before its publish (the daemon refuses to seal a memfd that
  // is still mapped writable) and a consumer's ends with its lease.
  [[nodiscard]] Result<std::shared_ptr<Mapping>> MapSegment(std::uint64_t segment_id,
                                                            bool writable);

  // This process's CUDA slabs, their cache made on first use over the CUDA driver.
  // FAILED_PRECONDITION saying why when this process has no usable driver (the next call
  // tries again).
  [[nodiscard]] Result<DeviceSlabCache*> DeviceSlabs();

  // The device address of `fence`'s word, for device `device_ordinal` (and every other):
  // its fence segment mapped (read-write when `writable`) as MapSegment does, and
  // registered with the driver once per mapping for the life of the connection. INTERNAL for a
  // fence outside its segment or not 8-aligned; DeviceSlabs' errors; the driver's.
  [[nodiscard]] Result<DeviceAddress> FenceDeviceAddress(const v1::Fence& fence, bool writable,
                                                         int device_ordinal);
  // The fence word in this process's read-only mapping of its segment, for host reads.
  // INTERNAL for a fence outside its segment or not 8-aligned; MapSegment's errors.
  [[nodiscard]] Result<const std::uint64_t*> FenceWord(const v1::Fence& fence);

 private:
  Connection(std::string socket_path, std::unique_ptr<client::SessionConnection> session,
             std::shared_ptr<grpc::Channel> channel, bool use_session_socket,
             std::uint64_t max_mapped_device_bytes);

  // The mapping of `fence`'s segment and the word's offset in it, checked.
  Result<std::pair<std::shared_ptr<Mapping>, std::uint64_t>> MapFence(const v1::Fence& fence,
                                                                      bool writable);

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

  const std::uint64_t max_mapped_device_bytes_;
  std::mutex device_mutex_;
  // Made by DeviceSlabs. Guarded by device_mutex_ (the cache itself is thread-safe).
  std::unique_ptr<DeviceSlabCache> device_slabs_;
  // Mapping of a fence segment -> the device address of its base: registered once,
  // portable (for every device and context of the process). Guarded by device_mutex_.
  std::map<const Mapping*, DeviceAddress> registrations_;
};

}  // namespace hurray::client_internal
