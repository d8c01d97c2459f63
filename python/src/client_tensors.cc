#include "client_tensors.h"

#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "client_arrays.h"
#include "client_dlpack.h"
#include "errors.h"
#include "format_bindings.h"
#include "format_parts.h"

namespace hurray::python {
namespace {

namespace py = pybind11;

// DLPack's stream numbers: 1 the legacy default stream (CUDA's null stream), -1 no
// synchronization; any other is the CUstream itself (2, the per-thread default stream, is
// CU_STREAM_PER_THREAD).
constexpr std::intptr_t kDLPackLegacyStream = 1;
constexpr std::intptr_t kDLPackNoSync = -1;

bool OnDevice(const DeviceInfo& device) { return device.device_tag != DeviceTag::Cpu(); }

// Whether every buffer of `descriptor` declares the Event handoff (a GPU tensor of
// client.empty, or a descriptor that says so).
bool IsEventTensor(const TensorDescriptor& descriptor) {
  return !descriptor.buffers().empty() &&
         std::ranges::all_of(descriptor.buffers(), [](const BufferHandle& buffer) {
           return buffer.sync_mode() == SyncMode::kEvent;
         });
}

// A stream argument: a CUstream handle as an int, or an object with `cuda_stream` (a
// torch.cuda.Stream). None: nullopt.
std::optional<CudaStream> StreamArgument(py::handle stream) {
  if (stream.is_none()) return std::nullopt;
  const py::object handle = py::hasattr(stream, "cuda_stream")
                                ? py::object(stream.attr("cuda_stream"))
                                : py::reinterpret_borrow<py::object>(stream);
  return reinterpret_cast<CudaStream>(handle.cast<std::intptr_t>());
}

void CheckIndex(std::size_t index, std::size_t count) {
  if (index >= count) {
    throw ToPython(
        OutOfRangeError(
            fmt::format("buffer index {} is out of range: the tensor has {} buffers", index, count))
            .error());
  }
}

void CheckHostMemory(const DeviceInfo& device, std::string_view what) {
  if (OnDevice(device)) {
    throw PythonError("UnsupportedError",
                      fmt::format("{}: the tensor lives in GPU memory ({}); use __dlpack__", what,
                                  device.device_uuid));
  }
}

std::uint32_t DenseDataBuffer(const TensorDescriptor& descriptor, std::string_view what) {
  const auto* dense = std::get_if<DenseLayout>(&descriptor.layout());
  if (dense == nullptr) {
    throw PythonError("UnsupportedError",
                      fmt::format("{} is for dense tensors; this one is {}: read its parts "
                                  "(.values, .indices, ...) or buffer_array(i)",
                                  what, LayoutName(descriptor.layout())));
  }
  return dense->data_buffer;
}

// Everything the two tensor kinds share, over the address and size of each buffer.
template <typename Tensor>
py::array BufferArray(const Tensor& tensor, std::size_t index, py::object owner, bool writable) {
  CheckIndex(index, tensor.buffer_count());
  CheckHostMemory(tensor.device(), "buffer_array");
  const auto buffer = tensor.buffer(index);
  return ArrayOver(buffer.data(), buffer.size(),
                   BufferArraySpec(tensor.descriptor(), static_cast<std::uint32_t>(index)),
                   std::move(owner), writable);
}

template <typename Tensor>
py::memoryview BufferMemory(const Tensor& tensor, std::size_t index, py::object owner,
                            bool writable) {
  CheckIndex(index, tensor.buffer_count());
  CheckHostMemory(tensor.device(), "buffer");
  const auto buffer = tensor.buffer(index);
  return py::memoryview(BytesOver(buffer.data(), buffer.size(), std::move(owner), writable));
}

template <typename Tensor>
py::array DenseArray(const Tensor& tensor, py::object owner, bool writable) {
  return BufferArray(tensor, DenseDataBuffer(tensor.descriptor(), "numpy()"), std::move(owner),
                     writable);
}

// The CUDA Array Interface (version 3) of a tensor of a CUDA pool: its dense data's device
// address, shape and type, with `read_only` and `stream` (None: nothing to synchronize; an
// int: the stream the data is ready on, in the interface's numbering). Types NumPy has no
// dtype for come as the bytes ("|u1"), as numpy() gives them for a host pool.
// AttributeError for a host pool's tensor (hasattr() is then False: use numpy()).
template <typename Tensor>
py::dict CudaArrayInterface(const Tensor& tensor, bool read_only, py::object stream) {
  if (!OnDevice(tensor.device())) {
    throw py::attribute_error(
        "__cuda_array_interface__: the tensor lives in host memory; use numpy()");
  }
  const std::uint32_t index = DenseDataBuffer(tensor.descriptor(), "__cuda_array_interface__");
  const ArraySpec spec = BufferArraySpec(tensor.descriptor(), index);
  const std::uint64_t byte_size = tensor.descriptor().buffers()[index].byte_size();
  const py::object numpy_dtype = NumpyDTypeOf(spec.type);
  py::dict interface;
  py::object strides = py::none();
  if (numpy_dtype.is_none() || IsPacked(spec.type)) {
    interface["shape"] = py::make_tuple(byte_size);
    interface["typestr"] = "|u1";
  } else {
    const py::dtype dtype = py::dtype::from_args(numpy_dtype);
    interface["shape"] = py::tuple(py::cast(spec.shape));
    interface["typestr"] = dtype.attr("str");
    if (!spec.element_strides.empty()) {
      py::list bytes;
      for (const std::uint64_t stride : spec.element_strides) {
        bytes.append(stride * static_cast<std::uint64_t>(dtype.itemsize()));
      }
      strides = py::tuple(bytes);
    }
  }
  interface["strides"] = strides;
  interface["data"] =
      py::make_tuple(reinterpret_cast<std::uintptr_t>(tensor.data(index)), read_only);
  interface["version"] = 3;
  interface["stream"] = std::move(stream);
  return interface;
}

// A view's CUDA Array Interface: read-only; for an Event handoff whose data is not ready yet, the
// legacy default stream (1) made to wait on the GPU for the producer's fence (TensorView::WaitOn),
// which the consumer orders its work after; else no stream.
py::dict ViewCudaArrayInterface(const TensorView& view) {
  if (!OnDevice(view.device())) return CudaArrayInterface(view, true, py::none());
  const Result<bool> ready = view.Ready();  // DATA_LOSS when the daemon gave up on the data.
  if (!ready) throw ToPython(ready.error());
  if (*ready) return CudaArrayInterface(view, true, py::none());
  const Status waiting = [&] {
    const py::gil_scoped_release release;
    return view.WaitOn(nullptr);
  }();
  OkOrRaise(waiting);
  return CudaArrayInterface(view, true, py::int_(kDLPackLegacyStream));
}

template <typename Tensor>
py::capsule DLPack(const Tensor& tensor, std::shared_ptr<const void> owner) {
  const std::uint32_t index = DenseDataBuffer(tensor.descriptor(), "__dlpack__");
  return MakeDLPackCapsule(tensor.data(index), BufferArraySpec(tensor.descriptor(), index),
                           tensor.device(), std::move(owner));
}

// The DLPack export of a view's dense data. Host memory comes as a private, copy-on-write
// mapping of the view's pages (TensorView::MapPrivate), holding a share of the lease: DLPack
// 0.6 cannot say read-only and torch 1.13 has no read-only tensors, so a consumer may write;
// the write then copies a page into this process alone instead of faulting on the shared,
// read-only pages. A pool of explicit huge pages has no private mappings: its pages come
// as they are (read-only: a write faults). GPU memory comes as the view maps it.
py::capsule ViewDLPack(const std::shared_ptr<TensorView>& lease) {
  const std::uint32_t index = DenseDataBuffer(lease->descriptor(), "__dlpack__");
  const ArraySpec spec = BufferArraySpec(lease->descriptor(), index);
  if (!OnDevice(lease->device())) {
    Result<PrivateMapping> mapped = lease->MapPrivate(index);
    if (mapped) {
      // Members end in reverse: the private mapping goes before the lease keeping its pages.
      struct PrivateOwner {
        std::shared_ptr<TensorView> lease;
        PrivateMapping mapping;
      };
      auto owner = std::make_shared<PrivateOwner>(
          PrivateOwner{.lease = lease, .mapping = std::move(*mapped)});
      const void* data = owner->mapping.bytes().data();
      return MakeDLPackCapsule(data, spec, lease->device(), std::move(owner));
    }
    if (mapped.error().code() != StatusCode::kFailedPrecondition) throw ToPython(mapped.error());
  }
  return MakeDLPackCapsule(lease->data(index), spec, lease->device(), lease);
}

// A share of a Python object for a DLPack capsule, whose deleter may run without the GIL
// (ReleasePythonReference takes it).
std::shared_ptr<const void> PythonShare(py::object object) {
  return std::shared_ptr<void>(object.release().ptr(), &ReleasePythonReference);
}

template <typename Tensor>
py::tuple DLPackDevice(const Tensor& tensor) {
  return py::make_tuple(tensor.device().dlpack_device_type(), tensor.device().device_ordinal);
}

// __array__(dtype, copy) as NumPy 2 calls it: `array` itself (no copy) unless `copy` is True
// or `dtype` is another type; ValueError when copy=False and the dtype needs a conversion.
py::object ArrayFor(const py::array& array, py::handle dtype, py::handle copy) {
  const bool must_copy = !copy.is_none() && copy.cast<bool>();
  if (!dtype.is_none()) {
    const py::dtype wanted = py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype));
    if (!wanted.equal(array.dtype()) && !copy.is_none() && !must_copy) {
      throw py::value_error(fmt::format(
          "__array__(copy=False): the tensor's {} elements must be copied to "
          "become {}",
          array.dtype().attr("name").cast<std::string>(), wanted.attr("name").cast<std::string>()));
    }
    return array.attr("astype")(wanted, py::arg("copy") = must_copy);
  }
  if (must_copy) return array.attr("copy")();
  return array;
}

