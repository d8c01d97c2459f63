// The hurray C++ client: exchange tensors with other processes through hurrayd, zero-copy.
//
//   auto client = hurray::Client::Connect().value();
//   auto tensor = client->Allocate(*hurray::TensorDescriptor::Dense(kFloat32, {1024})).value();
//   std::span<std::byte> bytes = tensor.buffer(0);   // write in place
//   tensor.Publish("model/embedding").value();
//
//   auto view = client->Acquire("model/embedding").value();  // in another process
//   std::span<const std::byte> same = view.buffer(0);          // the same memory, read-only
//
//   auto weights = client->BatchAcquire({}, "model/").value();  // every tensor under model/
//   ... read weights[i].buffer(0) ...
//   // Dropping `weights` ends all its leases in one request.
//
// Client is thread-safe. WritableTensor, TensorView and TensorViewBatch are move-only values
// for one thread at a time; each keeps the client's connection alive while it exists.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/tensor_descriptor.h"

namespace hurray {

namespace v1 {
class AcquireResponse;
class ListResponse;
class DescribeResponse;
class StatsResponse;
class WatchEvent;
}  // namespace v1

namespace client_internal {
class Connection;
class Mapping;
}  // namespace client_internal

// A tensor published by this process: its name and the version the publish created.
struct PublishedTensor {
  std::string name;
  std::uint64_t version = 0;
};

// A tensor this process is writing: buffers allocated in a daemon pool, mapped read-write.
// Publish it, or Cancel it; dropping it unpublished cancels it.
class WritableTensor {
 public:
  WritableTensor(WritableTensor&&) noexcept;
  WritableTensor& operator=(WritableTensor&&) noexcept;
  ~WritableTensor();

  [[nodiscard]] const TensorDescriptor& descriptor() const;
  [[nodiscard]] std::size_t buffer_count() const;
  // Buffer `index` (in the descriptor's buffer table), writable; empty for an empty buffer.
  // Valid until Publish or Cancel.
  [[nodiscard]] std::span<std::byte> buffer(std::size_t index) const;
  [[nodiscard]] std::uint64_t allocation_id() const;

  // Publishes under `name` ("namespace/name"), producer-synced: every byte must be written
  // before the call. The tensor is immutable afterwards and this object becomes empty.
  [[nodiscard]] Result<PublishedTensor> Publish(std::string_view name);

  // Frees the allocation. This object becomes empty.
  [[nodiscard]] Status Cancel();

