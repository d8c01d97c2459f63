// NumPy arrays over a tensor's buffers: the element type and shape each buffer of a
// descriptor holds (its role in the layout or quantization), and arrays over pool memory
// whose base object keeps that memory mapped.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "hurray/element_type.h"
#include "hurray/tensor_descriptor.h"

namespace hurray::python {

// What one buffer holds, as an array: elements of `type` in `shape`, row-major unless
// `element_strides` (one per dimension, in elements) says otherwise.
struct ArraySpec {
  ElementType type = ElementType::kUint8;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> element_strides;
};

// The array buffer `index` of `descriptor` holds, as the core's table of buffer parts says
// (TensorDescriptor::BufferParts, hurray/buffer_parts.h). `index` must be below the buffer
// table's length.
[[nodiscard]] ArraySpec BufferArraySpec(const TensorDescriptor& descriptor, std::uint32_t index);

// The buffer that holds part `part` ("values", "indices", "indptr", "scales",
// "zero_points", "page_table") of `descriptor`, or nullopt when its layout and quantization
// have no such part. "values" is the data of a dense or block-paged tensor too.
[[nodiscard]] std::optional<std::uint32_t> PartBuffer(const TensorDescriptor& descriptor,
                                                      std::string_view part);

// An ndarray over `byte_size` bytes at `data` laid out as `spec`, whose base is `owner`
// (the object keeping the memory valid), writeable only when `writable`. Types NumPy has no
// dtype for (bfloat16, float8, 4-bit) come as a 1-D uint8 array of the bytes. Needs the GIL.
[[nodiscard]] pybind11::array ArrayOver(const void* data, std::uint64_t byte_size,
                                        const ArraySpec& spec, pybind11::object owner,
                                        bool writable);

// A 1-D uint8 ndarray over `byte_size` bytes at `data`, as ArrayOver.
[[nodiscard]] pybind11::array BytesOver(const void* data, std::uint64_t byte_size,
                                        pybind11::object owner, bool writable);

}  // namespace hurray::python
