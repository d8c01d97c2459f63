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
//
// Errors are canonical codes (hurray/error.h); each call below says which it returns and
// when. Besides those, any call that reaches the daemon returns UNAVAILABLE while no daemon
// serves, UNAUTHENTICATED when the daemon no longer knows this client's session, and
// INTERNAL (or INVALID_ARGUMENT, "daemon sent ...") for a reply this client cannot use: a
// daemon of another protocol version, or a bug on one side.
//
// Daemon restarts: the session lives as long as the daemon that granted it. When the
// daemon stops or restarts (a new daemon_epoch), the client notices (its session socket
// hung up) and re-establishes a session by itself on its next call, which then goes on as
// usual: no new Client is needed, and session_id() and daemon_epoch() change. A call in
// flight when the daemon died fails with UNAVAILABLE naming the restart (whether it took
// effect is unknown); while no daemon serves, calls fail with UNAVAILABLE and each tries
// again. The old session's leases and unpublished allocations end with it: a
// WritableTensor of the old epoch can no longer be published (UNAVAILABLE naming the
// restart), and releasing a view of the old epoch answers UNAVAILABLE (its lease ended
// anyway). Tensors the restarted daemon serves again (CPU tensors it kept) are acquired
// anew. The client's segment mappings cache starts afresh in the new epoch, but views and
// tensors of the old epoch keep their own mappings: their buffers stay readable (and a
// WritableTensor's writable) until they are dropped, even though the daemon has forgotten
// their leases. Their bytes stay the tensor's only for versions the restarted daemon serves
// again (the latest of each name): the memory of a version that was superseded or deleted
// before the restart, which only the lost lease kept, may be reused by the new daemon, so
// re-acquire after a restart rather than keep reading such a view. Ready and WaitOn of a CUDA view
// of the old epoch whose data was not ready at acquire answer UNAVAILABLE: GPU tensors do not
// survive a restart.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/export.h"
#include "hurray/inspection.h"
#include "hurray/tensor_descriptor.h"

namespace hurray {

namespace client_internal {
class Connection;
class FastPath;
class TensorCache;
class TensorViewAccess;
}  // namespace client_internal

// A CUDA stream of this process (a CUstream or cudaStream_t, which are the same pointer);
// nullptr is the device's legacy default stream. hurray.h-style opaque, so that this header
// needs no CUDA headers.
using CudaStream = void*;

// Where a tensor's buffers live, as a DLPack consumer (PyTorch, CuPy, JAX) needs it.
struct DeviceInfo {
  DeviceTag device_tag = DeviceTag::Cpu();
  // CUDA pools: this process's CUDA ordinal of the pool's GPU, found by its UUID (so it is
  // right whatever this process's CUDA_VISIBLE_DEVICES is); 0 for CPU.
  int device_ordinal = 0;
  // CUDA pools: "GPU-<uuid>" (or "MIG-<uuid>"), as PoolStats.device_uuid; empty for CPU.
  std::string device_uuid;

  // DLPack's DLDeviceType: kDLCPU (1) or kDLCUDA (2).
  [[nodiscard]] int dlpack_device_type() const { return device_tag == DeviceTag::Cpu() ? 1 : 2; }
};

// A tensor published by this process: its name and the version the publish created.
struct PublishedTensor {
  std::string name;
  std::uint64_t version = 0;
};

// How a tensor is published (WritableTensor::Publish, PublishAfter).
struct PublishOptions {
  // The daemon may evict the version to make room when an allocation in its pool would
  // otherwise fail: least recently used (published or acquired) first, never while any
  // lease on it is held, only while it is the latest version of its name. An evicted
  // version is gone as if deleted (watchers see WatchEvent::Kind::kEvicted).
  bool evictable = false;
};

struct PublishedAndNext;

// A tensor this process is writing: buffers allocated in a daemon pool, mapped read-write.
// Publish it, or Cancel it; dropping it unpublished cancels it.
class HURRAY_CXX_EXPORT WritableTensor {
 public:
  WritableTensor(WritableTensor&&) noexcept;
  WritableTensor& operator=(WritableTensor&&) noexcept;
  ~WritableTensor();

