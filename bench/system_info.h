// The machine a run measured: printed at the top of the report and kept in the JSON, so a
// figure is never read without knowing where it came from. Thread-safe (reads /proc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hurray::bench {

// ("cpu", "Intel(R) Xeon(R) ..."), ("cpus", "2 online, 2 usable"), ("memory", "23.4 GiB"),
// ("kernel", "6.1.0-... #1 SMP ..."), ("load_average", "2.10 1.50 0.90"), ("date", ISO UTC).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> DescribeMachine();

// Bytes free in /dev/shm (statvfs); 0 when it cannot be read.
[[nodiscard]] std::uint64_t DevShmFreeBytes();

// /proc/meminfo's MemAvailable in bytes; 0 when it cannot be read.
[[nodiscard]] std::uint64_t MemAvailableBytes();

// "1 GiB", "4 KiB" when exact; "2.05 MiB", "23.5 GiB", "512 B" otherwise.
[[nodiscard]] std::string FormatBytes(std::uint64_t bytes);

// "1GiB", "64MiB", "4KiB": for figure keys.
[[nodiscard]] std::string SizeKey(std::uint64_t bytes);

// The 1-minute load average.
[[nodiscard]] double LoadAverage();

}  // namespace hurray::bench
