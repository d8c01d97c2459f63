// The tensors the integration tests exchange between processes: a descriptor per kind, and
// deterministic contents (test_pattern.h) that a consumer can check byte for byte.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hurray/tensor_descriptor.h"

namespace hurray::integration {

enum class TensorKind : std::uint8_t {
  kDense,      // float32 [256, 1024]: one 1 MiB buffer.
  kQuantized,  // int8 [512, 1024], per-channel affine on axis 0: data + float32 scales.
  kCsr,        // float32 [1000, 2000] CSR with 5000 non-zeros: values, row offsets, columns.
};

// "dense", "quantized", "csr".
[[nodiscard]] std::string_view TensorKindName(TensorKind kind);
[[nodiscard]] std::optional<TensorKind> TensorKindFromName(std::string_view name);

// The descriptor of a kind (always valid).
[[nodiscard]] TensorDescriptor MakeTestDescriptor(TensorKind kind);

// The kind whose descriptor equals `descriptor`, if any.
[[nodiscard]] std::optional<TensorKind> KindOf(const TensorDescriptor& descriptor);

// A dense uint8 tensor of `byte_size` bytes (one buffer), for the many-tensor tests.
[[nodiscard]] TensorDescriptor MakeByteTensor(std::uint64_t byte_size);

// Writes buffer `index` of the tensor made from `seed`.
void FillBuffer(std::span<std::byte> buffer, std::uint64_t seed, std::uint64_t index);

// Empty when `buffer` holds exactly what FillBuffer(seed, index) wrote; otherwise names the
// first byte that differs and the count of differing bytes.
[[nodiscard]] std::string CheckBuffer(std::span<const std::byte> buffer, std::uint64_t seed,
                                      std::uint64_t index);

}  // namespace hurray::integration
