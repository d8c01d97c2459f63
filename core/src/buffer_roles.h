// The buffers a descriptor's layout and quantization refer to (hurray/buffer_parts.h): what
// each holds, and the size each must have.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/buffer_parts.h"
#include "hurray/tensor_descriptor.h"

namespace hurray::internal {

// The parts of every buffer the layout and quantization of `parts` refer to, layout first.
// INVALID_ARGUMENT naming the field and value when the element type, shape, layout and
// quantization do not fit together, or a size overflows 64 bits. Does not look at the
// buffer table itself.
[[nodiscard]] Result<std::vector<BufferPart>> BufferPartsOf(const TensorDescriptor::Parts& parts);

// "per_channel_affine axis 0, scales in buffer 1 (float32)".
[[nodiscard]] std::string DescribeQuantization(const Quantization& quantization);

}  // namespace hurray::internal
