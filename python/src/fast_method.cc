#include "fast_method.h"

#include <string>

namespace hurray::python {

namespace py = pybind11;

void InstallFastMethod(const py::handle& cls, const char* name, FastMethod& method,
                       FastEntry entry) {
  const py::object bound = cls.attr("__dict__")[name];
  // pybind11 binds a method as an instancemethod of a function; the function takes self.
  const py::object function =
      PyInstanceMethod_Check(bound.ptr()) != 0
          ? py::reinterpret_borrow<py::object>(PyInstanceMethod_GET_FUNCTION(bound.ptr()))
          : bound;
  method.doc = py::str(function.attr("__doc__"));
  method.fallback = function.inc_ref().ptr();  // Never released: the process keeps it.
  method.definition = PyMethodDef{
      .ml_name = name,
      // NOLINTNEXTLINE(*-reinterpret-cast): CPython's calling conventions share one type.
      .ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(entry)),
      .ml_flags = METH_FASTCALL | METH_KEYWORDS,
      .ml_doc = method.doc.c_str()};
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());  // NOLINT(*-reinterpret-cast)
  const auto descriptor =
      py::reinterpret_steal<py::object>(PyDescr_NewMethod(type, &method.definition));
  if (!descriptor) throw py::error_already_set();
  py::setattr(cls, name, descriptor);
}

}  // namespace hurray::python
