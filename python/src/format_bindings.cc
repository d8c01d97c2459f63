#include "format_bindings.h"

namespace hurray::python {

void BindFormat(pybind11::module_& /*module*/) {}

}  // namespace hurray::python
