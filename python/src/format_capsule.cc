// The "hurray_tensor" capsule (docs/python.md, "The in-process protocol: `__hurray__`"),
// through the C ABI of hurray.h (libhurray.so): the producer's half (MakeTensorCapsule) and
// the consumer's (_open_capsule, behind hurray.from_hurray).
//
// The capsule's pointer is a HurrayBufferList (element i = buffer i of the descriptor's
// table) and its context a HurrayTensorContext carrying the encoded descriptor, whose
// owner_release drops the reference to the Python owner of the memory. While the capsule is
// named "hurray_tensor" its destructor destroys both; a consumer renames it
// "used_hurray_tensor" and takes them over.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "errors.h"
#include "format_bindings.h"
#include "format_parts.h"
#include "hurray.h"

namespace hurray::python {
namespace py = pybind11;
namespace {

constexpr const char* kCapsuleName = "hurray_tensor";
constexpr const char* kUsedCapsuleName = "used_hurray_tensor";

// Raises the error of a failed C call `function`, which left `message`, as its Python
// exception.
void CheckC(HurrayStatus status, const char* function, std::string_view message) {
  if (status == HURRAY_OK) return;
  const StatusCode code =
      status == HURRAY_ERR_INVALID_ARGUMENT ? StatusCode::kInvalidArgument : StatusCode::kInternal;
  throw ToPython(
      Error(code, fmt::format("{}: {}: {}", function, hurray_status_name(status), message)));
}

void CheckC(HurrayStatus status, const char* function) {
  CheckC(status, function, hurray_last_error_message());
}

// The list and context a capsule owns, destroyed together (the context after the list, so
// the owner outlives every handle on its memory).
struct CapsuleContents {
  HurrayBufferList* list = nullptr;
  HurrayTensorContext* context = nullptr;

  CapsuleContents() = default;
  CapsuleContents(const CapsuleContents&) = delete;
  CapsuleContents& operator=(const CapsuleContents&) = delete;
  ~CapsuleContents() {
    hurray_buffer_list_destroy(&list);
    hurray_tensor_context_destroy(&context);
  }
};

// The destructor of an unconsumed capsule destroys its list and context.
void DestroyCapsule(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsuleName) == 0) return;  // Consumed: the consumer owns.
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  CapsuleContents contents;
  contents.list = static_cast<HurrayBufferList*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  contents.context = static_cast<HurrayTensorContext*>(PyCapsule_GetContext(capsule));
  PyErr_Restore(type, value, traceback);
}

void PushBuffer(HurrayBufferList* list, const CapsuleBuffer& buffer) {
  HurrayBuffer* handle = nullptr;
  CheckC(hurray_buffer_from_ptr(const_cast<void*>(buffer.data), buffer.byte_size,
                                buffer.handle.alignment(), buffer.handle.device_tag().ToByte(),
                                SyncModeToByte(buffer.handle.sync_mode()),
                                buffer.handle.memory_class().ToByte(), nullptr, nullptr, &handle),
         "hurray_buffer_from_ptr");
  const HurrayStatus pushed = hurray_buffer_list_push(list, handle);
  if (pushed != HURRAY_OK) {
    const std::string message = hurray_last_error_message();  // The destroy clears it.
    (void)hurray_buffer_destroy(handle);
    CheckC(pushed, "hurray_buffer_list_push", message);
  }
}

// Memory of a consumed capsule, one buffer of it, read-only through the buffer protocol. It
// keeps the capsule's contents (and with them the producer's owner) alive.
struct ConsumedBuffer {
  std::shared_ptr<CapsuleContents> contents;
  const void* data = nullptr;
  std::uint64_t byte_size = 0;
};

std::uint8_t EmptyBufferByte = 0;  // What an empty buffer's view points at: never read.

void Unsupported(const std::string& message) { throw PythonError("UnsupportedError", message); }
void Unusable(const std::string& message) { throw PythonError("BufferError", message); }