// "cpu", or "cuda:N" for a tensor of a CUDA pool: what torch.device and the pool names say.
std::string DeviceName(const DeviceInfo& device) {
  if (!OnDevice(device)) return "cpu";
  return fmt::format("cuda:{}", device.device_ordinal);
}

// The array conventions of NumPy and torch, on `cls` (TensorView or WritableTensor), over
// the tensor `Tensor(self)` returns: its logical shape and element type (the descriptor's,
// whatever its layout), where it lives, and the bytes its buffers take.
template <typename Class, typename TensorOf>
void BindArrayConventions(py::class_<Class>& cls, TensorOf tensor_of) {
  cls.def_property_readonly(
         "shape",
         [tensor_of](const Class& self) {
           return py::tuple(py::cast(tensor_of(self).descriptor().shape()));
         },
         "The logical shape (the descriptor's), as a tuple of ints.")
      .def_property_readonly(
          "dtype",
          [tensor_of](const Class& self) {
            return DTypeObject(tensor_of(self).descriptor().element_type());
          },
          "The element type, a hurray.DType (its .numpy is the NumPy dtype, when NumPy has one).")
      .def_property_readonly(
          "device", [tensor_of](const Class& self) { return DeviceName(tensor_of(self).device()); },
          "Where the memory lives: \"cpu\", or \"cuda:N\" for a CUDA pool's tensor (a string "
          "torch.device accepts).")
      .def_property_readonly(
          "nbytes",
          [tensor_of](const Class& self) {
            std::uint64_t total = 0;
            for (const BufferHandle& buffer : tensor_of(self).descriptor().buffers()) {
              total += buffer.byte_size();
            }
            return total;
          },
          "Bytes of the tensor's buffers in the pool (for dense data: shape × element size).");
}

