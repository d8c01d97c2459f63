// The Hurray format in Python: dtypes, descriptors, buffer handles, hurray.Tensor, the
// __hurray__ capsule protocol and from_numpy / from_hurray. Defined in format_bindings.cc.
#pragma once

#include <pybind11/pybind11.h>

namespace hurray::python {

// Adds the format's names to `module`. Runs first: the client's bindings use its types.
void BindFormat(pybind11::module_& module);

}  // namespace hurray::python
