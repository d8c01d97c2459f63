// Tests of `hurrayctl top`'s screen (hurrayctl/top_screen.h), from values built here: no
// daemon, no terminal.
#include "hurrayctl/top_screen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace hurray::ctl {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;
constexpr std::int64_t kNow = 1'700'000'000 * kSecond;

DaemonStats Stats() {
  DaemonStats stats{.session_count = 2,
                    .lease_count = 1,
                    .tensor_count = 3,
                    .version_count = 4,
                    .uptime = std::chrono::seconds(187)};
  stats.pools.push_back(PoolStats{.name = "cpu",
                                  .kind = "cpu",
                                  .capacity_bytes = std::uint64_t{8} << 30,
                                  .used_bytes = std::uint64_t{3} << 20});
  return stats;
}

// `count` tensors "t/0" .. published 0, 1, ... seconds before kNow ("t/0" is the newest).
std::vector<TensorSummary> Tensors(int count) {
  std::vector<TensorSummary> tensors;
  for (int i = count - 1; i >= 0; --i) {
    tensors.push_back(
        TensorSummary{.name = "t/" + std::to_string(i),
                      .latest_version = 1,
                      .element_type = ElementType::kFloat32,
                      .shape = {256},
                      .byte_size = 1024,
                      .published_at = DaemonTime(std::chrono::nanoseconds(kNow - i * kSecond))});
  }
  return tensors;
}

std::size_t LineCount(const std::string& text) {
  return static_cast<std::size_t>(std::ranges::count(text, '\n'));
}

TEST(RenderTopScreenTest, ShowsSummaryPoolsAndTensorsNewestFirst) {
  const std::string screen = RenderTopScreen(Stats(), Tensors(3), kNow, 0.5, {40, 120});
  EXPECT_NE(screen.find("hurrayd up 3m 07s   sessions 2   leases 1"), std::string::npos) << screen;
  EXPECT_NE(screen.find("every 0.5s, q quits"), std::string::npos) << screen;
  EXPECT_NE(screen.find("8.0 GiB"), std::string::npos) << screen;
  EXPECT_NE(screen.find("3.0 MiB"), std::string::npos) << screen;
  EXPECT_NE(screen.find("tensors: 3 (4 live versions), newest first"), std::string::npos) << screen;
  EXPECT_NE(screen.find("0s ago"), std::string::npos) << screen;
  EXPECT_NE(screen.find("2s ago"), std::string::npos) << screen;
  EXPECT_LT(screen.find("t/0"), screen.find("t/1")) << screen;
  EXPECT_LT(screen.find("t/1"), screen.find("t/2")) << screen;
  EXPECT_EQ(screen.find("more"), std::string::npos) << screen;
}

TEST(RenderTopScreenTest, FitsTheTerminalAndCountsWhatDidNotFit) {
  const std::string screen = RenderTopScreen(Stats(), Tensors(50), kNow, 1.0, {20, 30});
  EXPECT_EQ(LineCount(screen), 20u) << screen;
  std::size_t start = 0;
  while (start < screen.size()) {
    const std::size_t end = screen.find('\n', start);
    EXPECT_LE(end - start, 30u) << screen.substr(start, end - start);
    start = end + 1;
  }
  // 20 rows: 7 for the summary, pools and headings, the tensor header, 11 tensors, the count.
  EXPECT_NE(screen.find("... 39 more"), std::string::npos) << screen;
}

TEST(RenderTopScreenTest, AScreenTooSmallForTensorsStillRenders) {
  const std::string screen = RenderTopScreen(Stats(), Tensors(5), kNow, 1.0, {3, 80});
  EXPECT_EQ(LineCount(screen), 3u) << screen;
}

}  // namespace
}  // namespace hurray::ctl
