#include "format_bindings.h"

#include "format_parts.h"

namespace hurray::python {

void BindFormat(pybind11::module_& module) {
  module.attr("MIN_BUFFER_ALIGNMENT") = kMinBufferAlignment;
  module.attr("PAGE_ALIGNMENT") = kPageAlignment;
  BindDTypes(module);
  BindDescriptor(module);
  BindCapsule(module);
  BindFile(module);
}

}  // namespace hurray::python
