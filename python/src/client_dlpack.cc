#include "client_dlpack.h"

#include <dlpack/dlpack.h>
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "errors.h"

namespace hurray::python {
namespace {

namespace py = pybind11;

// What the DLManagedTensor's manager_ctx points at: the owner and the arrays it points into.
struct ManagedContext {
  DLManagedTensor managed{};
  std::shared_ptr<const void> owner;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

void DeleteManaged(DLManagedTensor* self) {
  delete static_cast<ManagedContext*>(self->manager_ctx);
}

// DLPack's code for `type`; bool travels as uint8, as DLPack 0.6 has no boolean code.
std::optional<DLDataTypeCode> DLPackCode(ElementType type) {
  switch (type) {
    case ElementType::kBool:
    case ElementType::kUint8:
    case ElementType::kUint16:
    case ElementType::kUint32:
    case ElementType::kUint64:
      return kDLUInt;
    case ElementType::kInt8:
    case ElementType::kInt16:
    case ElementType::kInt32:
    case ElementType::kInt64:
      return kDLInt;
    case ElementType::kFloat16:
    case ElementType::kFloat32:
    case ElementType::kFloat64:
      return kDLFloat;
    case ElementType::kBfloat16:
      return kDLBfloat;
    case ElementType::kComplex64:
    case ElementType::kComplex128:
      return kDLComplex;
    default:
      return std::nullopt;
  }
}

void DestroyUnconsumed(PyObject* capsule) {
  // A consumer renames the capsule "used_dltensor" and owns the tensor from then on.
  if (PyCapsule_IsValid(capsule, "dltensor") == 0) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  managed->deleter(managed);
}

}  // namespace

py::capsule MakeDLPackCapsule(const void* data, const ArraySpec& spec, const DeviceInfo& device,
                              std::shared_ptr<const void> owner) {
  const std::optional<DLDataTypeCode> code = DLPackCode(spec.type);
  if (!code) {
    throw PythonError(
        "UnsupportedError",
        fmt::format("__dlpack__: DLPack has no type for {} elements", ElementTypeName(spec.type)));
  }
  auto context = std::make_unique<ManagedContext>();
  context->owner = std::move(owner);
  context->shape.assign(spec.shape.begin(), spec.shape.end());
  context->strides.assign(spec.element_strides.begin(), spec.element_strides.end());
  DLTensor& tensor = context->managed.dl_tensor;
  tensor.data = const_cast<void*>(data);  // DLPack has no const; consumers get a read-only view.
  tensor.device = {.device_type = static_cast<DLDeviceType>(device.dlpack_device_type()),
                   .device_id = device.device_ordinal};
  tensor.ndim = static_cast<std::int32_t>(context->shape.size());
  tensor.dtype = {.code = static_cast<std::uint8_t>(*code),
                  .bits = static_cast<std::uint8_t>(ElementBitWidth(spec.type)),
                  .lanes = 1};
  tensor.shape = context->shape.data();
  tensor.strides = context->strides.empty() ? nullptr : context->strides.data();
  tensor.byte_offset = 0;
  context->managed.manager_ctx = context.get();
  context->managed.deleter = DeleteManaged;
  PyObject* capsule = PyCapsule_New(&context->managed, "dltensor", DestroyUnconsumed);
  if (capsule == nullptr) throw py::error_already_set();
  (void)context.release();  // Owned by the capsule, then by the consumer.
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace hurray::python