  [[nodiscard]] const TensorDescriptor& descriptor() const;
  [[nodiscard]] std::size_t buffer_count() const;
  // Buffer `index` (in the descriptor's buffer table), writable; empty for an empty buffer.
  // Valid until Publish or Cancel. Host memory only: empty for a buffer of a CUDA pool
  // (see data()).
  [[nodiscard]] std::span<std::byte> buffer(std::size_t index) const;
  // The address of buffer `index` in this process: a host address for a CPU pool, a device
  // address (a CUdeviceptr, valid in every context of device().device_ordinal) for a CUDA
  // pool; null for an empty buffer.
  [[nodiscard]] void* data(std::size_t index) const;
  // Where the buffers live.
  [[nodiscard]] const DeviceInfo& device() const;
  [[nodiscard]] std::uint64_t allocation_id() const;
  // Whether the buffers live in a sealed pool's memfds, which Publish unmaps (see below).
  [[nodiscard]] bool sealed() const;

  // Publishes under `name` ("namespace/name"), producer-synced: every byte must be written
  // before the call. The tensor is immutable afterwards and this object becomes empty.
  // INVALID_ARGUMENT naming the rule a bad name breaks; FAILED_PRECONDITION when this
  // object is empty (already published or cancelled); NOT_FOUND when the daemon no longer
  // holds the allocation. On error the tensor is still this object's (publish again, or
  // cancel).
  //
  // In a sealed pool ("sealed"), Publish first unmaps the buffers (buffer() and data() are
  // empty from then on, even when the publish is refused), and the daemon seals each
  // buffer's memfd against writes: the kernel refuses every write afterwards, from any
  // process. FAILED_PRECONDITION "buffer I: segment N still has a writable mapping; unmap
  // it before publishing" while some other writable mapping of a buffer remains (a forked
  // child's, a copy made with mremap).
  [[nodiscard]] Result<PublishedTensor> Publish(std::string_view name,
                                                const PublishOptions& options = {});

  // Publishes as Publish does, then allocates the next tensor of this one's descriptor in its
  // pool, as Client::Allocate would, in the same round trip: a producer that streams
  // tensors of one shape pays one round trip per tensor instead of two.
  //
  //   auto tensor = client->Allocate(descriptor).value();
  //   for (int i = 0; i < n; ++i) {
  //     Fill(tensor);
  //     if (i + 1 == n) { tensor.Publish("cam/frame").value(); break; }
  //     tensor = std::move(tensor.PublishAndAllocate("cam/frame").value().next.value());
  //   }
  //
  // Publish's errors, after which nothing was allocated and the tensor is still this
  // object's. Once the publish took effect, the call succeeds and `next` holds the new
  // tensor or Allocate's error (RESOURCE_EXHAUSTED when the pool or a quota has no room):
  // the publish is not undone. A daemon that does not make the allocation itself (an older
  // release) gets a second call.
  [[nodiscard]] Result<PublishedAndNext> PublishAndAllocate(std::string_view name,
                                                            const PublishOptions& options = {});

  // Publishes under `name` with an Event handoff, without waiting for the GPU: enqueues on
  // `stream` (a stream of this tensor's device, in this process) the signal of the
  // allocation's fence after the work already queued there, then publishes. Consumers make
  // their own streams wait for that signal (TensorView::WaitOn); no host ever blocks.
  // FAILED_PRECONDITION when the allocation has no fence (its buffers do not all declare
  // SyncMode::kEvent, or its pool is not a CUDA pool) or is empty; the CUDA error of
  // enqueuing the signal; otherwise Publish's errors. On error the tensor is still this
  // object's; a signal already enqueued is harmless (the fence is this allocation's alone).
  // The tensor lives on only if the GPU reaches the fence while this client's session
  // lasts: closing the Client waits for that (Client::Options::own_fence_wait, 10 s by
  // default); a process killed before it loses the tensor (consumers get DATA_LOSS or
  // NOT_FOUND). This process keeps the buffers' device mappings until `stream` has passed
  // the signal: its kernels never write memory unmapped under them.
  [[nodiscard]] Result<PublishedTensor> PublishAfter(std::string_view name, CudaStream stream,
                                                     const PublishOptions& options = {});

