#include "client_arrays.h"

#include <cstddef>
#include <variant>

#include "format_bindings.h"
#include "hurray/checked_math.h"

namespace hurray::python {
namespace {

namespace py = pybind11;
using internal::CeilDiv;

ArraySpec Uint64s(std::vector<std::uint64_t> shape) {
  return {.type = ElementType::kUint64, .shape = std::move(shape), .element_strides = {}};
}

// The spec of `index` when the layout refers to it.
std::optional<ArraySpec> LayoutSpec(const TensorDescriptor& descriptor, std::uint32_t index) {
  const ElementType type = descriptor.element_type();
  const std::vector<std::uint64_t>& shape = descriptor.shape();
  const Layout& layout = descriptor.layout();
  if (const auto* dense = std::get_if<DenseLayout>(&layout)) {
    if (index == dense->data_buffer) return ArraySpec{type, shape, dense->strides};
  } else if (const auto* coo = std::get_if<CooLayout>(&layout)) {
    if (index == coo->values_buffer) return ArraySpec{type, {coo->nnz}, {}};
    if (index == coo->indices_buffer) return Uint64s({coo->nnz, shape.size()});
  } else if (const auto* compressed = std::get_if<CompressedLayout>(&layout)) {
    const std::uint64_t compressed_extent =
        compressed->axis == CompressedAxis::kRows ? shape[0] : shape[1];
    if (index == compressed->values_buffer) return ArraySpec{type, {compressed->nnz}, {}};
    if (index == compressed->primary_index_buffer) return Uint64s({compressed_extent + 1});
    if (index == compressed->secondary_index_buffer) return Uint64s({compressed->nnz});
  } else if (const auto* paged = std::get_if<BlockPagedLayout>(&layout)) {
    if (index == paged->data_buffer) {
      std::vector<std::uint64_t> pages{paged->num_pages, paged->block_size};
      pages.insert(pages.end(), shape.begin() + 1, shape.end());
      return ArraySpec{type, std::move(pages), {}};
    }
    if (index == paged->page_table_buffer) return Uint64s({CeilDiv(shape[0], paged->block_size)});
  }
  return std::nullopt;
}

// The spec of `index` when the quantization refers to it.
std::optional<ArraySpec> QuantizationSpec(const TensorDescriptor& descriptor, std::uint32_t index) {
  const std::vector<std::uint64_t>& shape = descriptor.shape();
  const Quantization& quantization = descriptor.quantization();
  if (const auto* channel = std::get_if<PerChannelAffine>(&quantization)) {
    const std::uint64_t channels = shape[channel->axis];
    if (index == channel->scale_buffer) return ArraySpec{channel->scale_type, {channels}, {}};
    if (channel->zero_points && index == channel->zero_points->buffer) {
      return ArraySpec{channel->zero_points->type, {channels}, {}};
    }
  } else if (const auto* nf4 = std::get_if<Nf4Quantization>(&quantization)) {
    if (index == nf4->scale_buffer) {
      return ArraySpec{nf4->scale_type, {CeilDiv(descriptor.ElementCount(), nf4->block_size)}, {}};
    }
  } else if (const auto* mxfp = std::get_if<MxfpQuantization>(&quantization)) {
    if (index == mxfp->scale_buffer) {
      std::vector<std::uint64_t> scales(shape.begin(), shape.end() - 1);
      scales.push_back(CeilDiv(shape.back(), mxfp->block_size));
      return ArraySpec{ElementType::kFloat8E8m0, std::move(scales), {}};
    }
  }
  return std::nullopt;
}

// NumPy wants a non-null address even for zero bytes (null makes pybind11 allocate).
const void* NonNull(const void* data) {
  static const std::byte kEmpty{};
  return data != nullptr ? data : &kEmpty;
}

py::array MakeArray(const py::dtype& dtype, std::vector<py::ssize_t> shape,
                    std::vector<py::ssize_t> strides, const void* data, py::object owner,
                    bool writable) {
  py::array array(dtype, std::move(shape), std::move(strides), NonNull(data), owner);
  if (!writable) array.attr("flags").attr("writeable") = false;
  return array;
}

}  // namespace

ArraySpec BufferArraySpec(const TensorDescriptor& descriptor, std::uint32_t index) {
  if (auto spec = LayoutSpec(descriptor, index)) return *std::move(spec);
  if (auto spec = QuantizationSpec(descriptor, index)) return *std::move(spec);
  // Create guarantees every buffer has a role; bytes are the honest fallback.
  return ArraySpec{ElementType::kUint8, {descriptor.buffers()[index].byte_size()}, {}};
}

std::optional<std::uint32_t> PartBuffer(const TensorDescriptor& descriptor, std::string_view part) {
  for (const auto& [name, index] : DescriptorParts(descriptor)) {
    // A view's .values are the dense (or paged) data too.
    if (name == part || (part == "values" && name == "data")) return index;
  }
  return std::nullopt;
}

py::array ArrayOver(const void* data, std::uint64_t byte_size, const ArraySpec& spec,
                    py::object owner, bool writable) {
  const py::object numpy_dtype = NumpyDTypeOf(spec.type);
  if (numpy_dtype.is_none() || IsPacked(spec.type)) {
    return BytesOver(data, byte_size, std::move(owner), writable);
  }
  const py::dtype dtype = py::dtype::from_args(numpy_dtype);
  const auto itemsize = static_cast<py::ssize_t>(dtype.itemsize());
  std::vector<py::ssize_t> shape(spec.shape.begin(), spec.shape.end());
  std::vector<py::ssize_t> strides(shape.size());
  if (spec.element_strides.empty()) {
    py::ssize_t stride = itemsize;
    for (std::size_t i = shape.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= shape[i];
    }
  } else {
    for (std::size_t i = 0; i < shape.size(); ++i) {
      strides[i] = static_cast<py::ssize_t>(spec.element_strides[i]) * itemsize;
    }
  }
  return MakeArray(dtype, std::move(shape), std::move(strides), data, std::move(owner), writable);
}

py::array BytesOver(const void* data, std::uint64_t byte_size, py::object owner, bool writable) {
  return MakeArray(py::dtype("uint8"), {static_cast<py::ssize_t>(byte_size)}, {1}, data,
                   std::move(owner), writable);
}

}  // namespace hurray::python
