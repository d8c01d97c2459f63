// The parts BindFormat is made of, one file each, and what they share. Private to the
// format's bindings (format_*.cc).
#pragma once

#include <pybind11/pybind11.h>

#include "hurray/element_type.h"

namespace hurray::python {

// hurray.DType, one object per element type (hurray.float32, ...), and hurray.dtype().
// format_dtype.cc.
void BindDTypes(pybind11::module_& module);

// hurray.BufferHandle, the quantization classes and hurray.Descriptor.
// format_descriptor.cc.
void BindDescriptor(pybind11::module_& module);

// The capsule's C++ half: _tensor_capsule and _open_capsule, which hurray/_tensor.py (the
// pure-Python hurray.Tensor) calls. format_capsule.cc.
void BindCapsule(pybind11::module_& module);

// _save and _load, the C++ half of hurray.save / hurray.load (python/hurray/_file.py).
// format_file.cc.
void BindFile(pybind11::module_& module);

// The module's one hurray.DType object of `type` (hurray.float32 for kFloat32). Needs the GIL.
[[nodiscard]] pybind11::object DTypeObject(ElementType type);

}  // namespace hurray::python