  // Frees the allocation. This object becomes empty, even on error. An empty object: OK,
  // nothing to do. NOT_FOUND when the daemon no longer holds the allocation.
  [[nodiscard]] Status Cancel();
  // Cancel, in stream order: the allocation is freed once the work queued on `stream` (a
  // stream of this tensor's device, in this process; null: the legacy stream) so far is done,
  // so that kernels still writing into the buffers never write memory handed to another
  // tensor. Returns at once; this object becomes empty. The daemon's answer is not reported.
  // Host memory: Cancel. The CUDA error of enqueuing the point in the stream (the tensor is
  // then still this object's). A stream whose context fails never gets there: the
  // allocation is then freed with the session.
  [[nodiscard]] Status CancelAfter(CudaStream stream);

 private:
  friend class Client;
  struct State;
  HURRAY_CXX_HIDDEN explicit WritableTensor(std::unique_ptr<State> state);
  // Publishes; the state goes to `*kept` when not null (else it is dropped). With `next`,
  // the daemon also allocates the next tensor like this one, which goes to `*next` (or why
  // it could not).
  HURRAY_CXX_HIDDEN Result<PublishedTensor> PublishWith(std::string_view name, SyncMode sync_mode,
                                                        const PublishOptions& options,
                                                        std::unique_ptr<State>* kept = nullptr,
                                                        Result<WritableTensor>* next = nullptr);
  std::unique_ptr<State> state_;
};

// What WritableTensor::PublishAndAllocate returns: the publish, and the next tensor or why
// it could not be allocated.
struct PublishedAndNext {
  PublishedTensor published;
  Result<WritableTensor> next;
};

// A private, copy-on-write mapping of a published host buffer (TensorView::MapPrivate): the
// same pages as the view's, read without a copy, but writable. A write copies the page it
// touches into this mapping alone; it never reaches the published tensor, other readers or
// other mappings. For a consumer that must be handed writable memory (a framework without
// read-only tensors, such as torch through DLPack 0.6). Unmapped in the destructor; its bytes
// are the tensor's only while the view's lease lasts (afterwards the daemon may reuse the
// pages): keep the lease for as long as this mapping. Move-only.
class HURRAY_CXX_EXPORT PrivateMapping {
 public:
  PrivateMapping() = default;
  PrivateMapping(PrivateMapping&& other) noexcept;
  PrivateMapping& operator=(PrivateMapping&& other) noexcept;
  PrivateMapping(const PrivateMapping&) = delete;
  PrivateMapping& operator=(const PrivateMapping&) = delete;
  ~PrivateMapping();

  // The buffer's bytes in this mapping; empty for an empty mapping.
  [[nodiscard]] std::span<std::byte> bytes() const { return {data_, size_}; }

 private:
  friend class TensorView;
  HURRAY_CXX_HIDDEN PrivateMapping(void* pages, std::size_t pages_size, std::byte* data,
                                   std::size_t size)
      : pages_(pages), pages_size_(pages_size), data_(data), size_(size) {}

  void* pages_ = nullptr;  // The whole pages mapped; null when empty.
  std::size_t pages_size_ = 0;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// A leased, read-only view of a published tensor. The memory is the producer's, mapped
// read-only: a write faults (MapPrivate gives a writable, private mapping of the same pages). The
// lease ends in the destructor (or Release), after which the daemon may reuse the memory. A
// released or moved-from view is empty: only Release, the destructor and assignment may be called
// on it. To end many leases in one request, see Client::Release and TensorViewBatch.
//
// A view acquired on the fast path (fast_path(): see Client::Acquire) holds no lease of the
// daemon's (lease_id() 0) but a pin in this session's lease page, which keeps the version's
// memory from being freed or reused just as a lease does, and ends in the same places; its
// release sends nothing.
class HURRAY_CXX_EXPORT TensorView {
 public:
  TensorView(TensorView&&) noexcept;
  TensorView& operator=(TensorView&&) noexcept;
  ~TensorView();

  [[nodiscard]] const std::string& name() const;
  [[nodiscard]] std::uint64_t version() const;
  [[nodiscard]] const TensorDescriptor& descriptor() const;
  [[nodiscard]] std::size_t buffer_count() const;
  // Buffer `index` (in the descriptor's buffer table); empty for an empty buffer. Host
  // memory only: empty for a buffer of a CUDA pool (see data()).
  [[nodiscard]] std::span<const std::byte> buffer(std::size_t index) const;
  // The address of buffer `index` in this process: host memory for a CPU pool, a device
  // address for a CUDA pool (mapped read-only where the driver allows); null when empty.
  [[nodiscard]] const void* data(std::size_t index) const;
  // Where the buffers live.
  [[nodiscard]] const DeviceInfo& device() const;
  // The producer's handoff: kProducerSynced (read at once) or kEvent (see WaitOn).
  [[nodiscard]] SyncMode sync_mode() const;