// A DLPack request the tensor on `device` cannot satisfy: BufferError, as the standard says.
void CheckDLPackDevice(const DeviceInfo& device, py::handle dl_device) {
  if (dl_device.is_none()) return;
  const auto wanted = dl_device.cast<std::pair<int, int>>();
  if (wanted.first != device.dlpack_device_type() || wanted.second != device.device_ordinal) {
    throw PythonError("BufferError",
                      fmt::format("__dlpack__(dl_device=({}, {})): the tensor lives on {} "
                                  "(DLPack device ({}, {})) and is not copied across devices",
                                  wanted.first, wanted.second, DeviceName(device),
                                  device.dlpack_device_type(), device.device_ordinal));
  }
}

// The base object of a view's arrays: a capsule holding a share of the lease.
py::capsule LeaseOwner(const std::shared_ptr<TensorView>& lease) {
  return {new std::shared_ptr<TensorView>(lease), [](void* share) {
            const py::gil_scoped_release release;  // Ending the lease is a request to the daemon.
            delete static_cast<std::shared_ptr<TensorView>*>(share);
          }};
}

void WaitForConsumer(const TensorView& view, py::handle stream) {
  if (!OnDevice(view.device())) return;
  const std::intptr_t number =
      stream.is_none() ? kDLPackLegacyStream : stream.cast<std::intptr_t>();
  if (number == kDLPackNoSync) return;
  if (number == 0) {
    // The DLPack standard disallows 0 for CUDA: it could mean either default stream.
    throw ToPython(InvalidArgumentError(
                       "__dlpack__(stream=0): 0 is ambiguous for a CUDA tensor and the DLPack "
                       "standard disallows it; pass 1 (the legacy default stream), 2 (the "
                       "per-thread default stream), a stream handle, or -1 (no "
                       "synchronization)")
                       .error());
  }
  const CudaStream cuda_stream =
      number == kDLPackLegacyStream ? nullptr : reinterpret_cast<CudaStream>(number);
  const Status status = [&] {
    const py::gil_scoped_release release;
    return view.WaitOn(cuda_stream);
  }();
  OkOrRaise(status);
}

