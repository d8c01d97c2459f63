// Overflow-checked unsigned arithmetic for sizes that come from outside, and rounding to
// power-of-two granules. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace hurray::internal {

[[nodiscard]] inline std::optional<std::uint64_t> CheckedAdd(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

[[nodiscard]] inline std::optional<std::uint64_t> CheckedMul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// Product of all values (1 for none); nullopt on overflow. Any zero makes it 0, wherever
// it stands: [2^32, 2^32, 0] holds no elements, like [0, 2^32, 2^32].
[[nodiscard]] inline std::optional<std::uint64_t> CheckedProduct(
    std::span<const std::uint64_t> values) {
  for (std::uint64_t value : values) {
    if (value == 0) return 0;
  }
  std::uint64_t product = 1;
  for (std::uint64_t value : values) {
    auto next = CheckedMul(product, value);
    if (!next) return std::nullopt;
    product = *next;
  }
  return product;
}

// `value` rounded up to a multiple of `granule`, a power of two; nullopt on overflow.
[[nodiscard]] inline std::optional<std::uint64_t> CheckedRoundUp(std::uint64_t value,
                                                                 std::uint64_t granule) {
  const std::uint64_t mask = granule - 1;
  if (value > UINT64_MAX - mask) return std::nullopt;
  return (value + mask) & ~mask;
}

// ceil(a / b) for b > 0, without overflow.
[[nodiscard]] inline std::uint64_t CeilDiv(std::uint64_t a, std::uint64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace hurray::internal
