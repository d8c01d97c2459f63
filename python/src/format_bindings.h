// The Hurray format in Python: dtypes, descriptors, buffer handles, hurray.Tensor, the
// __hurray__ capsule protocol and from_numpy / from_hurray. Defined in format_bindings.cc
// (and the files it is split into). The client's bindings use the helpers below.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/buffer_handle.h"
#include "hurray/element_type.h"
#include "hurray/tensor_descriptor.h"

namespace hurray::python {

// Adds the format's names to `module`: among them the classes of hurray::TensorDescriptor
// (hurray.Descriptor) and hurray::BufferHandle (hurray.BufferHandle), so that the client's
// bindings return those C++ types and pybind11 converts them. Runs first.
void BindFormat(pybind11::module_& module);

// The element type `dtype` names: a hurray dtype (hurray.float32), a NumPy dtype or scalar
// type (numpy.float32, "float32"), or a torch.dtype. Raises hurray.InvalidArgumentError
// naming it otherwise. Needs the GIL.
[[nodiscard]] ElementType ElementTypeFromPython(pybind11::handle dtype);

// The NumPy dtype of `type`, or None when NumPy has none (bfloat16, the float8 and 4-bit
// types): their data is then exposed as uint8 bytes. Needs the GIL.
[[nodiscard]] pybind11::object NumpyDTypeOf(ElementType type);

// Drops one reference to `object` (a PyObject*), taking the GIL: for owners let go from any
// thread (a C consumer's tensor context, the deleter a DLPack consumer calls). Nothing at
// exit, once the interpreter has freed its objects.
void ReleasePythonReference(void* object);

// One buffer of a capsule: memory that `owner` (below) keeps alive.
struct CapsuleBuffer {
  const void* data = nullptr;
  std::uint64_t byte_size = 0;
  BufferHandle handle;
};

// The "hurray_tensor" capsule (docs/python.md, "The in-process protocol"): a HurrayBufferList over
// `buffers` (element i is buffer i of the descriptor's table) and a HurrayTensorContext holding the
// descriptor's bytes, whose owner_release drops the reference to `owner` (the object that keeps the
// memory alive: a leased view, an array), exactly once. Needs the GIL.
[[nodiscard]] pybind11::capsule MakeTensorCapsule(const TensorDescriptor& descriptor,
                                                  std::span<const CapsuleBuffer> buffers,
                                                  pybind11::object owner);

}  // namespace hurray::python
