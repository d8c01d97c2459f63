// Section 9, time to serving: hurrayd with cpu_pool.capacity 1, 8 and 16 GiB, from exec to
// serving (a client's Stats answers, polled every 20 ms) and to the pool fully reserved
// (Stats' reserved_bytes equals the capacity), beside what the start used to pay before it
// served: `fallocate -l SIZE` of a /dev/shm file. A size that does not fit in free RAM and
// free /dev/shm (with 1 GiB to spare) is skipped, and the report says so. --quick: 1 GiB.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "hurray/client.h"
#include "sections.h"
#include "system_info.h"
#include "testing/daemon_process.h"

namespace hurray::bench {
namespace {

constexpr int kSection = 9;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr auto kReserveTimeout = std::chrono::minutes(5);
using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Milliseconds that fallocate(2) of `bytes` in a fresh /dev/shm file takes (removed after).
Result<double> FallocateMilliseconds(const std::string& path, std::uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return InternalError(fmt::format("open {}: errno {}", path, errno));
  const Clock::time_point start = Clock::now();
  const int result = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  const double took = MillisecondsSince(start);
  ::close(fd);
  ::unlink(path.c_str());
  if (result != 0) return InternalError(fmt::format("posix_fallocate {}: errno {}", path, result));
  return took;
}

// The CPU pool's reserved bytes as Stats reports them; 0 when Stats fails.
std::uint64_t ReservedBytes(Client& client) {
  auto stats = client.Stats();
  if (!stats) return 0;
  for (const PoolStats& pool : stats->pools) {
    if (pool.name == "cpu") return pool.reserved_bytes;
  }
  return 0;
}

void AddMilliseconds(Report& report, const std::string& key, const std::string& label,
                     double milliseconds) {
  report.AddFigure(FigureSpec{.key = key, .section = kSection, .label = label, .unit = "ms"},
                   Placement::kAny, Summarize({milliseconds}));
}

// The three figures of one pool size.
Status MeasureSize(Harness& harness, std::uint64_t bytes) {
  Report& report = harness.report();
  const std::string size = SizeKey(bytes);
  HURRAY_ASSIGN_OR_RETURN(
      const double fallocate,
      FallocateMilliseconds(fmt::format("/dev/shm/hurray-bench-{}-fallocate", ::getpid()), bytes));
  AddMilliseconds(report, "startup.fallocate." + size,
                  fmt::format("fallocate -l {} of a /dev/shm file (the old start)", size),
                  fallocate);

  const Clock::time_point exec = Clock::now();
  HURRAY_ASSIGN_OR_RETURN(std::unique_ptr<testing::DaemonProcess> daemon,
                          testing::DaemonProcess::Start({.binary = harness.options().hurrayd_path,
                                                         .name = "hurray-bench-startup",
                                                         .pool_capacity_bytes = bytes}));
  const double serving = MillisecondsSince(exec);
  HURRAY_ASSIGN_OR_RETURN(
      std::unique_ptr<Client> client,
      Client::Connect({.socket_path = daemon->socket_path(), .client_name = "bench-startup"}));
  while (ReservedBytes(*client) < bytes && Clock::now() - exec < kReserveTimeout) {
    std::this_thread::sleep_for(kPoll);
  }
  const double reserved = MillisecondsSince(exec);
  const std::uint64_t reserved_bytes = ReservedBytes(*client);
  client.reset();
  HURRAY_RETURN_IF_ERROR(daemon->Stop());
  if (reserved_bytes < bytes) {
    return InternalError(fmt::format("the {} pool had only {} bytes reserved after {} s", size,
                                     reserved_bytes, kReserveTimeout.count() * 60));
  }
  AddMilliseconds(report, "startup.serving." + size,
                  fmt::format("hurrayd exec to serving, cpu pool {}", size), serving);
  AddMilliseconds(report, "startup.reserved." + size,
                  fmt::format("hurrayd exec to cpu pool fully reserved, {}", size), reserved);
  return {};
}

}  // namespace

Status RunTimeToServing(Harness& harness) {
  // The harness's daemon holds a pool of its own: gone, it leaves the memory to this one.
  HURRAY_RETURN_IF_ERROR(harness.StopDaemon());
  std::vector<std::uint64_t> sizes = {1 * kGiB, 8 * kGiB, 16 * kGiB};
  if (harness.options().quick) sizes.resize(1);
  for (const std::uint64_t bytes : sizes) {
    // The fallocate baseline and the pool each hold `bytes` in turn, never both at once.
    const std::uint64_t room = std::min(MemAvailableBytes(), DevShmFreeBytes());
    if (room < bytes + kGiB) {
      harness.report().AddNote(
          kSection, fmt::format("skipped {}: {} of RAM and /dev/shm free, below {} + 1 GiB",
                                SizeKey(bytes), FormatBytes(room), FormatBytes(bytes)));
      continue;
    }
    harness.Progress(fmt::format("section 9: time to serving, {} pool", SizeKey(bytes)));
    HURRAY_RETURN_IF_ERROR(MeasureSize(harness, bytes));
  }
  return {};
}

}  // namespace hurray::bench
