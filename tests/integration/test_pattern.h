/* The deterministic contents of the integration tests' tensors, in C so that the C agent
 * checks exactly the bytes the C++ producer wrote.
 *
 * Byte `offset` of buffer `buffer` of a tensor made from `seed` is a byte of a splitmix64
 * mix of (seed, buffer, offset / 8): every seed, buffer and 8-byte word differs, so a
 * misplaced, stale or swapped buffer fails the check. Pure functions; thread-safe. */
#ifndef HURRAY_TESTS_INTEGRATION_TEST_PATTERN_H_
#define HURRAY_TESTS_INTEGRATION_TEST_PATTERN_H_

#include <stdint.h>

static inline uint64_t hurray_it_pattern_word(uint64_t seed, uint64_t buffer, uint64_t word) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + (buffer + 1) * 0xD1B54A32D192ED03ull + word;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline uint8_t hurray_it_pattern_byte(uint64_t seed, uint64_t buffer, uint64_t offset) {
  /* A C cast: this header is C as well as C++. */
  /* NOLINTNEXTLINE(google-readability-casting) */
  return (uint8_t)(hurray_it_pattern_word(seed, buffer, offset >> 3) >> ((offset & 7u) * 8u));
}

#endif /* HURRAY_TESTS_INTEGRATION_TEST_PATTERN_H_ */