  // Buffer `index` of a host tensor as a private, copy-on-write mapping of the same pages
  // (see PrivateMapping): one mmap(2), no copy. Keep this view's lease while it is used.
  // OUT_OF_RANGE for an index past buffer_count(); FAILED_PRECONDITION on an empty view, for
  // a buffer in GPU memory, and for a pool of explicit huge pages (hugetlbfs), whose private
  // pages the kernel would take from the huge page pool; the error of mapping the segment
  // (for a sealed pool, whose descriptors the client does not keep, one request to the
  // daemon for it).
  [[nodiscard]] Result<PrivateMapping> MapPrivate(std::size_t index) const;

  // Makes `stream` (of this tensor's device, in this process) wait on the GPU until the
  // producer's data is ready, and returns at once: the host never blocks. Enqueues nothing
  // for a ProducerSynced tensor, or when the data was already ready at acquire. The stream
  // waits on a word of this process that stands for the daemon's fence (docs/gpu.md,
  // "Waiting for a fence"): it moves on too when the daemon gives up on the data, and
  // Options::orphaned_fence_wait after the daemon was killed. CUDA errors of enqueuing the
  // wait; FAILED_PRECONDITION on an empty view.
  [[nodiscard]] Status WaitOn(CudaStream stream) const;
  // Whether the producer's data is ready, from the fence in host memory (no GPU call):
  // true for ProducerSynced. DATA_LOSS when the daemon gave up on the data (its producer's
  // session ended, or the daemon stopped, before it was ready; or, after a stream waited,
  // the daemon was killed and the fence was not reached within Options::orphaned_fence_wait):
  // a stream that waited has moved on, and what it read must not be used.
  [[nodiscard]] Result<bool> Ready() const;

  // The daemon's lease; 0 for a view acquired on the fast path.
  [[nodiscard]] std::uint64_t lease_id() const;
  // Whether the view was acquired on the fast path: without a system call or a message to
  // the daemon, pinned in this session's lease page rather than leased.
  [[nodiscard]] bool fast_path() const;
  // The daemon epoch the lease (or pin) was granted in.
  [[nodiscard]] std::uint64_t daemon_epoch() const;

  // Ends the lease now; the spans are invalid afterwards. Also done by the destructor.
  // An empty view: OK, nothing to do. The view is empty afterwards, even on error.
  // On the session socket (Client::Options::hot_path kSessionSocket, the default) the
  // release is one-way: it is sent and this returns at once, without waiting for the
  // daemon. The daemon ends the lease before it serves any later request of this client,
  // and every later call of the same Client sees it ended (its gRPC calls, Stats included,
  // first sync the session while a one-way release is unanswered). Another process may
  // still see the lease for a moment. A release the daemon refuses (NOT_FOUND: it no longer
  // knows the lease) is reported by the next Client::SyncReleases, not here. Through gRPC
  // (kGrpc) it waits for the daemon: NOT_FOUND when the daemon no longer knows the lease.
  // Either way UNAVAILABLE once the session is gone (which ended the lease anyway).
  // A fast-path view's release clears its pin, sends nothing and always answers OK.
  [[nodiscard]] Status Release();
  // Release, in stream order: the lease ends once the work queued on `stream` (a stream of
  // the tensor's device, in this process; null: the legacy stream) so far is done, so that
  // kernels still reading the view never read memory the daemon handed to another tensor.
  // Returns at once; the view becomes empty. The daemon's answer is not reported. Host
  // memory: Release. The CUDA error of enqueuing the point in the stream (the view then
  // still holds its lease). A stream whose context fails never gets there: the lease then
  // ends with the session.
  [[nodiscard]] Status ReleaseAfter(CudaStream stream);

  // False once released or moved from.
  [[nodiscard]] bool holds_lease() const { return state_ != nullptr; }

