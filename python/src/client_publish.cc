// Dense descriptors from Python shapes, and the one copy of client.publish.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>

#include "client_arrays.h"
#include "client_tensors.h"
#include "errors.h"
#include "format_bindings.h"

namespace hurray::python {
namespace {

namespace py = pybind11;

void CheckHostPool(const WritableTensor& tensor) {
  if (tensor.device().device_tag != DeviceTag::Cpu()) {
    throw PythonError("UnsupportedError",
                      "publish copies host memory into host pools; for a GPU pool, allocate "
                      "and fill the tensor on the device");
  }
}

// Copies `size` bytes without the GIL.
void CopyBytes(std::span<std::byte> destination, const void* source) {
  const py::gil_scoped_release release;
  std::memcpy(destination.data(), source, destination.size());
}

WritableTensor CopyArray(Client& client, const py::array& array, const std::string& pool) {
  const char kind = array.dtype().kind();
  if (kind == 'O' || kind == 'U' || kind == 'S' || kind == 'V') {
    throw py::type_error(fmt::format("publish takes numeric arrays, not dtype {}",
                                     py::str(array.dtype()).cast<std::string>()));
  }
  const std::vector<std::int64_t> shape(array.shape(), array.shape() + array.ndim());
  WritableTensor tensor = AllocateIn(client, DenseDescriptor(shape, array.dtype(), pool), pool);
  CheckHostPool(tensor);
  const std::span<std::byte> buffer = tensor.buffer(0);
  const py::array destination =
      ArrayOver(buffer.data(), buffer.size(), BufferArraySpec(tensor.descriptor(), 0), py::none(),
                /*writable=*/true);
  py::module_::import("numpy").attr("copyto")(destination, array, py::arg("casting") = "no");
  return tensor;
}

bool IsTorchTensor(py::handle obj) {
  const py::dict modules = py::module_::import("sys").attr("modules");
  return modules.contains("torch") &&
         py::isinstance(obj, py::module_::import("torch").attr("Tensor"));
}

WritableTensor CopyTorchTensor(Client& client, py::handle obj, const std::string& pool) {
  if (obj.attr("device").attr("type").cast<std::string>() != "cpu") {
    throw ToPython(
        InvalidArgumentError(fmt::format("publish takes CPU torch tensors; this one is on {}",
                                         py::str(obj.attr("device")).cast<std::string>()))
            .error());
  }
  const py::object tensor = obj.attr("detach")().attr("contiguous")();
  const auto shape = tensor.attr("shape").cast<std::vector<std::int64_t>>();
  WritableTensor written =
      AllocateIn(client, DenseDescriptor(shape, tensor.attr("dtype"), pool), pool);
  CheckHostPool(written);
  CopyBytes(written.buffer(0),
            reinterpret_cast<const void*>(tensor.attr("data_ptr")().cast<std::uintptr_t>()));
  return written;
}

WritableTensor CopyHurrayTensor(Client& client, py::handle obj, const std::string& pool) {
  const auto descriptor = obj.attr("descriptor").cast<TensorDescriptor>();
  const auto buffers = obj.attr("buffers").cast<std::vector<py::object>>();
  if (buffers.size() != descriptor.buffers().size()) {
    throw ToPython(
        InvalidArgumentError(
            fmt::format("publish: the tensor has {} buffers but its descriptor's table has {}",
                        buffers.size(), descriptor.buffers().size()))
            .error());
  }
  WritableTensor tensor = AllocateIn(client, descriptor, pool);
  CheckHostPool(tensor);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    // Through NumPy, which gives a strided buffer in order (copying it) and others as is.
    const py::array source = py::array::ensure(buffers[i], py::array::c_style);
    if (!source) throw py::type_error(fmt::format("publish: buffer {} is not a buffer", i));
    const std::span<std::byte> destination = tensor.buffer(i);
    const auto source_bytes = static_cast<std::uint64_t>(source.nbytes());
    if (source_bytes != destination.size()) {
      throw ToPython(InvalidArgumentError(
                         fmt::format("publish: buffer {} holds {} bytes; the descriptor says {}", i,
                                     source_bytes, destination.size()))
                         .error());
    }
    CopyBytes(destination, source.data());
  }
  return tensor;
}

}  // namespace

WritableTensor AllocateIn(Client& client, const TensorDescriptor& descriptor,
                          const std::string& pool) {
  Result<WritableTensor> tensor = [&] {
    const py::gil_scoped_release release;
    return client.Allocate(descriptor, pool);
  }();
  return ValueOrRaise(std::move(tensor));
}

TensorDescriptor DenseDescriptor(const std::vector<std::int64_t>& shape, py::handle dtype,
                                 const std::string& pool) {
  std::vector<std::uint64_t> extents;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw ToPython(
          InvalidArgumentError(fmt::format("shape[{}] {} is negative", i, shape[i])).error());
    }
    extents.push_back(static_cast<std::uint64_t>(shape[i]));
  }
  if (!pool.starts_with("cuda")) {
    return ValueOrRaise(TensorDescriptor::Dense(ElementTypeFromPython(dtype), std::move(extents)));
  }
  // A GPU tensor is written by device work the host does not wait for: its buffer declares
  // the Event handoff, so that publish(name, stream=...) hands it over after that work.
  const TensorDescriptor dense = ValueOrRaise(
      TensorDescriptor::Dense(ElementTypeFromPython(dtype), std::move(extents), DeviceTag::Cuda()));
  const BufferHandle& buffer = dense.buffers().front();
  const BufferHandle event = ValueOrRaise(BufferHandle::Create(
      buffer.byte_size(), buffer.alignment(), DeviceTag::Cuda(), SyncMode::kEvent));
  return ValueOrRaise(TensorDescriptor::Create(
      {.element_type = dense.element_type(), .shape = dense.shape(), .buffers = {event}}));
}

WritableTensor CopyIntoPool(Client& client, py::handle obj, const std::string& pool) {
  if (py::isinstance<py::array>(obj)) {
    return CopyArray(client, py::reinterpret_borrow<py::array>(obj), pool);
  }
  if (IsTorchTensor(obj)) return CopyTorchTensor(client, obj, pool);
  if (py::hasattr(obj, "descriptor") && py::hasattr(obj, "buffers")) {
    return CopyHurrayTensor(client, obj, pool);
  }
  if (PyObject_CheckBuffer(obj.ptr()) != 0) {
    return CopyArray(client, py::module_::import("numpy").attr("asarray")(obj), pool);
  }
  throw py::type_error(fmt::format(
      "publish takes a numpy.ndarray, a CPU torch.Tensor, a hurray.Tensor or a buffer, not {}",
      py::str(py::type::of(obj).attr("__name__")).cast<std::string>()));
}

}  // namespace hurray::python