 private:
  friend class Client;
  struct State;
  explicit WritableTensor(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A leased, read-only view of a published tensor. The memory is the producer's, mapped
// read-only: a write faults. The lease ends in the destructor (or Release), after which the
// daemon may reuse the memory. A released or moved-from view is empty: only Release, the
// destructor and assignment may be called on it. To end many leases in one request, see
// Client::Release and TensorViewBatch.
class TensorView {
 public:
  TensorView(TensorView&&) noexcept;
  TensorView& operator=(TensorView&&) noexcept;
  ~TensorView();

  [[nodiscard]] const std::string& name() const;
  [[nodiscard]] std::uint64_t version() const;
  [[nodiscard]] const TensorDescriptor& descriptor() const;
  [[nodiscard]] std::size_t buffer_count() const;
  // Buffer `index` (in the descriptor's buffer table); empty for an empty buffer.
  [[nodiscard]] std::span<const std::byte> buffer(std::size_t index) const;
  [[nodiscard]] std::uint64_t lease_id() const;
  // The daemon epoch the lease was granted in.
  [[nodiscard]] std::uint64_t daemon_epoch() const;

  // Ends the lease now; the spans are invalid afterwards. Also done by the destructor.
  // An empty view: OK, nothing to do. The view is empty afterwards, even on error.
  [[nodiscard]] Status Release();

  // False once released or moved from.
  [[nodiscard]] bool holds_lease() const { return state_ != nullptr; }

 private:
  friend class Client;
  friend class TensorViewBatch;
  struct State;
  explicit TensorView(std::unique_ptr<State> state);
  // Maps an acquired tensor (populating its page tables when `populate`); the lease is the
  // caller's to release on failure.
  static Result<TensorView> FromResponse(
      const std::shared_ptr<client_internal::Connection>& connection,
      const v1::AcquireResponse& response, bool populate);
  // INVALID_ARGUMENT naming the first view that holds a lease of another connection than
  // `connection`; OK when there is none. Changes nothing.
  static Status CheckAllOf(const client_internal::Connection& connection,
                           std::span<const TensorView> views);
  // Ends the leases of every view that holds one (each of them `connection`'s, as
  // CheckAllOf checked) in as few requests as Client::Release promises. Every view is empty
  // afterwards, whatever the outcome.
  static Status ReleaseAll(client_internal::Connection& connection, std::span<TensorView> views);
  std::unique_ptr<State> state_;
};

// The views of one BatchAcquire, whose leases end together: the destructor (or Release)
// ends every lease the batch still holds in one request (a few above
// Client::kMaxLeasesPerRelease views), where dropping as many single views sends one
// request each. A view can be read in place (batch[i].buffer(0)), released on its own, or
// moved out of the batch (it then ends its lease itself); the batch skips the empty views
// that leaves behind. Move-only; for one thread at a time.
class TensorViewBatch {
 public:
  TensorViewBatch(TensorViewBatch&&) noexcept;
  // Releases this batch's views first, as the destructor does.
  TensorViewBatch& operator=(TensorViewBatch&&) noexcept;
  ~TensorViewBatch();

  // The views, in BatchAcquire's order: listed names first, then prefix matches.
  [[nodiscard]] std::size_t size() const { return views_.size(); }
  [[nodiscard]] bool empty() const { return views_.empty(); }
  [[nodiscard]] TensorView& operator[](std::size_t index) { return views_[index]; }
  [[nodiscard]] const TensorView& operator[](std::size_t index) const { return views_[index]; }
  [[nodiscard]] std::span<TensorView> views() { return views_; }
  [[nodiscard]] std::span<const TensorView> views() const { return views_; }
  [[nodiscard]] std::vector<TensorView>::iterator begin() { return views_.begin(); }
  [[nodiscard]] std::vector<TensorView>::iterator end() { return views_.end(); }
  [[nodiscard]] std::vector<TensorView>::const_iterator begin() const { return views_.begin(); }
  [[nodiscard]] std::vector<TensorView>::const_iterator end() const { return views_.end(); }

  // Ends every lease the batch still holds, as Client::Release does, and empties the batch
  // (size() 0). INVALID_ARGUMENT, changing nothing, when a view of another client was
  // moved into the batch; the destructor then releases each view on its own client.
  [[nodiscard]] Status Release();
  // Release, ignoring its outcome (as the destructor does); the batch is empty afterwards.
  void clear();

 private:
  friend class Client;
  TensorViewBatch(std::shared_ptr<client_internal::Connection> connection,
                  std::vector<TensorView> views);
  std::shared_ptr<client_internal::Connection> connection_;
  std::vector<TensorView> views_;
};

struct AcquireOptions {
  // 0: the latest version.
  std::uint64_t version = 0;
  // How long to wait for the tensor to be published; 0 answers at once.
  std::chrono::milliseconds wait{0};
  // Fill this process's page tables for the tensor's bytes inside Acquire, with
  // madvise(MADV_POPULATE_READ) on each buffer's range, so that the first read of the data
  // takes no page faults (without it, a first read of a 4 KiB-page pool faults about once
  // per 64 KiB). It costs time proportional to the tensor's size inside Acquire, so it
  // pays when the whole tensor will be read soon after. Only the tensor's own pages are
  // populated, never the rest of its segment. Advice, not a promise: on kernels before
  // Linux 5.14 (no MADV_POPULATE_READ) or when the kernel declines, Acquire quietly does
  // without, and reads fault as usual.
  bool populate = false;
};

// A running watch; destroying it stops the stream.
class WatchHandle {
 public:
  virtual ~WatchHandle() = default;
};

class Client {
 public:
  struct Options {
    // The daemon's gRPC socket; empty: $HURRAY_SOCKET or the default (hurray/socket_path.h).
    std::string socket_path;
    // Shown in the daemon's logs.
    std::string client_name = "hurray-client";
    // Which channel carries allocate, publish, acquire (without a wait), release and
    // cancel: the session socket (the default: no gRPC round trip on the hot path) or gRPC.
    // Both give the same results; everything else always uses gRPC.
    enum class HotPath { kSessionSocket, kGrpc };
    HotPath hot_path = HotPath::kSessionSocket;
  };

  // Opens the session socket (the session lives as long as the client) and the gRPC
  // channel. UNAVAILABLE when no daemon listens.
  [[nodiscard]] static Result<std::unique_ptr<Client>> Connect(Options options);
  [[nodiscard]] static Result<std::unique_ptr<Client>> Connect();
  ~Client();

  // Allocates the descriptor's buffers in `pool` and maps them read-write.
  [[nodiscard]] Result<WritableTensor> Allocate(const TensorDescriptor& descriptor,
                                                std::string_view pool = "cpu");

  // Leases a published tensor and maps it read-only (segments are mapped once per process
  // and cached). NOT_FOUND, or DEADLINE_EXCEEDED after options.wait.
  [[nodiscard]] Result<TensorView> Acquire(std::string_view name, AcquireOptions options = {});

  // Leases every listed name and every name under `prefix` (when not empty): all or none.
  // The leases end together when the batch is dropped (see TensorViewBatch).
  [[nodiscard]] Result<TensorViewBatch> BatchAcquire(
      const std::vector<std::string>& names, std::string_view prefix = {},
      std::chrono::milliseconds wait = std::chrono::milliseconds(0));

  // Most lease ids one release request carries. Client::Release and TensorViewBatch split
  // larger sets into requests of this many: each stays far below the session socket's
  // 1 MiB frame and gRPC's 4 MiB message (a lease id takes at most 11 bytes), and the
  // daemon's registry is held for a bounded time per request.
  static constexpr std::size_t kMaxLeasesPerRelease = 10000;

  // Ends the leases of many views in one request (ceil(n / kMaxLeasesPerRelease) for n
  // views), where releasing each view sends one. Empty views (released or moved from) are
  // skipped, as TensorView::Release does with them. INVALID_ARGUMENT, before anything is
  // sent, when a view was acquired through another Client: nothing is released and every
  // view is as it was. Otherwise every view is empty afterwards, even on error: the
  // daemon's error (or UNAVAILABLE once the session is gone, which ended every lease
  // anyway) is returned, and a lease the daemon did not know (NOT_FOUND) does not keep the
  // others of its request from being released.
  [[nodiscard]] Status Release(std::span<TensorView> views);

  // Deletes a name's versions (all, or one). Returns how many.
  [[nodiscard]] Result<std::uint32_t> Delete(std::string_view name, std::uint64_t version = 0);

  [[nodiscard]] Result<v1::ListResponse> List(std::string_view prefix = {},
                                              std::uint32_t page_size = 0,
                                              std::string_view page_token = {});
  [[nodiscard]] Result<v1::DescribeResponse> Describe(std::string_view name,
                                                      std::uint64_t version = 0);
  [[nodiscard]] Result<v1::StatsResponse> Stats();

  // Calls `on_event` (on a client thread) for every publish and delete under `prefix`
  // until the handle is destroyed; `on_end` runs once when the stream ends (error or
  // stop). Returns once the daemon confirmed the watch.
  [[nodiscard]] Result<std::unique_ptr<WatchHandle>> Watch(
      std::string_view prefix, std::function<void(const v1::WatchEvent&)> on_event,
      std::function<void(const Status&)> on_end = {});

  [[nodiscard]] std::uint64_t session_id() const;
  [[nodiscard]] std::uint64_t daemon_epoch() const;
  [[nodiscard]] const std::string& socket_path() const;

 private:
  explicit Client(std::shared_ptr<client_internal::Connection> connection);
  std::shared_ptr<client_internal::Connection> connection_;
};

}  // namespace hurray
