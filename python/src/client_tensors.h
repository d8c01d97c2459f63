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
#include <vector>

#include "hurray/client.h"

namespace hurray::python {

// A tensor being written. Its arrays keep this object (and through it the client, whose
// connection keeps the segment mapped) alive; after publish or cancel the memory is no
// longer this process's to write, though it stays mapped. Safe to share between Python
// threads: publish and cancel are serialized.
class PyWritableTensor {
 public:
  PyWritableTensor(std::shared_ptr<Client> client, WritableTensor tensor);

  // The tensor, for reads under the GIL; hurray.BufferError once published or cancelled.
  [[nodiscard]] const WritableTensor& Open() const;
  // Publishes (with an Event handoff on `stream` when given); releases the GIL.
  [[nodiscard]] PublishedTensor Publish(const std::string& name, std::optional<CudaStream> stream,
                                        const PublishOptions& options = {});
  // Cancels; a published or cancelled tensor: nothing to do. Releases the GIL.
  void Cancel();
  [[nodiscard]] bool done() const { return done_; }

  // Publishes tensors[i] under names[i] as one Client::PublishBatch of `client`: all become
  // visible together, or none does; returns the versions in order. hurray.BufferError for a
  // tensor already published or cancelled, InvalidArgumentError for one listed twice, then
  // the errors of PublishBatch, each naming the first offender; on error every tensor is
  // still the caller's. Releases the GIL.
  [[nodiscard]] static std::vector<std::uint64_t> PublishBatch(
      Client& client, const std::vector<PyWritableTensor*>& tensors,
      const std::vector<std::string>& names);

 private:
  std::shared_ptr<Client> client_;
  std::mutex mutex_;  // Serializes Publish, PublishBatch and Cancel, which run without the GIL.
  WritableTensor tensor_;
  bool done_ = false;  // Published or cancelled; guarded by the GIL.
};

// A leased view. `lease` is shared with every array and capsule made from the view (and,
// for a view of a batch, aliases the batch, whose leases end together); Release drops this
// object's share, after which every access raises hurray.BufferError.
class PyTensorView {
 public:
  explicit PyTensorView(std::shared_ptr<TensorView> lease) : lease_(std::move(lease)) {}

  // The view's lease; hurray.BufferError once released. Needs the GIL.
  [[nodiscard]] const std::shared_ptr<TensorView>& Lease() const;
  // Drops this object's share of the lease; when it was the last one (no array is left),
  // ends the lease now, raising the daemon's error. Releases the GIL.
  void Release();
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
  // them is left. Releases the GIL.
  void Release();

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