py::object PartArray(py::object self, std::string_view part) {
  const std::shared_ptr<TensorView>& lease = self.cast<PyTensorView&>().Lease();
  const std::optional<std::uint32_t> index = PartBuffer(lease->descriptor(), part);
  if (!index) return py::none();
  return BufferArray(*lease, *index, LeaseOwner(lease), /*writable=*/false);
}

void BindWritableTensor(py::module_& module) {
  py::class_<PyWritableTensor> writable(
      module, "WritableTensor", "A tensor being written in pool memory: fill it, then publish.");
  BindArrayConventions(
      writable, [](const PyWritableTensor& self) -> const WritableTensor& { return self.Open(); });
  writable
      .def_property_readonly(
          "descriptor", [](const PyWritableTensor& self) { return self.Open().descriptor(); },
          "The hurray.Descriptor allocated. hurray.BufferError once published or cancelled.")
      .def_property_readonly("published_or_cancelled", &PyWritableTensor::done,
                             "Whether publish or cancel took the tensor: its memory is then "
                             "no longer this object's to write.")
      .def(
          "buffer",
          [](const py::object& self, std::size_t index) {
            py::object owner = PyWritableTensor::ExportOwner(self);
            return BufferMemory(self.cast<PyWritableTensor&>().Open(), index, std::move(owner),
                                true);
          },
          py::arg("index") = 0,
          "Buffer `index` as a writable memoryview over pool memory. In a sealed pool, release "
          "(del) it before publish or cancel, which unmap the memory.")
      .def(
          "buffer_array",
          [](const py::object& self, std::size_t index) {
            py::object owner = PyWritableTensor::ExportOwner(self);
            return BufferArray(self.cast<PyWritableTensor&>().Open(), index, std::move(owner),
                               true);
          },
          py::arg("index"),
          "Buffer `index` as a writable ndarray of the part it holds. In a sealed pool, release "
          "(del) it before publish or cancel.")
      .def(
          "numpy",
          [](const py::object& self) {
            py::object owner = PyWritableTensor::ExportOwner(self);
            return DenseArray(self.cast<PyWritableTensor&>().Open(), std::move(owner), true);
          },
          "The dense data as a writable ndarray over pool memory. In a sealed pool, release "
          "(del) it, and every array derived from it, before publish or cancel.")
      .def(
          "__array__",
          [](const py::object& self, const py::object& dtype, const py::object& copy) {
            py::object owner = PyWritableTensor::ExportOwner(self);
            return ArrayFor(
                DenseArray(self.cast<PyWritableTensor&>().Open(), std::move(owner), true), dtype,
                copy);
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none(),
          "The dense data as a writable ndarray over pool memory (numpy.asarray(t)); with "
          "`dtype` another type, or copy=True, a copy. ValueError when copy=False and `dtype` "
          "needs a conversion.")
      .def(
          "__dlpack__",
          [](const py::object& self, const py::object& stream, const py::object& max_version,
             const py::object& dl_device, const py::object& copy) {
            (void)stream;       // The memory is the producer's to write: nothing to wait for.
            (void)max_version;  // A DLPack 0.6 capsule, which every version's consumer reads.
            const WritableTensor& tensor = self.cast<PyWritableTensor&>().Open();
            CheckDLPackDevice(tensor.device(), dl_device);
            if (!copy.is_none() && copy.cast<bool>()) {
              throw PythonError("BufferError",
                                "__dlpack__(copy=True): a WritableTensor is written in place; "
                                "copy what you need after publish");
            }
            return DLPack(tensor, PythonShare(PyWritableTensor::ExportOwner(self)));
          },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          "The dense data, writable, as a DLPack capsule (torch.from_dlpack(t) fills the tensor "
          "in place, on the CPU or the GPU). It keeps this object alive; in a sealed pool, "
          "publish and cancel raise hurray.BufferError while the consumer's tensor lives.")
      .def(
          "__dlpack_device__",
          [](const PyWritableTensor& self) { return DLPackDevice(self.Open()); },
          "(DLPack device type, ordinal): (1, 0) for host memory, (2, N) for CUDA device N.")
      .def_property_readonly(
          "__cuda_array_interface__",
          [](const PyWritableTensor& self) {
            return CudaArrayInterface(self.Open(), /*read_only=*/false, py::none());
          },
          "A CUDA pool's tensor as the CUDA Array Interface (v3) describes device memory, for "
          "torch.as_tensor(t, device='cuda'), CuPy or Numba to fill it; host pools have none "
          "(numpy()).")
      .def(
          "publish",
          [](PyWritableTensor& self, const std::string& name, py::object stream, bool evictable) {
            return self
                .Publish(name, StreamArgument(stream), PublishOptions{.evictable = evictable})
                .version;
          },
          py::arg("name"), py::arg("stream") = py::none(), py::kw_only(),
          py::arg("evictable") = false,
          "Publishes under `name`; returns the version. `stream`: a CUDA stream (GPU pools) to "
          "hand off with an event after the work queued on it; None, for a tensor of "
          "client.empty(pool='cuda:N'), the legacy default stream. `evictable`: the daemon may "
          "evict it (least recently used, never while leased) when its pool is full. In a "
          "sealed pool, publish unmaps the memory: hurray.BufferError while an array or "
          "memoryview over it is alive.")
      .def(
          "publish_and_allocate",
          [](PyWritableTensor& self, const std::string& name, bool evictable) {
            return self.PublishAndAllocate(name, PublishOptions{.evictable = evictable});
          },
          py::arg("name"), py::kw_only(), py::arg("evictable") = false,
          "Publishes under `name` as publish does and allocates the next tensor of the same "
          "descriptor in the same pool, in one round trip; returns (version, next tensor). For "
          "a producer that streams tensors of one shape. Once the publish took effect, an "
          "allocation the pool has no room for raises ResourceExhaustedError saying so.")
      .def("cancel", &PyWritableTensor::Cancel,
           "Frees the allocation unpublished. In a sealed pool, hurray.BufferError while an "
           "array or memoryview over the memory is alive.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyWritableTensor& self, const py::args&) { self.Cancel(); });
}

void BindTensorView(py::module_& module) {
  py::class_<PyTensorView> view(module, "TensorView",
                                "A leased, read-only view of a published tensor.");
  BindArrayConventions(view,
                       [](const PyTensorView& self) -> const TensorView& { return *self.Lease(); });
  view.def_property_readonly(
          "name", [](const PyTensorView& self) { return self.Lease()->name(); },
          "The tensor's name. Every accessor raises hurray.BufferError once released.")
      .def_property_readonly(
          "version", [](const PyTensorView& self) { return self.Lease()->version(); },
          "The version leased (1 for the first publish of the name).")
      .def_property_readonly(
          "descriptor", [](const PyTensorView& self) { return self.Lease()->descriptor(); },
          "The published hurray.Descriptor.")
      .def_property_readonly(
          "buffer_handles",
          [](const PyTensorView& self) { return self.Lease()->descriptor().buffers(); },
          "The descriptor's buffer table (hurray.BufferHandle each), in buffer order.")
      .def_property_readonly("released", &PyTensorView::released,
                             "Whether release() ended this view's access.")
      .def(
          "buffer",
          [](py::object self, std::size_t index) {
            const auto& lease = self.cast<PyTensorView&>().Lease();
            return BufferMemory(*lease, index, LeaseOwner(lease), false);
          },
          py::arg("index") = 0, "Buffer `index` as a read-only memoryview.")
      .def(
          "buffer_array",
          [](py::object self, std::size_t index) {
            const auto& lease = self.cast<PyTensorView&>().Lease();
            return BufferArray(*lease, index, LeaseOwner(lease), false);
          },
          py::arg("index"), "Buffer `index` as a read-only ndarray of the part it holds.")
      .def(
          "numpy",
          [](py::object self) {
            const auto& lease = self.cast<PyTensorView&>().Lease();
            return DenseArray(*lease, LeaseOwner(lease), false);
          },
          "The dense data as a read-only ndarray over the mapping; it keeps the lease.")
      .def(
          "__array__",
          [](const py::object& self, const py::object& dtype, const py::object& copy) {
            const auto& lease = self.cast<PyTensorView&>().Lease();
            return ArrayFor(DenseArray(*lease, LeaseOwner(lease), false), dtype, copy);
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none(),
          "The dense data as a read-only ndarray over the mapping (numpy.asarray(view)); with "
          "`dtype` another type, or copy=True, a writable copy. ValueError when copy=False and "
          "`dtype` needs a conversion.")
      .def(
          "__dlpack__",
          [](const PyTensorView& self, const py::object& stream, const py::object& max_version,
             const py::object& dl_device, const py::object& copy) {
            (void)max_version;  // A DLPack 0.6 capsule, which every version's consumer reads.
            (void)copy;  // Host: a private mapping, a copy in all but the bytes; GPU: shared.
            const std::shared_ptr<TensorView>& lease = self.Lease();
            CheckDLPackDevice(lease->device(), dl_device);
            WaitForConsumer(*lease, stream);
            return ViewDLPack(lease);
          },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          "The dense data as a DLPack capsule (torch.from_dlpack(view), numpy.from_dlpack(view)), "
          "holding the lease until the consumer's tensor is gone. Host memory comes as a "
          "private copy-on-write mapping of the same pages: no byte is copied, and a write "
          "through the consumer's tensor copies the page it touches into this process alone, "
          "never reaching the published tensor. GPU memory: `stream` (DLPack's numbering) waits "
          "for the producer's event.")
      .def_property_readonly(
          "__cuda_array_interface__",
          [](const PyTensorView& self) { return ViewCudaArrayInterface(*self.Lease()); },
          "A CUDA pool's tensor as the CUDA Array Interface (v3) describes device memory, "
          "read-only, for CuPy, Numba and torch.as_tensor; 'stream' is 1 (the legacy default "
          "stream, made to wait for the producer's event) while the data may not be ready, "
          "else None. Host pools have none (numpy()).")
      .def(
          "__dlpack_device__", [](const PyTensorView& self) { return DLPackDevice(*self.Lease()); },
          "(DLPack device type, ordinal): (1, 0) for host memory, (2, N) for CUDA device N.")
      .def(
          "__hurray__",
          [](py::object self) {
            const std::shared_ptr<TensorView>& lease = self.cast<PyTensorView&>().Lease();
            std::vector<CapsuleBuffer> buffers;
            buffers.reserve(lease->buffer_count());
            for (std::size_t i = 0; i < lease->buffer_count(); ++i) {
              buffers.push_back({.data = lease->data(i),
                                 .byte_size = lease->descriptor().buffers()[i].byte_size(),
                                 .handle = lease->descriptor().buffers()[i]});
            }
            return MakeTensorCapsule(lease->descriptor(), buffers, LeaseOwner(lease));
          },
          "The \"hurray_tensor\" capsule (docs/python.md, \"The in-process protocol\"); it keeps "
          "the lease.")
      .def(
          "release",
          [](PyTensorView& self, py::object stream) { self.Release(StreamArgument(stream)); },
          py::arg("stream") = py::none(),
          "Ends this view's access; the lease ends once no array made from it is left. "
          "`stream` (a GPU tensor's: a CUDA stream of this process, or an object with "
          ".cuda_stream): the lease ends only once the work queued on it by then is done, so "
          "that kernels still reading the tensor never read memory handed to another one. "
          "Returns at once either way.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyTensorView& self, const py::args&) { self.Release(); })
      .def("__repr__", [](const PyTensorView& self) {
        if (self.released()) return std::string("<hurray.TensorView released>");
        return fmt::format("<hurray.TensorView {} v{}>", self.Lease()->name(),
                           self.Lease()->version());
      });
  for (const char* part : {"values", "indices", "indptr", "scales", "zero_points", "page_table"}) {
    view.def_property_readonly(
        part, [part](py::object self) { return PartArray(self, part); },
        "The buffer that holds this part of the layout or quantization, as a read-only ndarray "
        "that keeps the lease; None when the tensor has no such part (\"values\" is the data "
        "of a dense tensor too).");
  }
}

void BindTensorViewBatch(py::module_& module) {
  py::class_<PyTensorViewBatch>(module, "TensorViewBatch",
                                "The views of one batch_acquire, released together.")
      .def("__len__", [](const PyTensorViewBatch& self) { return self.views().size(); })
      .def("__getitem__",
           [](const PyTensorViewBatch& self, std::size_t index) {
             CheckIndex(index, self.views().size());
             return self.views()[index];
           })
      .def("__iter__",
           [](const PyTensorViewBatch& self) { return py::iter(py::cast(self.views())); })
      .def(
          "release",
          [](PyTensorViewBatch& self, py::object stream) { self.Release(StreamArgument(stream)); },
          py::arg("stream") = py::none(),
          "Ends every view's access; the leases end in one request once no array is left. "
          "`stream`: as TensorView.release, for every view (each lease then ends on its own, "
          "after the stream's queued work).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyTensorViewBatch& self, const py::args&) { self.Release(); });
}

}  // namespace

PyWritableTensor::PyWritableTensor(std::shared_ptr<Client> client, WritableTensor tensor)
    : client_(std::move(client)), tensor_(std::move(tensor)) {}

const WritableTensor& PyWritableTensor::Open() const {
  if (done_) throw PythonError("BufferError", "the WritableTensor was published or cancelled");
  return tensor_;
}

py::object PyWritableTensor::ExportOwner(const py::object& self) {
  auto& tensor = self.cast<PyWritableTensor&>();
  (void)tensor.Open();
  if (tensor.unmapped_) {
    throw PythonError("BufferError",
                      fmt::format("the WritableTensor (allocation {}) is in a sealed pool and was "
                                  "handed to publish, which unmaps its memory: publish it "
                                  "again or cancel it",
                                  tensor.tensor_.allocation_id()));
  }
  if (tensor.export_token_ != nullptr) {
    return py::reinterpret_borrow<py::object>(tensor.export_token_);
  }
  // The token's share of `self`, and the tensor whose pointer its destructor clears.
  struct Reference {
    py::object owner;
    PyWritableTensor* tensor;
  };
  auto reference = std::make_unique<Reference>(Reference{.owner = self, .tensor = &tensor});
  py::capsule token(reference.get(), [](void* pointer) {
    const std::unique_ptr<Reference> held(static_cast<Reference*>(pointer));
    held->tensor->export_token_ = nullptr;
  });
  (void)reference.release();  // The capsule owns it now.
  tensor.export_token_ = token.ptr();
  return token;
}

void PyWritableTensor::CheckNoExport(std::string_view what) const {
  if (!tensor_.sealed() || export_token_ == nullptr) return;
  throw PythonError(
      "BufferError",
      fmt::format("{}: the WritableTensor (allocation {}) is in a sealed pool, whose publish and "
                  "cancel unmap its memory, and arrays or memoryviews over that memory are still "
                  "alive; release (del) them, and the arrays derived from them, first",
                  what, tensor_.allocation_id()));
}

template <typename Call>
auto PyWritableTensor::PublishThrough(const std::string& name, const Call& call) {
  (void)Open();
  CheckNoExport(fmt::format("publish '{}'", name));
  unmapped_ = tensor_.sealed();
  auto published = [&] {
    const py::gil_scoped_release release;
    const std::scoped_lock lock(mutex_);
    return call();
  }();
  auto value = ValueOrRaise(std::move(published));
  done_ = true;
  return value;
}

PublishedTensor PyWritableTensor::Publish(const std::string& name, std::optional<CudaStream> stream,
                                          const PublishOptions& options) {
  return PublishThrough(name, [&] {
    if (!stream && IsEventTensor(tensor_.descriptor())) {
      // The Event handoff needs a stream: None is the legacy default stream (the null
      // stream), as in DLPack and WaitForConsumer.
      return tensor_.PublishAfter(name, nullptr, options);
    }
    return stream ? tensor_.PublishAfter(name, *stream, options) : tensor_.Publish(name, options);
  });
}

std::pair<std::uint64_t, std::unique_ptr<PyWritableTensor>> PyWritableTensor::PublishAndAllocate(
    const std::string& name, const PublishOptions& options) {
  if (IsEventTensor(Open().descriptor())) {
    throw PythonError("UnsupportedError",
                      "publish_and_allocate publishes producer-synced; a tensor whose buffers "
                      "declare the Event handoff is published with publish(name, stream)");
  }
  PublishedAndNext value =
      PublishThrough(name, [&] { return tensor_.PublishAndAllocate(name, options); });
  if (!value.next) {
    const Error& error = value.next.error();
    throw ToPython(
        Error(error.code(), fmt::format("'{}' version {} was published; the next "
                                        "allocation failed: {}",
                                        name, value.published.version, error.message())));
  }
  return {value.published.version,
          std::make_unique<PyWritableTensor>(client_, std::move(*value.next))};
}

std::vector<std::uint64_t> PyWritableTensor::PublishBatch(
    Client& client, const std::vector<PyWritableTensor*>& tensors,
    const std::vector<std::string>& names) {
  std::unordered_map<const PyWritableTensor*, std::size_t> positions;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i] == nullptr) {
      throw py::type_error(fmt::format("tensors[{}] is None, not a WritableTensor", i));
    }
    if (tensors[i]->done_) {
      throw PythonError("BufferError",
                        fmt::format("tensors[{}] was already published or cancelled", i));
    }
    tensors[i]->CheckNoExport(i < names.size() ? fmt::format("tensors[{}] ('{}')", i, names[i])
                                               : fmt::format("tensors[{}]", i));
    if (const auto [at, inserted] = positions.emplace(tensors[i], i); !inserted) {
      throw ToPython(InvalidArgumentError(
                         fmt::format("tensors[{}] is tensors[{}] listed again", i, at->second))
                         .error());
    }
  }
  for (PyWritableTensor* tensor : tensors) tensor->unmapped_ = tensor->tensor_.sealed();
  std::vector<PyWritableTensor*> lock_order = tensors;
  std::ranges::sort(lock_order);  // One order for every caller: no deadlock.
  Result<std::vector<PublishedTensor>> published = [&] {
    const py::gil_scoped_release release;
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(lock_order.size());
    for (PyWritableTensor* tensor : lock_order) locks.emplace_back(tensor->mutex_);
    std::vector<WritableTensor> batch;
    batch.reserve(tensors.size());
    for (PyWritableTensor* tensor : tensors) batch.push_back(std::move(tensor->tensor_));
    Result<std::vector<PublishedTensor>> result = client.PublishBatch(batch, names);
    // Back to their objects: empty once published, still the caller's on error.
    for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i]->tensor_ = std::move(batch[i]);
    return result;
  }();
  std::vector<PublishedTensor> versions = ValueOrRaise(std::move(published));
  for (PyWritableTensor* tensor : tensors) tensor->done_ = true;
  std::vector<std::uint64_t> out;
  out.reserve(versions.size());
  for (const PublishedTensor& version : versions) out.push_back(version.version);
  return out;
}

