#include "client_arrays.h"

#include <cstddef>
#include <utility>

#include "format_bindings.h"
#include "hurray/buffer_parts.h"

namespace hurray::python {
namespace {

namespace py = pybind11;

// NumPy wants a non-null address even for zero bytes (null makes pybind11 allocate).
const void* NonNull(const void* data) {
  static const std::byte kEmpty{};
  return data != nullptr ? data : &kEmpty;
}

py::array MakeArray(const py::dtype& dtype, std::vector<py::ssize_t> shape,
                    std::vector<py::ssize_t> strides, const void* data, py::object owner,
                    bool writable) {
  py::array array(dtype, std::move(shape), std::move(strides), NonNull(data), owner);
  if (!writable) array.attr("flags").attr("writeable") = false;
  return array;
}

}  // namespace

ArraySpec BufferArraySpec(const TensorDescriptor& descriptor, std::uint32_t index) {
  for (BufferPart& part : descriptor.BufferParts()) {
    if (part.index == index) {
      return ArraySpec{part.element_type, std::move(part.shape), std::move(part.element_strides)};
    }
  }
  // Create guarantees every buffer has a part; bytes are the honest fallback.
  return ArraySpec{ElementType::kUint8, {descriptor.buffers()[index].byte_size()}, {}};
}

std::optional<std::uint32_t> PartBuffer(const TensorDescriptor& descriptor, std::string_view part) {
  for (const BufferPart& found : descriptor.BufferParts()) {
    // A view's .values are the dense (or paged) data too.
    if (found.part == part || (part == "values" && found.part == "data")) return found.index;
  }
  return std::nullopt;
}

py::array ArrayOver(const void* data, std::uint64_t byte_size, const ArraySpec& spec,
                    py::object owner, bool writable) {
  const py::object numpy_dtype = NumpyDTypeOf(spec.type);
  if (numpy_dtype.is_none() || IsPacked(spec.type)) {
    return BytesOver(data, byte_size, std::move(owner), writable);
  }
  const py::dtype dtype = py::dtype::from_args(numpy_dtype);
  const auto itemsize = static_cast<py::ssize_t>(dtype.itemsize());
  std::vector<py::ssize_t> shape(spec.shape.begin(), spec.shape.end());
  std::vector<py::ssize_t> strides(shape.size());
  if (spec.element_strides.empty()) {
    py::ssize_t stride = itemsize;
    for (std::size_t i = shape.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= shape[i];
    }
  } else {
    for (std::size_t i = 0; i < shape.size(); ++i) {
      strides[i] = static_cast<py::ssize_t>(spec.element_strides[i]) * itemsize;
    }
  }
  return MakeArray(dtype, std::move(shape), std::move(strides), data, std::move(owner), writable);
}

py::array BytesOver(const void* data, std::uint64_t byte_size, py::object owner, bool writable) {
  return MakeArray(py::dtype("uint8"), {static_cast<py::ssize_t>(byte_size)}, {1}, data,
                   std::move(owner), writable);
}

}  // namespace hurray::python
