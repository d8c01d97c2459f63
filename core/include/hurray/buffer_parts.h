// What each buffer of a tensor holds: the one table of the parts its layout and quantization
// refer to (values, indices, scales, ...), with each part's element type and array shape.
// TensorDescriptor::BufferParts() gives it for a descriptor; the Python module, hurrayctl
// and the .npy path read it, so that a new layout or quantization is one edit, in
// core/src/buffer_roles.cc. docs/descriptor.md lists the parts of each layout.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "hurray/element_type.h"

namespace hurray {

// One buffer a descriptor's layout or quantization refers to, and the array it holds.
struct BufferPart {
  // Position in the buffer table.
  std::uint32_t index = 0;
  // The part's name as an array, the same in every binding: "data" (dense data, or the
  // pages of a block-paged tensor), "values", "indices", "indptr", "page_table", "scales",
  // "zero_points".
  std::string_view part;
  // The descriptor field that refers to the buffer: "layout.coo.indices_buffer".
  std::string_view field;
  // What the buffer holds, in words: "COO indices".
  std::string_view name;
  // Its elements' type: the tensor's for data and values, uint64 for every index array, the
  // quantization's for scales and zero points (float8_e8m0 for mxfp scales).
  ElementType element_type = ElementType::kUint8;
  // Its array's shape: the tensor's for dense data; {nnz} for values; {nnz, rank} for COO
  // indices; {primary extent + 1} for indptr and {nnz} for compressed indices; {pages,
  // block_size, shape[1:]...} for block-paged data and {blocks} for its page table; {channels}
  // for per-channel scales and zero points; {ceil(elements / block_size)} for nf4 scales;
  // shape[:-1] + {ceil(shape[-1] / block_size)} for mxfp scales.
  std::vector<std::uint64_t> shape;
  // Strided dense data only: the stride of each dimension, in elements. Empty: row-major
  // contiguous.
  std::vector<std::uint64_t> element_strides;
  // Bytes the shape implies (for strided data, the span its strides address).
  std::uint64_t byte_size = 0;
  // False for strided dense data, whose buffer may be larger than byte_size.
  bool exact = true;

  friend bool operator==(const BufferPart&, const BufferPart&) = default;
};

}  // namespace hurray