void PyWritableTensor::Cancel() {
  if (done_) return;
  CheckNoExport("cancel");
  done_ = true;
  const Status status = [&] {
    const py::gil_scoped_release release;
    const std::scoped_lock lock(mutex_);
    return tensor_.Cancel();
  }();
  OkOrRaise(status);
}

const std::shared_ptr<TensorView>& PyTensorView::Lease() const {
  if (!lease_) throw PythonError("BufferError", "the TensorView was released");
  return lease_;
}

namespace {

// The deleters of a view's lease (MakeLease) and of a batch's leases (PyTensorViewBatch):
// each ends its leases in the order of the stream a release(stream=) named, if any. A stream
// whose queued work can no longer be enqueued after (a failed context) leaves the leases to
// the destructor: they end at once. `stream` is set under the GIL by a release, before it
// drops its share: the last share's drop, which runs the deleter, comes after.
struct LeaseEnd {
  std::optional<CudaStream> stream;

  void operator()(TensorView* view) const {
    if (stream) (void)view->ReleaseAfter(*stream);
    delete view;  // NOLINT(cppcoreguidelines-owning-memory): the shared_ptr's own pointer.
  }
};

struct BatchEnd {
  std::optional<CudaStream> stream;

  void operator()(TensorViewBatch* batch) const {
    if (stream) {
      for (TensorView& view : *batch) (void)view.ReleaseAfter(*stream);
    }
    delete batch;  // NOLINT(cppcoreguidelines-owning-memory): the shared_ptr's own pointer.
  }
};

// Arms the deleter of the control block `lease` shares (a view's own, or its batch's) with
// `stream`.
template <typename Shared>
void EndSharesAfter(const std::shared_ptr<Shared>& lease, CudaStream stream) {
  if (auto* own = std::get_deleter<LeaseEnd>(lease)) own->stream = stream;
  if (auto* batch = std::get_deleter<BatchEnd>(lease)) batch->stream = stream;
}

}  // namespace

