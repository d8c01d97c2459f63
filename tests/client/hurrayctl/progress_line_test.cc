// The progress line of import, save and load: its text, and how ProgressLine draws and
// clears it (or writes nothing when disabled).
#include "hurrayctl/progress_line.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace hurray::ctl {
namespace {

using std::chrono::seconds;

TEST(FormatProgressLine, ShowsBytesPercentRateAndTimeLeft) {
  // 1 GiB of 4 GiB in 2 s: 512 MiB/s, 3 GiB left = 6 s.
  EXPECT_EQ(FormatProgressLine(std::uint64_t{1} << 30, std::uint64_t{4} << 30, seconds(2)),
            "1.0 GiB / 4.0 GiB  25.0%  512.0 MiB/s  6s left");
}

TEST(FormatProgressLine, RoundsTheTimeLeftUp) {
  // 300 of 1000 bytes in 1 s: 700 bytes left at 300 B/s is 2.33 s, shown as 3s.
  EXPECT_EQ(FormatProgressLine(300, 1000, seconds(1)), "300 B / 1000 B  30.0%  300 B/s  3s left");
}

TEST(FormatProgressLine, BeforeAnyByteTheRateAndTimeLeftAreUnknown) {
  EXPECT_EQ(FormatProgressLine(0, 2048, seconds(1)), "0 B / 2.0 KiB  0.0%  -  - left");
  EXPECT_EQ(FormatProgressLine(10, 2048, seconds(0)), "10 B / 2.0 KiB  0.5%  -  - left");
}

TEST(FormatProgressLine, DoneReadsAHundredPercentAndNothingLeft) {
  EXPECT_EQ(FormatProgressLine(2048, 2048, seconds(1)),
            "2.0 KiB / 2.0 KiB  100.0%  2.0 KiB/s  0s left");
  EXPECT_EQ(FormatProgressLine(0, 0, seconds(1)), "0 B / 0 B  100.0%  -  - left");
}

TEST(FormatProgressLine, AStalledReadDoesNotOverflowTheTimeLeft) {
  const std::string line = FormatProgressLine(1, UINT64_MAX, std::chrono::hours(1000));
  EXPECT_NE(line.find(" left"), std::string::npos) << line;
}

// What a ProgressLine wrote to a temporary file.
std::string Written(std::FILE* file) {
  std::fflush(file);
  EXPECT_EQ(std::fseek(file, 0, SEEK_SET), 0);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += static_cast<char>(c);
  return text;
}

TEST(ProgressLine, RedrawsInPlaceAndErasesItselfAtTheEnd) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine line(file, /*enabled=*/true);
    line.Update(100, 1000);
    line.Update(1000, 1000);
    line.Clear();
  }
  const std::string text = Written(file);
  std::fclose(file);
  EXPECT_EQ(text.rfind("\r100 B / 1000 B  10.0%", 0), 0U) << text;
  EXPECT_NE(text.find("\033[K\r1000 B / 1000 B  100.0%"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("\033[K\r\033[K")) << text;
  EXPECT_EQ(text.find('\n'), std::string::npos) << "a progress line never starts a new line";
}

TEST(ProgressLine, DisabledWritesNothing) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine line(file, /*enabled=*/false);
    line.Update(100, 1000);
    line.Clear();
  }
  EXPECT_EQ(Written(file), "");
  std::fclose(file);
}

TEST(ProgressLine, NothingDrawnNothingCleared) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine line(file, /*enabled=*/true);
  }
  EXPECT_EQ(Written(file), "");
  std::fclose(file);
}

}  // namespace
}  // namespace hurray::ctl
