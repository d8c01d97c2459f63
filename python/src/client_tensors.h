// hurray.WritableTensor, hurray.TensorView and hurray.TensorViewBatch: the Python faces of
// the C++ client's tensors. Arrays, memoryviews and DLPack capsules made from them keep the
// memory mapped (and a view's lease held) until the last of them is gone.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/client.h"

namespace hurray::python {

// A tensor being written. Its arrays and memoryviews have as their base this tensor's export
// token, a capsule holding a reference to this object (and through it the client, whose
// connection keeps the segment mapped); the token lives while any of them (or an array
// derived from them) does. In a CPU or CUDA pool, after publish or cancel the memory is no
// longer this process's to write, though it stays mapped. In a sealed pool, publish and
// cancel unmap the memory: while the token lives they raise hurray.BufferError instead. Safe
// to share between Python threads: publish and cancel are serialized.
class PyWritableTensor {
 public:
  PyWritableTensor(std::shared_ptr<Client> client, WritableTensor tensor);

  // The tensor, for reads under the GIL; hurray.BufferError once published or cancelled.
  [[nodiscard]] const WritableTensor& Open() const;
  // The base object for a new array or memoryview over the memory of `self` (a
  // PyWritableTensor): its export token, made on first use and shared while it lives.
  // hurray.BufferError once published or cancelled, or once a publish of a sealed tensor
  // unmapped the memory. Needs the GIL.
  [[nodiscard]] static pybind11::object ExportOwner(const pybind11::object& self);
  // Publishes (with an Event handoff on `stream` when given); releases the GIL.
  // hurray.BufferError for a sealed tensor while its export token lives.
  [[nodiscard]] PublishedTensor Publish(const std::string& name, std::optional<CudaStream> stream,
                                        const PublishOptions& options = {});
  // Publishes producer-synced and allocates the next tensor of the same descriptor in the
  // same pool in the same round trip (WritableTensor::PublishAndAllocate); releases the GIL.
  // Returns the version and the next tensor. UnsupportedError for a tensor whose buffers
  // declare the Event handoff (publish it with a stream). Once the publish took effect, the
  // next allocation's error is raised with a message that says the publish did.
  [[nodiscard]] std::pair<std::uint64_t, std::unique_ptr<PyWritableTensor>> PublishAndAllocate(
      const std::string& name, const PublishOptions& options);
  // Cancels; a published or cancelled tensor: nothing to do. Releases the GIL.
  // hurray.BufferError for a sealed tensor while its export token lives.
  void Cancel();
  [[nodiscard]] bool done() const { return done_; }

  // Publishes tensors[i] under names[i] as one Client::PublishBatch of `client`: all become
  // visible together, or none does; returns the versions in order. hurray.BufferError for a
  // tensor already published or cancelled, or sealed with its export token alive;
  // InvalidArgumentError for one listed twice; then the errors of PublishBatch, each naming
  // the first offender; on error every tensor is still the caller's. Releases the GIL.
  [[nodiscard]] static std::vector<std::uint64_t> PublishBatch(
      Client& client, const std::vector<PyWritableTensor*>& tensors,
      const std::vector<std::string>& names);

 private:
  // hurray.BufferError when the tensor is sealed and its export token lives; `what` names
  // the tensor and the call ("publish 'ns/x'", "tensors[2]", ...).
  void CheckNoExport(std::string_view what) const;
  // Every publish of this tensor: the checks (open, no export of a sealed tensor), then
  // `call` (a publish of tensor_) without the GIL under mutex_; its value, or its error
  // raised. The tensor is done once the publish took effect.
  template <typename Call>
  auto PublishThrough(const std::string& name, const Call& call);

