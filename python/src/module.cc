// The extension module `hurray._hurray`: the format's types (format_bindings.cc) and the
// client (client_bindings.cc). The package python/hurray/__init__.py re-exports it.
#include <pybind11/pybind11.h>

#include "client_bindings.h"
#include "format_bindings.h"

PYBIND11_MODULE(_hurray, module) {
  module.doc() = "hurray: zero-copy tensor exchange between processes (extension module)";
  hurray::python::BindFormat(module);
  hurray::python::BindClient(module);
}
