// hurray.BufferHandle, the quantization classes and hurray.Descriptor: hurray::BufferHandle,
// the Quantization alternatives and hurray::TensorDescriptor, built and validated by the
// core (TensorDescriptor::Create / WithImpliedBuffers / Decode) and raised as its errors.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "format_bindings.h"
#include "format_parts.h"

namespace hurray::python {
namespace py = pybind11;
namespace {

using Shape = std::vector<std::uint64_t>;
using Metadata = std::map<std::string, std::string>;

// Where a builder's buffers live and what metadata the descriptor carries: the arguments
// every builder ends with.
struct Placement {
  std::uint64_t alignment = kMinBufferAlignment;
  std::uint8_t device_tag = 0;
  std::uint8_t memory_class = 0;
  std::optional<Metadata> metadata;
};

TensorDescriptor Build(TensorDescriptor::Parts parts, const Placement& placement) {
  parts.metadata = placement.metadata.value_or(Metadata{});
  return ValueOrRaise(TensorDescriptor::WithImpliedBuffers(
      std::move(parts), ValueOrRaise(DeviceTag::FromByte(placement.device_tag)),
      placement.alignment, ValueOrRaise(MemoryClass::FromByte(placement.memory_class))));
}

TensorDescriptor::Parts PartsOf(py::handle dtype, Shape shape) {
  TensorDescriptor::Parts parts;
  parts.element_type = ElementTypeFromPython(dtype);
  parts.shape = std::move(shape);
  return parts;
}

// Defines the static builder `name` of hurray.Descriptor. `build` takes the builder's own
// arguments, named by `own`, then a Placement's four, which are appended here.
template <typename Function, typename... Own>
void DefBuilder(py::class_<TensorDescriptor>& cls, const char* name, Function build,
                const char* doc, Own... own) {
  cls.def_static(name, build, doc, own..., py::kw_only(),
                 py::arg("alignment") = kMinBufferAlignment,
                 py::arg("device_tag") = std::uint8_t{0}, py::arg("memory_class") = std::uint8_t{0},
                 py::arg("metadata") = std::optional<Metadata>());
}

SyncMode SyncModeFromPython(const std::string& name) {
  for (SyncMode mode : {SyncMode::kProducerSynced, SyncMode::kEvent, SyncMode::kConsumerStream}) {
    if (SyncModeName(mode) == name) return mode;
  }
  throw ToPython(Error(StatusCode::kInvalidArgument,
                       fmt::format("sync_mode \"{}\" is not producer_synced, event or "
                                   "consumer_stream",
                                   name)));
}

void BindBufferHandle(py::module_& module) {
  py::class_<BufferHandle>(module, "BufferHandle",
                           "The declaration of one buffer (hurray::BufferHandle): size, "
                           "alignment, device, memory class, sync mode. A value: it refers to "
                           "no memory.")
      .def(py::init([](std::uint64_t byte_size, std::uint64_t alignment, std::uint8_t device_tag,
                       const std::string& sync_mode, std::uint8_t memory_class) {
             return ValueOrRaise(BufferHandle::Create(
                 byte_size, alignment, ValueOrRaise(DeviceTag::FromByte(device_tag)),
                 SyncModeFromPython(sync_mode), ValueOrRaise(MemoryClass::FromByte(memory_class))));
           }),
           py::arg("byte_size"), py::arg("alignment"), py::arg("device_tag") = 0,
           py::arg("sync_mode") = "producer_synced", py::arg("memory_class") = 0,
           "A validated handle: byte_size and alignment in bytes, device_tag and memory_class "
           "as their wire bytes, sync_mode by name. hurray.InvalidArgumentError for an "
           "alignment that is not a power of two or, for a non-empty buffer, is below "
           "MIN_BUFFER_ALIGNMENT, and for a reserved tag or an unknown sync mode.")
      .def_property_readonly("byte_size", &BufferHandle::byte_size, "Size in bytes.")
      .def_property_readonly("alignment", &BufferHandle::alignment,
                             "The alignment the buffer's address guarantees, in bytes.")
      .def_property_readonly(
          "device_tag", [](const BufferHandle& self) { return self.device_tag().ToByte(); },
          "The memory space as its wire byte (0 cpu, 1 cuda, ...).")
      .def_property_readonly(
          "device", [](const BufferHandle& self) { return self.device_tag().Name(); },
          "The memory space by name: 'cpu', 'cuda', ...; 'private' for a private tag.")
      .def_property_readonly(
          "memory_class", [](const BufferHandle& self) { return self.memory_class().Name(); },
          "The memory class by name: \"standard\", \"host_pinned\", \"unified\", \"peer\" "
          "(\"private\" for a private one).")
      .def_property_readonly(
          "memory_class_tag", [](const BufferHandle& self) { return self.memory_class().ToByte(); },
          "The memory class as its wire byte.")
      .def_property_readonly(
          "sync_mode", [](const BufferHandle& self) { return SyncModeName(self.sync_mode()); },
          "When a consumer may read: \"producer_synced\" (at once), \"event\" (after the "
          "producer's device event) or \"consumer_stream\".")
      .def_property_readonly("is_empty", &BufferHandle::IsEmpty, "True when byte_size is 0.")
      .def("__eq__",
           [](const BufferHandle& self, const BufferHandle& other) { return self == other; })
      .def("__repr__", [](const BufferHandle& self) {
        return fmt::format("hurray.BufferHandle({})", self.ToString());
      });
}

void BindBufferPart(py::module_& module) {
  py::class_<BufferPart>(module, "BufferPart",
                         "What one buffer of a descriptor's table holds (hurray::BufferPart): "
                         "its part, and the dtype and shape of the array it holds.")
      .def_readonly("index", &BufferPart::index, "The buffer's position in the table.")
      .def_property_readonly(
          "part", [](const BufferPart& self) { return std::string(self.part); },
          "The part's name as an array: \"data\" (dense data, or a block-paged tensor's "
          "pages), \"values\", \"indices\", \"indptr\", \"page_table\", \"scales\" or "
          "\"zero_points\".")
      .def_property_readonly(
          "field", [](const BufferPart& self) { return std::string(self.field); },
          "The descriptor field that refers to the buffer (\"layout.coo.indices_buffer\").")
      .def_property_readonly(
          "name", [](const BufferPart& self) { return std::string(self.name); },
          "What the buffer holds, in words (\"COO indices\").")
      .def_property_readonly(
          "dtype", [](const BufferPart& self) { return DTypeObject(self.element_type); },
          "The elements' type: the tensor's for data and values, uint64 for index arrays, "
          "the quantization's for scales and zero points.")
      .def_property_readonly(
          "shape", [](const BufferPart& self) { return py::tuple(py::cast(self.shape)); },
          "The shape of the array the buffer holds, in elements.")
      .def_property_readonly(
          "element_strides",
          [](const BufferPart& self) -> py::object {
            if (self.element_strides.empty()) return py::none();
            return py::tuple(py::cast(self.element_strides));
          },
          "Strided dense data's stride of each dimension, in elements; None when row-major "
          "and contiguous.")
      .def_readonly("byte_size", &BufferPart::byte_size,
                    "The bytes the shape implies (for strided data, the span its strides "
                    "address).")
      .def("__eq__", [](const BufferPart& self, const BufferPart& other) { return self == other; })
      .def("__repr__", [](const BufferPart& self) {
        return fmt::format("hurray.BufferPart(index={}, part='{}', dtype={}, shape=[{}])",
                           self.index, self.part, ElementTypeName(self.element_type),
                           fmt::join(self.shape, ", "));
      });
}

py::object OptionalDType(const std::optional<ZeroPoints>& zero_points) {
  return zero_points ? DTypeObject(zero_points->type) : py::none();
}

void BindQuantizations(py::module_& module) {
  py::class_<PerTensorAffine>(module, "PerTensorAffine",
                              "real = scale * (stored - zero_point), inline: no extra buffer.")
      .def_property_readonly(
          "kind", [](const PerTensorAffine&) { return "per_tensor_affine"; },
          "\"per_tensor_affine\".")
      .def_readonly("scale", &PerTensorAffine::scale, "The scale, the same for every element.")
      .def_readonly("zero_point", &PerTensorAffine::zero_point, "The stored value that means 0.")
      .def("__eq__", [](const PerTensorAffine& a, const PerTensorAffine& b) { return a == b; })
      .def("__repr__", [](const PerTensorAffine& q) {
        return fmt::format("hurray.PerTensorAffine(scale={:g}, zero_point={})", q.scale,
                           q.zero_point);
      });
  py::class_<PerChannelAffine>(module, "PerChannelAffine",
                               "One scale (and optionally one zero point) per index of axis.")
      .def_property_readonly(
          "kind", [](const PerChannelAffine&) { return "per_channel_affine"; },
          "\"per_channel_affine\".")
      .def_readonly("axis", &PerChannelAffine::axis, "The dimension whose indices are channels.")
      .def_readonly("scale_buffer", &PerChannelAffine::scale_buffer,
                    "The buffer-table index of the scales.")
      .def_property_readonly(
          "scale_dtype", [](const PerChannelAffine& q) { return DTypeObject(q.scale_type); },
          "The scales' element type.")
      .def_property_readonly(
          "zero_point_buffer",
          [](const PerChannelAffine& q) -> std::optional<std::uint32_t> {
            if (!q.zero_points) return std::nullopt;
            return q.zero_points->buffer;
          },
          "The buffer-table index of the zero points; None without zero points.")
      .def_property_readonly(
          "zero_point_dtype",
          [](const PerChannelAffine& q) { return OptionalDType(q.zero_points); },
          "The zero points' element type; None without zero points.")
      .def("__eq__", [](const PerChannelAffine& a, const PerChannelAffine& b) { return a == b; })
      .def("__repr__", [](const PerChannelAffine& q) {
        return fmt::format("hurray.PerChannelAffine(axis={}, scale_dtype={})", q.axis,
                           ElementTypeName(q.scale_type));
      });
  py::class_<Nf4Quantization>(module, "Nf4Quantization",
                              "NormalFloat4: one absmax scale per block_size elements.")
      .def_property_readonly(
          "kind", [](const Nf4Quantization&) { return "nf4"; }, "\"nf4\".")
      .def_readonly("block_size", &Nf4Quantization::block_size,
                    "Elements per block, each block with one scale.")
      .def_readonly("scale_buffer", &Nf4Quantization::scale_buffer,
                    "The buffer-table index of the scales.")
      .def_property_readonly(
          "scale_dtype", [](const Nf4Quantization& q) { return DTypeObject(q.scale_type); },
          "The scales' element type (float16, bfloat16 or float32).")
      .def("__eq__", [](const Nf4Quantization& a, const Nf4Quantization& b) { return a == b; })
      .def("__repr__", [](const Nf4Quantization& q) {
        return fmt::format("hurray.Nf4Quantization(block_size={}, scale_dtype={})", q.block_size,
                           ElementTypeName(q.scale_type));
      });
  py::class_<MxfpQuantization>(module, "MxfpQuantization",
                               "OCP microscaling: one E8M0 scale per block_size elements along "
                               "the last dimension.")
      .def_property_readonly(
          "kind", [](const MxfpQuantization&) { return "mxfp"; }, "\"mxfp\".")
      .def_readonly("block_size", &MxfpQuantization::block_size,
                    "Elements per block along the last dimension, each block with one scale.")
      .def_readonly("scale_buffer", &MxfpQuantization::scale_buffer,
                    "The buffer-table index of the E8M0 scales.")
      .def("__eq__", [](const MxfpQuantization& a, const MxfpQuantization& b) { return a == b; })
      .def("__repr__", [](const MxfpQuantization& q) {
        return fmt::format("hurray.MxfpQuantization(block_size={})", q.block_size);
      });
}

// Which buffer of the table holds which part ("data", "values", "indices", "indptr",
// "page_table", "scales", "zero_points"), as the tensor types name their parts.
py::dict PartBuffers(const TensorDescriptor& descriptor) {
  py::dict parts;
  for (const BufferPart& part : descriptor.BufferParts()) parts[py::str(part.part)] = part.index;
  return parts;
}

py::object QuantizationObject(const Quantization& quantization) {
  return std::visit(
      [](const auto& q) -> py::object {
        if constexpr (std::is_same_v<std::decay_t<decltype(q)>, NoQuantization>) {
          return py::none();
        } else {
          return py::cast(q);
        }
      },
      quantization);
}

template <typename Alternative, typename Member>
py::object LayoutField(const TensorDescriptor& descriptor, Member member) {
  const auto* layout = std::get_if<Alternative>(&descriptor.layout());
  return layout == nullptr ? py::none() : py::cast(layout->*member);
}

py::object Nnz(const TensorDescriptor& descriptor) {
  if (const auto* coo = std::get_if<CooLayout>(&descriptor.layout())) return py::cast(coo->nnz);
  return LayoutField<CompressedLayout>(descriptor, &CompressedLayout::nnz);
}

std::string Repr(const TensorDescriptor& d) {
  return fmt::format(
      "hurray.Descriptor({}{}, {}, quantization={}, buffers={})", ElementTypeName(d.element_type()),
      py::repr(py::tuple(py::cast(d.shape()))).cast<std::string>(), LayoutName(d.layout()),
      QuantizationName(d.quantization()), d.buffers().size());
}

TensorDescriptor FromBytes(const py::buffer& bytes) {
  const py::buffer_info info = bytes.request();
  const auto* data = static_cast<const std::uint8_t*>(info.ptr);
  return ValueOrRaise(TensorDescriptor::Decode(
      std::span(data, static_cast<std::size_t>(info.size * info.itemsize))));
}

void BindDescriptorAccessors(py::class_<TensorDescriptor>& cls) {
  cls.def_property_readonly(
         "dtype", [](const TensorDescriptor& d) { return DTypeObject(d.element_type()); },
         "The element type (hurray.DType).")
      .def_property_readonly(
          "shape", [](const TensorDescriptor& d) { return py::tuple(py::cast(d.shape())); },
          "The extent of each dimension, in elements.")
      .def_property_readonly(
          "layout", [](const TensorDescriptor& d) { return LayoutName(d.layout()); },
          "'dense', 'coo', 'csr', 'csc' or 'block_paged'.")
      .def_property_readonly(
          "quantization",
          [](const TensorDescriptor& d) { return QuantizationObject(d.quantization()); },
          "hurray.PerTensorAffine, PerChannelAffine, Nf4Quantization or MxfpQuantization; "
          "None when not quantized.")
      .def_property_readonly(
          "buffer_handles",
          [](const TensorDescriptor& d) { return py::tuple(py::cast(d.buffers())); },
          "The buffer table: one hurray.BufferHandle per buffer, in table order.")
      .def_property_readonly("metadata", &TensorDescriptor::metadata,
                             "The descriptor's string metadata, as a new dict.")
      .def_property_readonly("part_buffers", &PartBuffers,
                             "Buffer-table index of each part: {'data': 0, 'scales': 1}, ...")
      .def_property_readonly(
          "buffer_parts",
          [](const TensorDescriptor& d) { return py::tuple(py::cast(d.BufferParts())); },
          "What each buffer holds (hurray.BufferPart), the layout's first.")
      .def_property_readonly("nnz", &Nnz, "Stored values of a sparse layout; None otherwise.")
      .def_property_readonly(
          "strides",
          [](const TensorDescriptor& d) -> py::object {
            const auto* dense = std::get_if<DenseLayout>(&d.layout());
            if (dense == nullptr || dense->strides.empty()) return py::none();
            return py::tuple(py::cast(dense->strides));
          },
          "Dense strides in elements; None when row-major and contiguous (or not dense).")
      .def_property_readonly(
          "block_size",
          [](const TensorDescriptor& d) {
            return LayoutField<BlockPagedLayout>(d, &BlockPagedLayout::block_size);
          },
          "Rows per page of a block-paged layout; None otherwise.")
      .def_property_readonly(
          "num_pages",
          [](const TensorDescriptor& d) {
            return LayoutField<BlockPagedLayout>(d, &BlockPagedLayout::num_pages);
          },
          "Pages of a block-paged layout; None otherwise.")
      .def_property_readonly("element_count", &TensorDescriptor::ElementCount,
                             "The product of the shape (1 for a scalar).")
      .def_property_readonly(
          "device_tag", [](const TensorDescriptor& d) { return d.device_tag().ToByte(); },
          "The memory space of the buffers, as its wire byte (0 cpu when there are none).")
      .def(
          "to_bytes", [](const TensorDescriptor& d) { return py::bytes(d.Encode()); },
          "The encoded descriptor (docs/descriptor.md); from_bytes reads it back.")
      .def_static("from_bytes", &FromBytes, py::arg("data"),
                  "Decodes and validates an encoded descriptor.")
      .def(
          "check_buffers",
          [](const TensorDescriptor& d, const std::vector<BufferHandle>& delivered) {
            OkOrRaise(d.ValidateDeliveredBuffers(delivered));
          },
          py::arg("buffer_handles"),
          "Raises hurray.InvalidArgumentError unless delivered buffers fit the table "
          "(docs/descriptor.md, \"Checking delivered buffers\").")
      .def("__eq__", [](const TensorDescriptor& a, const TensorDescriptor& b) { return a == b; })
      .def("__repr__", &Repr)
      .def("__str__", &TensorDescriptor::ToString)
      .def(py::pickle([](const TensorDescriptor& d) { return py::bytes(d.Encode()); },
                      [](const py::bytes& bytes) { return FromBytes(bytes); }));
}

TensorDescriptor::Parts WithLayout(py::handle dtype, Shape shape, Layout layout) {
  TensorDescriptor::Parts parts = PartsOf(dtype, std::move(shape));
  parts.layout = std::move(layout);
  return parts;
}

CompressedLayout Compressed(CompressedAxis axis, std::uint64_t nnz) {
  return CompressedLayout{.axis = axis, .nnz = nnz};
}

void BindDenseBuilders(py::class_<TensorDescriptor>& cls) {
  DefBuilder(
      cls, "dense",
      [](Shape shape, py::handle dtype, std::optional<Shape> strides, std::uint64_t alignment,
         std::uint8_t device_tag, std::uint8_t memory_class, std::optional<Metadata> metadata) {
        TensorDescriptor::Parts parts = PartsOf(dtype, std::move(shape));
        parts.layout = DenseLayout{.strides = strides.value_or(Shape{})};
        return Build(std::move(parts), {alignment, device_tag, memory_class, std::move(metadata)});
      },
      "A dense descriptor (row-major unless strides, in elements, are given).", py::arg("shape"),
      py::arg("dtype"), py::arg("strides") = std::optional<Shape>());
  DefBuilder(
      cls, "per_tensor_affine",
      [](Shape shape, py::handle dtype, double scale, std::int64_t zero_point,
         std::uint64_t alignment, std::uint8_t device_tag, std::uint8_t memory_class,
         std::optional<Metadata> metadata) {
        TensorDescriptor::Parts parts = PartsOf(dtype, std::move(shape));
        parts.quantization = PerTensorAffine{.scale = scale, .zero_point = zero_point};
        return Build(std::move(parts), {alignment, device_tag, memory_class, std::move(metadata)});
      },
      "Dense, per-tensor affine: one buffer, scale and zero point inline.", py::arg("shape"),
      py::arg("dtype"), py::arg("scale"), py::arg("zero_point") = 0);
  DefBuilder(
      cls, "per_channel_affine",
      [](Shape shape, py::handle dtype, std::uint32_t axis, py::handle scale_dtype,
         py::handle zero_point_dtype, std::uint64_t alignment, std::uint8_t device_tag,
         std::uint8_t memory_class, std::optional<Metadata> metadata) {
        TensorDescriptor::Parts parts = PartsOf(dtype, std::move(shape));
        PerChannelAffine affine{.axis = axis, .scale_type = ElementTypeFromPython(scale_dtype)};
        if (!zero_point_dtype.is_none()) {
          affine.zero_points =
              ZeroPoints{.buffer = 2, .type = ElementTypeFromPython(zero_point_dtype)};
        }
        parts.quantization = affine;
        return Build(std::move(parts), {alignment, device_tag, memory_class, std::move(metadata)});
      },
      "Dense, per-channel affine: data (buffer 0), scales (1), zero points (2) when "
      "zero_point_dtype is given.",
      py::arg("shape"), py::arg("dtype"), py::arg("axis") = 0,
      py::arg("scale_dtype") = std::string("float32"), py::arg("zero_point_dtype") = py::none());
  DefBuilder(
      cls, "nf4",
      [](Shape shape, std::uint64_t block_size, py::handle scale_dtype, std::uint64_t alignment,
         std::uint8_t device_tag, std::uint8_t memory_class, std::optional<Metadata> metadata) {
        TensorDescriptor::Parts parts = PartsOf(py::str("nf4"), std::move(shape));
        parts.quantization = Nf4Quantization{.block_size = block_size,
                                             .scale_type = ElementTypeFromPython(scale_dtype)};
        return Build(std::move(parts), {alignment, device_tag, memory_class, std::move(metadata)});
      },
      "Dense NF4 codes (buffer 0) with one absmax scale per block (buffer 1).", py::arg("shape"),
      py::arg("block_size") = 64, py::arg("scale_dtype") = std::string("float32"));
  DefBuilder(
      cls, "mxfp",
      [](Shape shape, py::handle dtype, std::uint64_t block_size, std::uint64_t alignment,
         std::uint8_t device_tag, std::uint8_t memory_class, std::optional<Metadata> metadata) {
        TensorDescriptor::Parts parts = PartsOf(dtype, std::move(shape));
        parts.quantization = MxfpQuantization{.block_size = block_size};
        return Build(std::move(parts), {alignment, device_tag, memory_class, std::move(metadata)});
      },
      "Dense microscaling elements (buffer 0) with one E8M0 scale per block along the last "
      "dimension (buffer 1).",
      py::arg("shape"), py::arg("dtype") = std::string("mxfp4"), py::arg("block_size") = 32);
}

void BindSparseBuilders(py::class_<TensorDescriptor>& cls) {
  auto compressed = [](CompressedAxis axis) {
    return [axis](Shape shape, py::handle dtype, std::uint64_t nnz, std::uint64_t alignment,
                  std::uint8_t device_tag, std::uint8_t memory_class,
                  std::optional<Metadata> metadata) {
      return Build(WithLayout(dtype, std::move(shape), Compressed(axis, nnz)),
                   {alignment, device_tag, memory_class, std::move(metadata)});
    };
  };
  DefBuilder(
      cls, "coo",
      [](Shape shape, py::handle dtype, std::uint64_t nnz, std::uint64_t alignment,
         std::uint8_t device_tag, std::uint8_t memory_class, std::optional<Metadata> metadata) {
        return Build(WithLayout(dtype, std::move(shape), CooLayout{.nnz = nnz}),
                     {alignment, device_tag, memory_class, std::move(metadata)});
      },
      "COO: nnz values (buffer 0) and uint64 [nnz, rank] coordinates (buffer 1).", py::arg("shape"),
      py::arg("dtype"), py::arg("nnz"));
  DefBuilder(cls, "csr", compressed(CompressedAxis::kRows),
             "CSR: values (buffer 0), uint64 row offsets (1), uint64 column indices (2).",
             py::arg("shape"), py::arg("dtype"), py::arg("nnz"));
  DefBuilder(cls, "csc", compressed(CompressedAxis::kColumns),
             "CSC: values (buffer 0), uint64 column offsets (1), uint64 row indices (2).",
             py::arg("shape"), py::arg("dtype"), py::arg("nnz"));
  DefBuilder(
      cls, "block_paged",
      [](Shape shape, py::handle dtype, std::uint64_t block_size, std::uint64_t num_pages,
         std::uint64_t alignment, std::uint8_t device_tag, std::uint8_t memory_class,
         std::optional<Metadata> metadata) {
        return Build(WithLayout(dtype, std::move(shape),
                                BlockPagedLayout{.block_size = block_size, .num_pages = num_pages}),
                     {alignment, device_tag, memory_class, std::move(metadata)});
      },
      "Block-paged: num_pages pages of block_size rows (buffer 0) and a uint64 page table "
      "(buffer 1).",
      py::arg("shape"), py::arg("dtype"), py::arg("block_size"), py::arg("num_pages"));
}

}  // namespace

void BindDescriptor(py::module_& module) {
  BindBufferHandle(module);
  BindBufferPart(module);
  BindQuantizations(module);
  py::class_<TensorDescriptor> cls(module, "Descriptor",
                                   "A validated tensor descriptor (hurray::TensorDescriptor): "
                                   "dtype, shape, layout, quantization, buffer table, metadata. "
                                   "Immutable; build it with the static builders or from_bytes.");
  BindDescriptorAccessors(cls);
  BindDenseBuilders(cls);
  BindSparseBuilders(cls);
}

}  // namespace hurray::python