  std::shared_ptr<Client> client_;
  std::mutex mutex_;  // Serializes Publish, PublishBatch and Cancel, which run without the GIL.
  WritableTensor tensor_;
  bool done_ = false;      // Published or cancelled; guarded by the GIL.
  bool unmapped_ = false;  // A publish of a sealed tensor unmapped it; guarded by the GIL.
  // The export token, borrowed: the token holds this object, and its destructor clears
  // this pointer (no reference cycle). Guarded by the GIL.
  PyObject* export_token_ = nullptr;
};

// A leased view. `lease` is shared with every array and capsule made from the view (and,
// for a view of a batch, aliases the batch, whose leases end together); Release drops this
// object's share, after which every access raises hurray.BufferError.
class PyTensorView {
 public:
  // A view of its own lease (MakeLease), or of a share of a batch's.
  explicit PyTensorView(std::shared_ptr<TensorView> lease) : lease_(std::move(lease)) {}

  // `view` as a lease that Release(stream) can end in stream order even while arrays of it
  // are alive: the last share to go ends it after the stream's queued work, if a stream was
  // named, else at once.
  [[nodiscard]] static std::shared_ptr<TensorView> MakeLease(TensorView view);

  // The view's lease; hurray.BufferError once released. Needs the GIL.
  [[nodiscard]] const std::shared_ptr<TensorView>& Lease() const;
  // Drops this object's share of the lease; when it was the last one (no array is left),
  // ends the lease now, raising the daemon's error. With `stream` (a CUDA stream of this
  // process), the lease ends once the work queued on it by the time the last share goes is
  // done (TensorView::ReleaseAfter), raising the CUDA error of enqueuing that point when
  // this was the last share. Releases the GIL.
  void Release(std::optional<CudaStream> stream = std::nullopt);
  // Release() of a fast path view, which neither blocks nor fails (its pin is cleared);
  // false, doing nothing, for any other view (and once released). Needs the GIL.
  [[nodiscard]] bool ReleaseIfFast();
  [[nodiscard]] bool released() const { return lease_ == nullptr; }

 private:
  std::shared_ptr<TensorView> lease_;
};

// The views of one batch_acquire. The C++ batch lives until the batch and every array of
// its views are gone, then ends every lease in one request.
class PyTensorViewBatch {
 public:
  explicit PyTensorViewBatch(TensorViewBatch batch);

  [[nodiscard]] const std::vector<pybind11::object>& views() const { return views_; }
  // Releases every view (as PyTensorView::Release); ends the leases now when no array of
  // them is left, each in the order of `stream` when given (else when the last array goes).
  // Releases the GIL.
  void Release(std::optional<CudaStream> stream = std::nullopt);

 private:
  std::shared_ptr<TensorViewBatch> batch_;
  std::vector<pybind11::object> views_;  // PyTensorView objects.
};

// Adds WritableTensor, TensorView and TensorViewBatch to `module`.
void BindTensors(pybind11::module_& module);

// Allocates `descriptor` in `pool` of `client` (empty: the daemon's default), releasing the
// GIL; the daemon's error raised.
[[nodiscard]] WritableTensor AllocateIn(Client& client, const TensorDescriptor& descriptor,
                                        const std::string& pool);

// `obj` (a numpy.ndarray, a CPU torch.Tensor or a hurray.Tensor) copied once into a tensor
// allocated in `pool` of `client`, ready to publish: a strided array is copied straight into
// the pool's row-major layout, other buffer-protocol objects go through numpy.asarray, a
// hurray.Tensor (any object with .descriptor and .buffers) copies each buffer. TypeError
// for anything else; hurray.UnsupportedError for a GPU pool.
[[nodiscard]] WritableTensor CopyIntoPool(Client& client, pybind11::handle obj,
                                          const std::string& pool);

// The dense descriptor for `shape` and `dtype` in `pool` (a CUDA device tag for "cuda:N").
// InvalidArgumentError for a negative extent, an unknown dtype, or a shape core refuses.
[[nodiscard]] TensorDescriptor DenseDescriptor(const std::vector<std::int64_t>& shape,
                                               pybind11::handle dtype, const std::string& pool);

}  // namespace hurray::python
