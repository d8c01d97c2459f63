#include "client_bindings.h"

namespace hurray::python {

void BindClient(pybind11::module_& /*module*/) {}

}  // namespace hurray::python
