// hurray.DType: the element types of the format as Python objects, and their mapping to
// NumPy and torch dtypes.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "errors.h"
#include "format_bindings.h"
#include "format_parts.h"

namespace hurray::python {
namespace py = pybind11;
namespace {

// The Python value of an element type; one object per type lives in the module.
struct DType {
  ElementType type;
};

// The module attribute of a type: its name, but "bool_" for bool (a Python keyword's twin).
std::string AttributeName(ElementType type) {
  return type == ElementType::kBool ? "bool_" : std::string(ElementTypeName(type));
}

bool HasNumpyDType(ElementType type) {
  switch (type) {
    case ElementType::kBool:
    case ElementType::kInt8:
    case ElementType::kInt16:
    case ElementType::kInt32:
    case ElementType::kInt64:
    case ElementType::kUint8:
    case ElementType::kUint16:
    case ElementType::kUint32:
    case ElementType::kUint64:
    case ElementType::kFloat16:
    case ElementType::kFloat32:
    case ElementType::kFloat64:
    case ElementType::kComplex64:
    case ElementType::kComplex128:
      return true;
    default:
      return false;
  }
}

py::error_already_set NamesNoType(py::handle dtype) {
  return ToPython(Error(
      StatusCode::kInvalidArgument,
      fmt::format("dtype {} names no hurray element type", py::repr(dtype).cast<std::string>())));
}

// A torch.dtype ("torch.float32") by its name, without importing torch.
bool IsTorchDType(py::handle dtype) {
  const py::handle type = py::type::handle_of(dtype);
  return type.attr("__module__").cast<std::string>() == "torch" &&
         type.attr("__name__").cast<std::string>() == "dtype";
}

ElementType FromName(std::string_view name, py::handle dtype) {
  if (auto type = ElementTypeFromName(name)) return *type;
  throw NamesNoType(dtype);
}

// A NumPy dtype, scalar type or dtype string, through numpy.dtype(); native byte order only.
ElementType FromNumpy(py::handle dtype) {
  py::object numpy_dtype;
  try {
    numpy_dtype = py::module_::import("numpy").attr("dtype")(dtype);
  } catch (const py::error_already_set&) {
    throw NamesNoType(dtype);
  }
  if (!numpy_dtype.attr("isnative").cast<bool>()) {
    throw ToPython(Error(StatusCode::kInvalidArgument,
                         fmt::format("dtype {} is not in native byte order",
                                     py::repr(numpy_dtype).cast<std::string>())));
  }
  return FromName(numpy_dtype.attr("name").cast<std::string>(), dtype);
}

}  // namespace

ElementType ElementTypeFromPython(py::handle dtype) {
  if (py::isinstance<DType>(dtype)) return dtype.cast<const DType&>().type;
  if (py::isinstance<py::str>(dtype)) {
    if (auto type = ElementTypeFromName(dtype.cast<std::string>())) return *type;
    return FromNumpy(dtype);
  }
  if (IsTorchDType(dtype)) {
    auto name = py::str(dtype).cast<std::string>();
    return FromName(std::string_view(name).substr(name.rfind('.') + 1), dtype);
  }
  return FromNumpy(dtype);
}

py::object NumpyDTypeOf(ElementType type) {
  if (!HasNumpyDType(type)) return py::none();
  return py::module_::import("numpy").attr("dtype")(std::string(ElementTypeName(type)));
}

py::object DTypeObject(ElementType type) {
  return py::module_::import("hurray._hurray").attr(AttributeName(type).c_str());
}

void BindDTypes(py::module_& module) {
  py::class_<DType>(module, "DType",
                    "An element type of the format: hurray.float32, hurray.nf4, ... "
                    "Compare with ==; hurray.dtype() converts NumPy and torch dtypes.")
      .def_property_readonly(
          "name", [](const DType& self) { return ElementTypeName(self.type); },
          "The format's name of the type ('float32', 'bool', 'nf4').")
      .def_property_readonly(
          "tag", [](const DType& self) { return ElementTypeTag(self.type); },
          "The type's byte in an encoded descriptor (docs/descriptor.md).")
      .def_property_readonly(
          "bits", [](const DType& self) { return ElementBitWidth(self.type); },
          "Bits per element: 4 for the 4-bit types, 8 times itemsize for the others.")
      .def_property_readonly(
          "itemsize",
          [](const DType& self) -> py::object {
            if (IsPacked(self.type)) return py::none();
            return py::int_(ElementBitWidth(self.type) / 8);
          },
          "Bytes per element, or None for the 4-bit types (two elements per byte).")
      .def_property_readonly(
          "numpy", [](const DType& self) { return NumpyDTypeOf(self.type); },
          "The NumPy dtype, or None when NumPy has none (bfloat16, float8, 4-bit types).")
      .def("__eq__",
           [](const DType& self, py::handle other) {
             return py::isinstance<DType>(other) && other.cast<const DType&>().type == self.type;
           })
      .def("__hash__",
           [](const DType& self) { return py::hash(py::int_(ElementTypeTag(self.type))); })
      .def("__repr__",
           [](const DType& self) { return fmt::format("hurray.{}", AttributeName(self.type)); })
      .def("__str__", [](const DType& self) { return std::string(ElementTypeName(self.type)); });

  for (unsigned tag = 0; tag <= 0xFF; ++tag) {
    auto type = ElementTypeFromTag(static_cast<std::uint8_t>(tag));
    if (type) module.attr(AttributeName(*type).c_str()) = DType{*type};
  }
  module.def(
      "dtype", [](py::handle dtype) { return DTypeObject(ElementTypeFromPython(dtype)); },
      py::arg("dtype"),
      "The hurray dtype of a hurray dtype, a NumPy dtype, scalar type or name, or a torch.dtype. "
      "Raises hurray.InvalidArgumentError for one that names no element type.");
}

}  // namespace hurray::python