 private:
  // Builds views from the daemon's replies and ends many leases at once
  // (client/src/client_internal.h).
  friend class client_internal::TensorViewAccess;
  struct State;
  HURRAY_CXX_HIDDEN explicit TensorView(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The views of one BatchAcquire, whose leases end together: the destructor (or Release)
// ends every lease the batch still holds in one request (a few above
// Client::kMaxLeasesPerRelease views), where dropping as many single views sends one
// request each. A view can be read in place (batch[i].buffer(0)), released on its own, or
// moved out of the batch (it then ends its lease itself); the batch skips the empty views
// that leaves behind. Move-only; for one thread at a time.
class HURRAY_CXX_EXPORT TensorViewBatch {
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
  HURRAY_CXX_HIDDEN TensorViewBatch(std::shared_ptr<client_internal::Connection> connection,
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
  // With a `wait` answered on the session socket: how long the waiting thread polls the
  // socket for the answer (poll(2) with no timeout, in a loop) before it sleeps in recvmsg.
  // A consumer with a CPU core of its own then takes the version without being woken: the
  // daemon's answer finds it running, and the scheduler's wake-up (tens of microseconds for
  // an idle core of a virtual machine) leaves the handoff's path. It burns that core
  // meanwhile, and slows everything sharing it: for consumers pinned to spare cores. 0 (the
  // default): sleep at once.
  std::chrono::microseconds spin{0};
};

// The daemon socket Client::Connect uses when Options::socket_path is empty: $HURRAY_SOCKET,
// else /run/hurray/hurrayd.sock when it exists, else $XDG_RUNTIME_DIR/hurray/hurrayd.sock or
// /tmp/hurray-$UID/hurrayd.sock.
[[nodiscard]] HURRAY_CXX_EXPORT std::string DefaultSocketPath();

// A running watch; destroying it stops the stream.
class HURRAY_CXX_EXPORT WatchHandle {
 public:
  virtual ~WatchHandle() = default;
};

class HURRAY_CXX_EXPORT Client {
 public:
  struct Options {
    // The daemon's gRPC socket; empty: $HURRAY_SOCKET, else /run/hurray/hurrayd.sock when
    // it exists, else $XDG_RUNTIME_DIR/hurray/hurrayd.sock or /tmp/hurray-$UID/hurrayd.sock.
    std::string socket_path;
    // Shown in the daemon's logs.
    std::string client_name = "hurray-client";
    // Which channel carries allocate, publish, acquire, release and cancel: the session
    // socket (the default: no gRPC round trip on the hot path; an acquire that waits goes
    // there when the daemon serves it there, as this release's does) or gRPC.
    // Both give the same results; everything else always uses gRPC.
    enum class HotPath : std::uint8_t { kSessionSocket, kGrpc };
    HotPath hot_path = HotPath::kSessionSocket;
    // Most bytes of CUDA slabs this process keeps mapped, per device; 0: the device's
    // memory. Beyond it, the least recently used slabs that no tensor of this process
    // uses are unmapped (and imported again when needed).
    std::uint64_t max_mapped_device_bytes = 0;
    // Acquire on the fast path when it can (see Acquire): no system call, no message.
    // False: every acquire asks the daemon (the decoded-tensor cache still serves).
    bool fast_path = true;
    // How long closing the client (its session: the Client and every tensor and view of
    // it gone) waits for the fences of the tensors it published with PublishAfter that its
    // GPU has not reached yet. The daemon gives up on (poisons) every fence a session leaves
    // unreached: a producer that exits right after PublishAfter would lose its tensors. The
    // wait reads the fence words from host memory, a millisecond apart, and ends as soon as
    // every one is reached (at once when they are); 0: no wait.
    std::chrono::milliseconds own_fence_wait{10'000};
    // How long a stream that waits on a fence (TensorView::WaitOn, a view's ready event) may
    // go on waiting once the daemon has exited (killed: a stopping daemon gives up on its
    // fences itself, and streams move on at once). The client watches the fence word itself
    // meanwhile, so a producer still running can still reach it; after that the stream moves
    // on, and Ready() says DATA_LOSS. 0: at once.
    std::chrono::milliseconds orphaned_fence_wait{10'000};
  };

  // Opens the session socket (a session, renewed after a daemon restart as said above) and
  // the gRPC channel. UNAVAILABLE when no daemon listens; PERMISSION_DENIED when this process may
  // not open the daemon's socket (its file mode); INVALID_ARGUMENT for a client_name longer
  // than the session protocol allows.
  [[nodiscard]] static Result<std::unique_ptr<Client>> Connect(Options options);
  [[nodiscard]] static Result<std::unique_ptr<Client>> Connect();
  ~Client();

  // Allocates the descriptor's buffers in `pool` (empty: the daemon's default pool, "cpu";
  // "cuda:N" for GPU memory of the daemon's device N, whose buffers declare
  // DeviceTag::Cuda()) and maps them read-write. FAILED_PRECONDITION for a CUDA pool when
  // this process has no CUDA driver, or does not see the pool's GPU.
  // INVALID_ARGUMENT when the daemon refuses the descriptor (a buffer's alignment above the
  // pool's page, say); NOT_FOUND for an unknown pool; FAILED_PRECONDITION when a buffer's
  // device or memory class does not match the pool's; RESOURCE_EXHAUSTED when the pool or
  // this session's quota has no room. Nothing stays allocated on error.
  [[nodiscard]] Result<WritableTensor> Allocate(const TensorDescriptor& descriptor,
                                                std::string_view pool = {});

  // Publishes many tensors of this client at once, producer-synced, tensors[i] under
  // names[i]: all of them become visible together, or none does (one version each; watchers
  // get one event per name, after the whole set is visible; a BatchAcquire sees all or
  // none). On success every tensor becomes empty and the versions are returned in order. On
  // error nothing is published and every tensor is still the caller's: INVALID_ARGUMENT
  // when the spans differ in length, are empty or exceed kMaxBatchPublish, for a bad name or
  // a name listed twice, or a tensor of another Client; FAILED_PRECONDITION for an empty
  // tensor; NOT_FOUND when the daemon no longer holds an allocation. Each names the first
  // offender by its position and name. Sent like Publish (Options::hot_path), except that a
  // set whose request or reply would not fit one session frame (1 MiB) goes through gRPC;
  // RESOURCE_EXHAUSTED naming the request's size when the daemon's gRPC limit refuses it too.
  // Tensors of a sealed pool are unmapped and sealed as WritableTensor::Publish says; a set
  // refused for a writable mapping left publishes none, but the items before the offender
  // stay sealed (their bytes can no longer change; cancel them or publish them again).
  [[nodiscard]] Result<std::vector<PublishedTensor>> PublishBatch(
      std::span<WritableTensor> tensors, std::span<const std::string> names);

  // Most tensors one PublishBatch may carry (the daemon's limit, as BatchAcquire's).
  static constexpr std::size_t kMaxBatchPublish = 100000;

  // Leases a published tensor and maps it read-only (segments are mapped once per process
  // and cached). NOT_FOUND when the name (or options.version) is not published, or
  // DEADLINE_EXCEEDED when it still is not after options.wait (a version published before
  // and gone since is NOT_FOUND at once: it will not come again); INVALID_ARGUMENT for a
  // bad name, or a wait below 0 or above the daemon's longest (max_wait_ms). No lease is
  // held on error.
  //
  // A wait is held by the daemon, which answers it from the thread that publishes the
  // version: on the session socket (the default hot path; the process's other calls go on
  // meanwhile), or over gRPC.
  //
  // The client keeps, per daemon epoch, the decoded descriptor and mappings of the latest
  // version it acquired of up to 1024 names (host memory of pools that are not sealed), so
  // that acquiring that version again decodes and maps nothing. With Options::fast_path
  // (the default), such an acquire — options.version 0 or that version's number — takes
  // the fast path when the daemon serves one: the client pins the version in its session's
  // lease page and confirms in the daemon's directory that it is still the name's latest
  // live version, with no system call and no message (the first one of a session maps the
  // directory and the page). The view is then fast_path(). Anything else — a newer
  // version published, the name deleted, every slot of the page in use, the directory's
  // daemon stopped, a fast path the daemon does not serve — takes the usual way, a lease
  // asked of the daemon, with the same results and errors.
  [[nodiscard]] Result<TensorView> Acquire(std::string_view name, AcquireOptions options = {});

  // Acquire's fast path alone: a view when the fast path serves `name` now (see Acquire),
  // else nullopt, never an error. It never blocks: no message, and no system call unless
  // options.populate asks for one; the session's first fast path acquire, which maps the
  // directory and the lease page, is left to Acquire. options.wait is not looked at. For
  // callers that must not give up a lock for a call that would block (the Python module
  // keeps the GIL through it).
  [[nodiscard]] std::optional<TensorView> AcquireIfFast(std::string_view name,
                                                        const AcquireOptions& options = {});

  // Leases every listed name and every name under `prefix` (when not empty): all or none.
  // The leases end together when the batch is dropped (see TensorViewBatch). NOT_FOUND
  // naming the first listed name not published, or DEADLINE_EXCEEDED when one still is not
  // after `wait`; INVALID_ARGUMENT when both `names` and `prefix` are empty, for more than
  // 100000 names, a bad name, or a wait out of range. No lease is held on error.
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
  // others of its request from being released. On the session socket the requests are
  // one-way, as TensorView::Release says, and refusals come from SyncReleases.
  [[nodiscard]] Status Release(std::span<TensorView> views);

  // Waits until the daemon has served every request this client sent on its session socket
  // (a sync round trip), and returns the first one-way release (TensorView::Release,
  // Release, TensorViewBatch) the daemon refused since the last call: its code (NOT_FOUND
  // for a lease the daemon does not know) and a message naming the lease and the daemon's
  // reason, and how many more were refused. OK when none was. Failures of a session that
  // ended (the daemon restarted) are not reported: its leases ended with it. UNAVAILABLE
  // when no session can be opened.
  [[nodiscard]] Status SyncReleases();

  // Deletes a name's versions (all, or one). Returns how many. Their memory returns to the
  // pool when their last lease ends. NOT_FOUND when the name (or version) is not
  // published; INVALID_ARGUMENT for a bad name.
  [[nodiscard]] Result<std::uint32_t> Delete(std::string_view name, std::uint64_t version = 0);

  // One page of the published names starting with `prefix` (empty: every name), in name
  // order, each with its latest version. `page_size`: most entries (0: 100; more than 1000
  // counts as 1000); `page_token`: the previous page's next_page_token, empty for the first
  // page. RESOURCE_EXHAUSTED when the request is above the daemon's 4 MiB message limit.
  [[nodiscard]] Result<TensorListPage> List(std::string_view prefix = {},
                                            std::uint32_t page_size = 0,
                                            std::string_view page_token = {});

  // One version of `name` (0: the latest) in full, and every live version of the name.
  // NOT_FOUND when the name (or version) is not published; INVALID_ARGUMENT for a bad name.
  [[nodiscard]] Result<TensorDetails> Describe(std::string_view name, std::uint64_t version = 0);

  // The daemon's pools, sessions, leases and tensors. Only the common errors above.
  [[nodiscard]] Result<DaemonStats> Stats();

  // Calls `on_event` (on a client thread) for every publish and delete under `prefix`
  // (empty: every name) until the handle is destroyed; `on_end` runs once when the stream
  // ends: OK when the handle stopped it; RESOURCE_EXHAUSTED when `on_event` kept the
  // stream so far behind that the daemon dropped it; UNAVAILABLE when the daemon went away.
  // Returns once the daemon confirmed the watch; UNAVAILABLE when the stream ended before
  // that.
  [[nodiscard]] Result<std::unique_ptr<WatchHandle>> Watch(
      std::string_view prefix, std::function<void(const WatchEvent&)> on_event,
      std::function<void(const Status&)> on_end = {});

  // The current session's id and its daemon's epoch: both change when the client opens a
  // new session after a daemon restart.
  [[nodiscard]] std::uint64_t session_id() const;
  [[nodiscard]] std::uint64_t daemon_epoch() const;
  [[nodiscard]] const std::string& socket_path() const;

 private:
  HURRAY_CXX_HIDDEN Client(std::shared_ptr<client_internal::Connection> connection, bool fast_path);
  // A view of `name` on the fast path, when it can be had now (see Acquire); the pages
  // are opened on first use when `may_open`.
  [[nodiscard]] HURRAY_CXX_HIDDEN std::optional<TensorView> AcquireFast(
      std::string_view name, const AcquireOptions& options, bool may_open);
  // Asks the daemon for a lease (the session socket, or gRPC: see Options::hot_path).
  [[nodiscard]] HURRAY_CXX_HIDDEN Result<TensorView> AcquireAsked(std::string_view name,
                                                                  const AcquireOptions& options);
  std::shared_ptr<client_internal::Connection> connection_;
  std::unique_ptr<client_internal::TensorCache> cache_;
  // Null when Options::fast_path is false.
  std::unique_ptr<client_internal::FastPath> fast_path_;
};

}  // namespace hurray
