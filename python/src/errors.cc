#include "errors.h"

namespace hurray::python {
namespace {

pybind11::error_already_set Raised(const pybind11::object& exception) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  return {};
}

}  // namespace

pybind11::error_already_set ToPython(const Error& error) {
  const pybind11::module_ errors = pybind11::module_::import("hurray._errors");
  return Raised(
      errors.attr("error_for")(std::string(StatusCodeName(error.code())), error.message()));
}

pybind11::error_already_set PythonError(std::string_view class_name, const std::string& message) {
  const pybind11::module_ errors = pybind11::module_::import("hurray._errors");
  return Raised(errors.attr(std::string(class_name).c_str())(message));
}

}  // namespace hurray::python
