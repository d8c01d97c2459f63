#include "memory_touch.h"

#include <immintrin.h>

#include <cstring>

namespace hurray::bench {
namespace {

constexpr std::uint64_t kPatternMultiplier = 0x9E3779B97F4A7C15ull;

}  // namespace

void FillPattern(std::span<std::byte> bytes, std::uint64_t first_word) {
  const std::size_t words = bytes.size() / 8;
  std::byte* data = bytes.data();
  for (std::size_t i = 0; i < words; ++i) {
    const std::uint64_t value = (first_word + i) * kPatternMultiplier;
    std::memcpy(data + i * 8, &value, 8);
  }
}

namespace {

// Words [0, words) of `data`, four independent sums.
std::uint64_t SumWordsScalar(const std::byte* data, std::size_t words) {
  std::uint64_t sums[4] = {0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    for (int lane = 0; lane < 4; ++lane) {
      std::uint64_t word;
      std::memcpy(&word, data + (i + lane) * 8, 8);
      sums[lane] += word;
    }
  }
  for (; i < words; ++i) {
    std::uint64_t word;
    std::memcpy(&word, data + i * 8, 8);
    sums[0] += word;
  }
  return sums[0] + sums[1] + sums[2] + sums[3];
}

// The same sum, 128 bytes per step in four AVX2 accumulators: fast enough that reading is
// bound by memory (the scalar loop is bound by its additions: ~1.6x slower on 1 GiB here,
// which would hide costs of the way the bytes arrive behind the reader's own).
__attribute__((target("avx2"))) std::uint64_t SumWordsAvx2(const std::byte* data,
                                                           std::size_t words) {
  constexpr std::size_t kStepWords = 16;
  __m256i sums[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                     _mm256_setzero_si256()};
  std::size_t i = 0;
  for (; i + kStepWords <= words; i += kStepWords) {
    for (std::size_t lane = 0; lane < 4; ++lane) {
      const auto* vector = reinterpret_cast<const __m256i*>(data + (i + 4 * lane) * 8);
      sums[lane] = _mm256_add_epi64(sums[lane], _mm256_loadu_si256(vector));
    }
  }
  const __m256i total =
      _mm256_add_epi64(_mm256_add_epi64(sums[0], sums[1]), _mm256_add_epi64(sums[2], sums[3]));
  std::uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), total);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + SumWordsScalar(data + i * 8, words - i);
}

}  // namespace

std::uint64_t ReadEveryByte(std::span<const std::byte> bytes) {
  static const bool kHaveAvx2 = __builtin_cpu_supports("avx2");
  const std::byte* data = bytes.data();
  const std::size_t words = bytes.size() / 8;
  std::uint64_t sum = kHaveAvx2 ? SumWordsAvx2(data, words) : SumWordsScalar(data, words);
  for (std::size_t tail = words * 8; tail < bytes.size(); ++tail) {
    sum += static_cast<std::uint64_t>(data[tail]);
  }
  return sum;
}

std::uint64_t PatternChecksum(std::uint64_t byte_count) {
  // Sum of i * K for i < n, modulo 2^64: K * n(n-1)/2, halving whichever factor is even.
  const std::uint64_t n = byte_count / 8;
  if (n == 0) return 0;
  const std::uint64_t triangle = n % 2 == 0 ? (n / 2) * (n - 1) : n * ((n - 1) / 2);
  return triangle * kPatternMultiplier;
}

}  // namespace hurray::bench