// The capsule's descriptor, after the ABI version check.
TensorDescriptor CapsuleDescriptor(const HurrayTensorContext* context) {
  std::uint32_t abi_version = 0;
  CheckC(hurray_tensor_context_abi_version(context, &abi_version),
         "hurray_tensor_context_abi_version");
  if (abi_version != HURRAY_C_ABI_VERSION) {
    Unsupported(fmt::format("the capsule's producer has C ABI version {}, this module version {}",
                            abi_version, HURRAY_C_ABI_VERSION));
  }
  const std::uint8_t* bytes = nullptr;
  std::uint64_t len = 0;
  CheckC(hurray_tensor_context_descriptor(context, &bytes, &len),
         "hurray_tensor_context_descriptor");
  if (len == 0) {
    throw ToPython(Error(StatusCode::kInvalidArgument, "the capsule carries no descriptor"));
  }
  return ValueOrRaise(TensorDescriptor::Decode(std::span(bytes, static_cast<std::size_t>(len))));
}

// Every buffer of the list, as its data pointer and declared handle.
std::vector<CapsuleBuffer> ListBuffers(const HurrayBufferList* list) {
  std::uint64_t count = 0;
  CheckC(hurray_buffer_list_len(list, &count), "hurray_buffer_list_len");
  std::vector<CapsuleBuffer> buffers;
  for (std::uint64_t i = 0; i < count; ++i) {
    HurrayBuffer* borrowed = nullptr;
    CheckC(hurray_buffer_list_get(list, i, &borrowed), "hurray_buffer_list_get");
    void* data = nullptr;
    std::uint64_t byte_size = 0, alignment = 0;
    std::uint8_t device = 0, memory = 0, sync = 0;
    CheckC(hurray_buffer_data_ptr(borrowed, &data), "hurray_buffer_data_ptr");
    CheckC(hurray_buffer_byte_size(borrowed, &byte_size), "hurray_buffer_byte_size");
    CheckC(hurray_buffer_alignment(borrowed, &alignment), "hurray_buffer_alignment");
    CheckC(hurray_buffer_device_tag(borrowed, &device), "hurray_buffer_device_tag");
    CheckC(hurray_buffer_memory_class(borrowed, &memory), "hurray_buffer_memory_class");
    CheckC(hurray_buffer_sync_mode(borrowed, &sync), "hurray_buffer_sync_mode");
    buffers.push_back(CapsuleBuffer{
        data, byte_size,
        ValueOrRaise(BufferHandle::Create(
            byte_size, alignment, ValueOrRaise(DeviceTag::FromByte(device)),
            ValueOrRaise(SyncModeFromByte(sync)), ValueOrRaise(MemoryClass::FromByte(memory))))});
  }
  return buffers;
}

// Buffers a Python consumer can read in place: CPU memory, producer-synced.
void CheckReadable(const std::vector<CapsuleBuffer>& buffers) {
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const BufferHandle& handle = buffers[i].handle;
    if (handle.device_tag() != DeviceTag::Cpu()) {
      Unsupported(fmt::format("buffer {} is on device {}: only CPU buffers are read in process", i,
                              handle.device_tag().Name()));
    }
    if (handle.sync_mode() != SyncMode::kProducerSynced) {
      Unsupported(fmt::format("buffer {} is {}: this module cannot perform the wait it requires", i,
                              SyncModeName(handle.sync_mode())));
    }
  }
}