std::shared_ptr<TensorView> PyTensorView::MakeLease(TensorView view) {
  return {new TensorView(std::move(view)), LeaseEnd{}};
}

void PyTensorView::Release(std::optional<CudaStream> stream) {
  std::shared_ptr<TensorView> lease = std::move(lease_);
  if (!lease) return;
  // The GIL guards every share of the lease: no other one can appear meanwhile.
  const bool last = lease.use_count() == 1;
  // A view of a batch shares the batch's control block: its stream then orders the ends of
  // every lease the batch still holds when its last share goes (later, never earlier).
  if (stream && !last) EndSharesAfter(lease, *stream);
  const auto end = [&]() -> Status {
    Status result = !last ? Status() : stream ? lease->ReleaseAfter(*stream) : lease->Release();
    lease.reset();
    return result;
  };
  // A fast path view's release clears its pin: no system call, so the GIL stays.
  const Status status = lease->fast_path() ? end() : [&] {
    const py::gil_scoped_release release;
    return end();
  }();
  OkOrRaise(status);
}

bool PyTensorView::ReleaseIfFast() {
  if (!lease_ || !lease_->fast_path()) return false;
  Release();
  return true;
}

PyTensorViewBatch::PyTensorViewBatch(TensorViewBatch batch)
    : batch_(new TensorViewBatch(std::move(batch)), BatchEnd{}) {
  for (TensorView& view : *batch_) {
    views_.push_back(py::cast(PyTensorView(std::shared_ptr<TensorView>(batch_, &view))));
  }
}

void PyTensorViewBatch::Release(std::optional<CudaStream> stream) {
  for (const py::object& view : views_) view.cast<PyTensorView&>().Release();
  std::shared_ptr<TensorViewBatch> batch = std::move(batch_);
  if (!batch) return;
  const bool last = batch.use_count() == 1;
  if (stream && !last) EndSharesAfter(batch, *stream);
  const Status status = [&]() -> Status {
    const py::gil_scoped_release release;
    Status result;
    if (last && stream) {
      for (TensorView& view : *batch) {
        if (Status after = view.ReleaseAfter(*stream); !after && result) result = after;
      }
    } else if (last) {
      result = batch->Release();
    }
    batch.reset();
    return result;
  }();
  OkOrRaise(status);
}

void BindTensors(py::module_& module) {
  BindWritableTensor(module);
  BindTensorView(module);
  BindTensorViewBatch(module);
}

}  // namespace hurray::python
