// The extension module `hurray._hurray`: the format's types (format_bindings.cc) and the
// client (client_bindings.cc). The package python/hurray/__init__.py re-exports it.
#include <pybind11/pybind11.h>

#include "client_bindings.h"
#include "format_bindings.h"

// The version of the hurray libraries it is built against: the project's (CMake), or the
// installed library's (python/setup.py, from pkg-config).
#ifndef HURRAY_VERSION
#error "HURRAY_VERSION must name the version of the hurray libraries the module is built against"
#endif

PYBIND11_MODULE(_hurray, module) {
  module.doc() = "hurray: zero-copy tensor exchange between processes (extension module)";
  module.attr("__version__") = HURRAY_VERSION;
  hurray::python::BindFormat(module);
  hurray::python::BindClient(module);
}