// Takes over a "hurray_tensor" capsule: checks it (every check docs/python.md gives a consumer)
// and only then renames it "used_hurray_tensor". Returns (descriptor, buffer handles, buffers).
py::tuple OpenCapsule(py::handle object) {
  if (PyCapsule_CheckExact(object.ptr()) == 0) {
    throw py::type_error(fmt::format("__hurray__() returned {}, not a capsule",
                                     py::repr(py::type::handle_of(object)).cast<std::string>()));
  }
  if (PyCapsule_IsValid(object.ptr(), kCapsuleName) == 0) {
    const char* name = PyCapsule_GetName(object.ptr());
    Unusable(name != nullptr && std::string(name) == kUsedCapsuleName
                 ? std::string("the capsule was already consumed (it is named used_hurray_tensor)")
                 : fmt::format("the capsule is named {}, not hurray_tensor",
                               name == nullptr ? "nothing" : name));
  }
  auto* list = static_cast<HurrayBufferList*>(PyCapsule_GetPointer(object.ptr(), kCapsuleName));
  auto* context = static_cast<HurrayTensorContext*>(PyCapsule_GetContext(object.ptr()));
  if (context == nullptr) Unusable("the capsule carries no HurrayTensorContext");
  const TensorDescriptor descriptor = CapsuleDescriptor(context);
  const std::vector<CapsuleBuffer> buffers = ListBuffers(list);
  std::vector<BufferHandle> handles;
  handles.reserve(buffers.size());
  for (const CapsuleBuffer& buffer : buffers) handles.push_back(buffer.handle);
  OkOrRaise(descriptor.ValidateDeliveredBuffers(handles));
  CheckReadable(buffers);

  auto contents = std::make_shared<CapsuleContents>();
  contents->list = list;
  contents->context = context;
  if (PyCapsule_SetName(object.ptr(), kUsedCapsuleName) != 0) {
    contents->list = nullptr;  // Still the capsule's.
    contents->context = nullptr;
    throw py::error_already_set();
  }
  py::list views;
  for (const CapsuleBuffer& buffer : buffers) {
    views.append(ConsumedBuffer{contents, buffer.byte_size == 0 ? &EmptyBufferByte : buffer.data,
                                buffer.byte_size});
  }
  return py::make_tuple(descriptor, py::tuple(py::cast(handles)), py::tuple(views));
}

}  // namespace

void ReleasePythonReference(void* object) {
  if (Py_IsInitialized() == 0) return;  // At exit the interpreter has freed its objects.
  const PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF(static_cast<PyObject*>(object));
  PyGILState_Release(state);
}

py::capsule MakeTensorCapsule(const TensorDescriptor& descriptor,
                              std::span<const CapsuleBuffer> buffers, py::object owner) {
  CapsuleContents contents;
  CheckC(hurray_buffer_list_new(buffers.size(), &contents.list), "hurray_buffer_list_new");
  for (const CapsuleBuffer& buffer : buffers) PushBuffer(contents.list, buffer);
  const std::string encoded = descriptor.Encode();
  PyObject* owner_reference = owner.release().ptr();
  const HurrayStatus created = hurray_tensor_context_new(
      reinterpret_cast<const std::uint8_t*>(encoded.data()), encoded.size(),
      &ReleasePythonReference, owner_reference, &contents.context);
  if (created != HURRAY_OK) Py_DECREF(owner_reference);
  CheckC(created, "hurray_tensor_context_new");

  py::capsule capsule(static_cast<void*>(contents.list), kCapsuleName, &DestroyCapsule);
  if (PyCapsule_SetContext(capsule.ptr(), contents.context) != 0) throw py::error_already_set();
  contents.list = nullptr;  // The capsule's now.
  contents.context = nullptr;
  return capsule;
}

void BindCapsule(py::module_& module) {
  py::class_<ConsumedBuffer>(module, "_CapsuleBuffer", py::buffer_protocol(),
                             "One buffer of a consumed capsule (read-only bytes).")
      .def_buffer([](const ConsumedBuffer& self) {
        return py::buffer_info(const_cast<void*>(self.data), 1, "B",
                               static_cast<py::ssize_t>(self.byte_size), /*readonly=*/true);
      });
  module.def(
      "_tensor_capsule",
      [](const TensorDescriptor& descriptor,
         const std::vector<std::pair<std::uintptr_t, BufferHandle>>& buffers, py::object owner) {
        std::vector<CapsuleBuffer> parts;
        parts.reserve(buffers.size());
        for (const auto& [address, handle] : buffers) {
          parts.push_back(
              CapsuleBuffer{reinterpret_cast<const void*>(address), handle.byte_size(), handle});
        }
        return MakeTensorCapsule(descriptor, parts, std::move(owner));
      },
      py::arg("descriptor"), py::arg("buffers"), py::arg("owner"),
      "The hurray_tensor capsule over (address, BufferHandle) pairs that `owner` keeps alive.");
  module.def("_open_capsule", &OpenCapsule, py::arg("capsule"),
             "Consumes a hurray_tensor capsule: (Descriptor, buffer handles, buffers).");
}

}  // namespace hurray::python
