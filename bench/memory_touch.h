// Writing and reading tensor bytes the same way in every method compared (hurray, local
// memory, memcpy, gRPC bytes, redis), so that only the way the bytes arrive differs.
//
// The pattern is position-dependent: 64-bit word i (from the start of the whole tensor)
// holds i * kPatternMultiplier, so a tensor sent in chunks sums to the same checksum as
// the whole, and a consumer can tell it got every byte right. Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace hurray::bench {

// Fills `bytes` (a multiple of 8 bytes long) with the pattern, starting at word
// `first_word` of the tensor.
void FillPattern(std::span<std::byte> bytes, std::uint64_t first_word = 0);

// Reads every byte of `bytes`: the wrapping sum of its little-endian 64-bit words (a tail
// shorter than 8 bytes is added byte by byte). Uses AVX2 when the CPU has it, so the loop
// is bound by memory, not by its additions; the sum is the same either way.
[[nodiscard]] std::uint64_t ReadEveryByte(std::span<const std::byte> bytes);

// ReadEveryByte of a whole tensor of `byte_count` bytes (a multiple of 8) holding the
// pattern, computed without the bytes.
[[nodiscard]] std::uint64_t PatternChecksum(std::uint64_t byte_count);

}  // namespace hurray::bench
