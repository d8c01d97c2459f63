// hurray::Error as the Python exception of its code (python/hurray/_errors.py), and the
// format's own exceptions. The one translation of errors for the whole module.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::python {

// The Python exception for `error` (hurray.NotFoundError for NOT_FOUND, ...), ready to raise:
// `throw ToPython(result.error());`. Needs the GIL.
[[nodiscard]] pybind11::error_already_set ToPython(const Error& error);

// One of the exception classes of hurray._errors by its name ("CopyRequiredError",
// "BufferError", "UnsupportedError") carrying `message`, ready to raise. Needs the GIL.
[[nodiscard]] pybind11::error_already_set PythonError(std::string_view class_name,
                                                      const std::string& message);

// The value of `result`, or throws ToPython(its error).
template <typename T>
T ValueOrRaise(Result<T> result) {
  if (!result) throw ToPython(result.error());
  return std::move(*result);
}
inline void OkOrRaise(const Status& status) {
  if (!status) throw ToPython(status.error());
}

}  // namespace hurray::python
