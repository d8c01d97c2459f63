#include "system_info.h"

#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>
#include <string_view>

#include "process.h"

namespace hurray::bench {
namespace {

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.starts_with("model name")) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

// The value of /proc/meminfo's `key` ("MemTotal:") in bytes, if present.
std::optional<std::uint64_t> MeminfoBytes(std::string_view key) {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  std::uint64_t kib = 0;
  while (meminfo >> name >> kib) {
    if (name == key) return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return std::nullopt;
}

std::string MemoryTotal() {
  const std::optional<std::uint64_t> total = MeminfoBytes("MemTotal:");
  return total ? FormatBytes(*total) : "unknown";
}

std::string Kernel() {
  utsname names{};
  if (::uname(&names) != 0) return "unknown";
  return std::string(names.sysname) + " " + names.release + " " + names.version + " " +
         names.machine;
}

std::string LoadAverages() {
  double loads[3] = {0, 0, 0};
  if (::getloadavg(loads, 3) != 3) return "unknown";
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f %.2f %.2f", loads[0], loads[1], loads[2]);
  return text;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> DescribeMachine() {
  const std::int64_t online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return {
      {"date", UtcNow()},
      {"cpu", CpuModel()},
      {"cpus", std::to_string(online) + " online, " + std::to_string(AllowedCpus().size()) +
                   " usable by the benchmark"},
      {"memory", MemoryTotal()},
      {"kernel", Kernel()},
      {"dev_shm_free", FormatBytes(DevShmFreeBytes())},
      {"load_average_at_start", LoadAverages()},
  };
}

std::uint64_t MemAvailableBytes() { return MeminfoBytes("MemAvailable:").value_or(0); }

std::uint64_t DevShmFreeBytes() {
  struct statvfs info{};
  if (::statvfs("/dev/shm", &info) != 0) return 0;
  return static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
}

double LoadAverage() {
  double load = 0;
  return ::getloadavg(&load, 1) == 1 ? load : 0;
}

std::string FormatBytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit > 0 && value == static_cast<double>(static_cast<std::uint64_t>(value))) {
    std::snprintf(text, sizeof(text), "%.0f %s", value, kUnits[unit]);  // "4 KiB", "1 GiB".
    return text;
  }
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof(text),
                  value >= 100  ? "%.0f %s"
                  : value >= 10 ? "%.1f %s"
                                : "%.2f %s",
                  value, kUnits[unit]);
  }
  return text;
}

std::string SizeKey(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && bytes % 1024 == 0 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + kUnits[unit];
}

}  // namespace hurray::bench
