// The C++ half of hurray.save and hurray.load (python/hurray/_file.py): tensors written to a
// .hrry file through FileWriter and read back through FileReader (docs/file-format.md), in
// this process, without a daemon.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "errors.h"
#include "format_parts.h"
#include "hurray/buffer_handle.h"
#include "hurray/file_reader.h"
#include "hurray/file_writer.h"

namespace hurray::python {
namespace py = pybind11;
namespace {

// One C-contiguous buffer of a Python object, held (Move-only) until destroyed.
class HeldBuffer {
 public:
  HeldBuffer(py::handle object, const std::string& name, std::size_t index) {
    if (PyObject_GetBuffer(object.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      throw ToPython(
          InvalidArgumentError(
              fmt::format("tensor {}: buffers[{}] ({}) is not a C-contiguous buffer", name, index,
                          py::type::of(object).attr("__name__").cast<std::string>()))
              .error());
    }
    held_ = true;
  }
  HeldBuffer(HeldBuffer&& other) noexcept : view_(other.view_), held_(other.held_) {
    other.held_ = false;
  }
  HeldBuffer& operator=(HeldBuffer&&) = delete;
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  ~HeldBuffer() {
    if (held_) PyBuffer_Release(&view_);
  }

  [[nodiscard]] std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// A saved tensor as _file.py passes it: name, descriptor, buffers in descriptor order.
using SavedTensor = std::tuple<std::string, TensorDescriptor, std::vector<py::object>>;

// Writes every tensor to `path`; the file appears only once all of them are written.
void Save(const std::string& path, const std::vector<SavedTensor>& tensors) {
  Result<FileWriter> writer = [&] {
    const py::gil_scoped_release release;
    return FileWriter::Create(path);
  }();
  if (!writer) throw ToPython(writer.error());
  for (const auto& [name, descriptor, objects] : tensors) {
    std::vector<HeldBuffer> held;
    std::vector<std::span<const std::byte>> buffers;
    held.reserve(objects.size());
    buffers.reserve(objects.size());
    for (std::size_t i = 0; i < objects.size(); ++i) {
      buffers.push_back(held.emplace_back(objects[i], name, i).bytes());
    }
    const Status written = [&] {
      const py::gil_scoped_release release;
      return writer->WriteTensor(name, descriptor, buffers);
    }();
    OkOrRaise(written);
  }
  const Status finished = [&] {
    const py::gil_scoped_release release;
    return writer->Finish();
  }();
  OkOrRaise(finished);
}

// `byte_size` bytes of fresh memory aligned to `alignment`: a uint8 ndarray viewing part of
// a larger one, and the span the reader fills.
std::pair<py::object, std::span<std::byte>> AlignedBytes(std::uint64_t byte_size,
                                                         std::uint64_t alignment) {
  const auto size = static_cast<py::ssize_t>(byte_size);
  if (byte_size == 0) return {py::array_t<std::uint8_t>(0), {}};
  py::array_t<std::uint8_t> raw(size + static_cast<py::ssize_t>(alignment));
  const auto address = reinterpret_cast<std::uintptr_t>(raw.mutable_data());
  const auto offset = static_cast<py::ssize_t>((alignment - address % alignment) % alignment);
  py::object part = raw[py::slice(offset, offset + size, 1)];
  return {part, {reinterpret_cast<std::byte*>(raw.mutable_data()) + offset, byte_size}};
}

// Every tensor of the .hrry file at `path` (FileReader::Open checks the whole layout), its
// buffers read into fresh aligned memory and checked against their checksums: a list of
// (name, descriptor, [uint8 ndarray per buffer]).
py::list Load(const std::string& path) {
  Result<FileReader> reader = [&] {
    const py::gil_scoped_release release;
    return FileReader::Open(path);
  }();
  if (!reader) throw ToPython(reader.error());
  py::list loaded;
  std::vector<FileReader::BufferDestination> destinations;
  for (std::size_t t = 0; t < reader->tensors().size(); ++t) {
    const FileTensorEntry& entry = reader->tensors()[t];
    const auto& table = entry.descriptor.buffers();
    py::list buffers;
    for (std::size_t b = 0; b < table.size(); ++b) {
      auto [array, span] =
          AlignedBytes(table[b].byte_size(), std::max(table[b].alignment(), kMinBufferAlignment));
      destinations.push_back({.tensor = t, .buffer = b, .destination = span});
      buffers.append(std::move(array));
    }
    loaded.append(py::make_tuple(entry.name, entry.descriptor, std::move(buffers)));
  }
  const Status read = [&] {
    const py::gil_scoped_release release;
    return reader->ReadBuffers(destinations);
  }();
  OkOrRaise(read);
  return loaded;
}

}  // namespace

void BindFile(py::module_& module) {
  module.def("_save", &Save, py::arg("path"), py::arg("tensors"),
             "Writes (name, Descriptor, buffers) tuples to a .hrry file at `path`.");
  module.def("_load", &Load, py::arg("path"),
             "The (name, Descriptor, buffers) tuples of the .hrry file at `path`.");
}

}  // namespace hurray::python
