// Fast methods: the plain form of a hot call (a warm loop's `client.acquire(name)` and
// `view.release()`) served by a METH_FASTCALL method of CPython's own, without pybind11's
// dispatcher (its argument vectors, type look-ups by name hash and loader state cost more
// than the call they wrap: docs/performance.md, "Python"). Every other form, and the plain
// form whenever the fast function declines, goes to the method pybind11 bound first, so that
// conversions, errors and docstrings stay one.
//
// Uses pybind11's detail API (type_info, type_caster_generic) of the Debian package the
// module is built against.
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <typeinfo>
#include <vector>

namespace hurray::python {

// A fast function: the result (a new reference); or nullptr with a Python error set; or
// nullptr with none set, to hand the call to the bound method. `args` and `kwnames` as
// vectorcall passes them (self not among them).
using FastFunction = PyObject* (*)(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames);

// METH_FASTCALL | METH_KEYWORDS's entry (CPython 3.13's PyCFunctionFastWithKeywords).
using FastEntry = PyObject* (*)(PyObject* self, PyObject* const* args, Py_ssize_t nargsf,
                                PyObject* kwnames);

// One fast method: static storage, alive for the life of the process (CPython keeps a
// pointer to `definition`).
struct FastMethod {
  FastFunction fast = nullptr;
  PyObject* fallback = nullptr;  // The bound method; set by InstallFastMethod.
  std::string doc;               // Its docstring.
  PyMethodDef definition{};
};

// Vectorcall's entry of `Method`: runs its fast function, then, where it declines, the
// bound method with self in front of the arguments.
template <FastMethod& Method>
PyObject* FastMethodEntry(PyObject* self, PyObject* const* args, Py_ssize_t nargsf,
                          PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  try {
    if (PyObject* result = Method.fast(self, args, nargs, kwnames); result != nullptr) {
      return result;
    }
  } catch (pybind11::error_already_set& error) {
    error.restore();
    return nullptr;
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  } catch (const std::exception& error) {  // None is expected; none may cross into CPython.
    PyErr_SetString(PyExc_SystemError, error.what());
    return nullptr;
  }
  if (PyErr_Occurred() != nullptr) return nullptr;
  const Py_ssize_t count = nargs + (kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0);
  std::vector<PyObject*> all(static_cast<std::size_t>(count) + 1);
  all[0] = self;
  std::copy_n(args, count, all.begin() + 1);
  return PyObject_Vectorcall(Method.fallback, all.data(), static_cast<std::size_t>(nargs) + 1,
                             kwnames);
}

// Replaces the method `name` of `cls` (bound by pybind11 already; kept as the fallback,
// with its docstring) by `method`, entered through `entry`. `name` is a string literal.
void InstallFastMethod(const pybind11::handle& cls, const char* name, FastMethod& method,
                       FastEntry entry);

// InstallFastMethod of `Method` through its own entry, FastMethodEntry<Method>.
template <FastMethod& Method>
void InstallFastMethod(const pybind11::handle& cls, const char* name) {
  InstallFastMethod(cls, name, Method, &FastMethodEntry<Method>);
}

// The C++ object of `self` when it is exactly of the class `type` describes (a subclass's
// instance: nullptr, for the bound method). No look-up by name.
template <typename T>
T* ExactInstance(PyObject* self, const pybind11::detail::type_info* type) {
  if (Py_TYPE(self) != type->type) return nullptr;
  pybind11::detail::type_caster_generic caster(type);
  if (!caster.load(self, /*convert=*/false)) return nullptr;
  return static_cast<T*>(caster.value);
}

// A new Python object of the class `type` describes, owning `value`: no look-up by name,
// and the value is not moved again. nullptr with the error set when it cannot be made.
template <typename T>
PyObject* NewInstance(std::unique_ptr<T> value, const pybind11::detail::type_info* type) {
  const pybind11::handle made = pybind11::detail::type_caster_generic::cast(
      value.get(), pybind11::return_value_policy::take_ownership, pybind11::handle(), type, nullptr,
      nullptr);
  if (made) (void)value.release();  // The object owns it now.
  return made.ptr();
}

// pybind11's record of the class bound for T (bound before this is called).
template <typename T>
const pybind11::detail::type_info* BoundType() {
  return pybind11::detail::get_type_info(typeid(T), /*throw_if_missing=*/true);
}

}  // namespace hurray::python
