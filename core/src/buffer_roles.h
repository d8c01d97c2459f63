// The buffers a descriptor's layout and quantization refer to, and the size each must have.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/tensor_descriptor.h"

namespace hurray::internal {

// One buffer reference of a layout or quantization.
struct BufferRole {
  std::uint32_t index = 0;      // Position in the buffer table.
  std::string_view field;       // The referring field, "layout.coo.indices_buffer".
  std::string_view name;        // What the buffer holds, "COO indices".
  std::uint64_t byte_size = 0;  // Size the shape implies.
  bool exact = true;            // false: byte_size is a minimum (strided dense data).
};

// The roles of every buffer the layout and quantization of `parts` refer to, layout first.
// INVALID_ARGUMENT naming the field and value when the element type, shape, layout and
// quantization do not fit together, or a size overflows 64 bits. Does not look at the
// buffer table itself.
[[nodiscard]] Result<std::vector<BufferRole>> BufferRoles(const TensorDescriptor::Parts& parts);

// "per_channel_affine axis 0, scales in buffer 1 (float32)".
[[nodiscard]] std::string DescribeQuantization(const Quantization& quantization);

}  // namespace hurray::internal
