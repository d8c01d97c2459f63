// The hurray client in Python: connect, allocate/publish, acquire/release, list, describe,
// stats, delete, watch, and the exceptions. Defined in client_bindings.cc.
#pragma once

#include <pybind11/pybind11.h>

namespace hurray::python {

// Adds the client's names to `module`, after BindFormat.
void BindClient(pybind11::module_& module);

}  // namespace hurray::python
