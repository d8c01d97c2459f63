// How stored elements map to real values. Plain values; thread-safe.
//
// Buffer indices are positions in the descriptor's buffer table; TensorDescriptor::Create
// checks that each resolves and has the size the shape implies.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>

#include "hurray/element_type.h"
#include "hurray/export.h"

namespace hurray {

// Not quantized: elements are the values.
struct NoQuantization {
  friend bool operator==(const NoQuantization&, const NoQuantization&) = default;
};

// real = scale * (stored - zero_point), one scale and zero point for the whole tensor,
// carried inline: no extra buffer.
struct PerTensorAffine {
  double scale = 1.0;  // Finite and non-zero.
  std::int64_t zero_point = 0;

  friend bool operator==(const PerTensorAffine&, const PerTensorAffine&) = default;
};

// The zero points of per-channel affine quantization: a buffer of shape[axis] elements.
struct ZeroPoints {
  std::uint32_t buffer = 0;
  ElementType type = ElementType::kInt8;

  friend bool operator==(const ZeroPoints&, const ZeroPoints&) = default;
};

// One scale (and optionally one zero point) per index of `axis`.
struct PerChannelAffine {
  std::uint32_t axis = 0;
  std::uint32_t scale_buffer = 1;
  ElementType scale_type = ElementType::kFloat32;  // float16, bfloat16, float32, float64.
  std::optional<ZeroPoints> zero_points;           // Absent: every zero point is 0.

  friend bool operator==(const PerChannelAffine&, const PerChannelAffine&) = default;
};

// NormalFloat4: one absmax scale per block_size elements of the flattened tensor.
struct Nf4Quantization {
  std::uint64_t block_size = 64;
  std::uint32_t scale_buffer = 1;
  ElementType scale_type = ElementType::kFloat32;  // float16, bfloat16, float32.

  friend bool operator==(const Nf4Quantization&, const Nf4Quantization&) = default;
};

// OCP microscaling: one E8M0 scale per block_size elements along the last dimension.
struct MxfpQuantization {
  std::uint64_t block_size = 32;
  std::uint32_t scale_buffer = 1;

  friend bool operator==(const MxfpQuantization&, const MxfpQuantization&) = default;
};

using Quantization = std::variant<NoQuantization, PerTensorAffine, PerChannelAffine,
                                  Nf4Quantization, MxfpQuantization>;

// "none", "per_tensor_affine", "per_channel_affine", "nf4" or "mxfp".
[[nodiscard]] HURRAY_CXX_EXPORT std::string_view QuantizationName(const Quantization& quantization);

}  // namespace hurray
