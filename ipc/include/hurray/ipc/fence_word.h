// The values of a GPU fence word (v1::Fence) that hurrayd and the client library must agree
// on, and the one comparison both make: the GPU's.
//
// A stream waits for a fence with cuStreamWaitValue64(CU_STREAM_WAIT_VALUE_GEQ), whose
// compare is cyclic: the wait ends once (int64_t)(word - value) >= 0. Live fence values stay
// below kFenceValueLimit and the poison is INT64_MAX, so that for every live value the poison
// satisfies that compare (a waiting stream moves on) and the cyclic and the plain compare
// agree on every word the daemon writes. Thread-safe (constants and pure functions).
#pragma once

#include <cstdint>
#include <limits>

namespace hurray {

// Live fence values are in [1, kFenceValueLimit): a word is reused with a larger value only
// while the next one stays below it, and retired (poisoned) when it would not.
inline constexpr std::uint64_t kFenceValueLimit = std::uint64_t{1} << 62;

// The word of a fence the daemon gave up on: INT64_MAX, which every live value's cyclic
// wait accepts ((int64_t)(INT64_MAX - value) > 0 for value in [1, kFenceValueLimit)).
inline constexpr std::uint64_t kFencePoison =
    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// Whether a word holding `word` ends a GPU wait for `value`: the cyclic compare of
// CU_STREAM_WAIT_VALUE_GEQ, (int64_t)(word - value) >= 0. The poison reaches every live value.
[[nodiscard]] constexpr bool FenceWordReaches(std::uint64_t word, std::uint64_t value) {
  return static_cast<std::int64_t>(word - value) >= 0;
}

static_assert(FenceWordReaches(kFencePoison, 1) &&
              FenceWordReaches(kFencePoison, kFenceValueLimit - 1));
static_assert(!FenceWordReaches(std::numeric_limits<std::uint64_t>::max(), 1),
              "2^64 - 1 is below 1 in the cyclic compare: it cannot be the poison");

}  // namespace hurray
