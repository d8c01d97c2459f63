#include "process.h"

#include <fmt/format.h>
#include <sched.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <system_error>

#include "hurray/ipc/errno_error.h"

namespace hurray::bench {
namespace {

// Adds the number of each line of a /proc status file whose first word `wanted` names to
// its counter; returns how many lines it found.
std::size_t AddStatusFields(std::istream& status,
                            const std::map<std::string_view, std::uint64_t*>& wanted) {
  std::size_t found = 0;
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string name;
    std::uint64_t value = 0;
    fields >> name >> value;
    if (auto counter = wanted.find(name); counter != wanted.end()) {
      *counter->second += value;
      ++found;
    }
  }
  return found;
}

cpu_set_t ToMask(const std::vector<int>& cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int cpu : cpus) CPU_SET(cpu, &mask);
  return mask;
}

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(mask), &mask) != 0) return {0};
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  }
  return cpus;
}

Status SetProcessAffinity(pid_t pid, const std::vector<int>& cpus) {
  const cpu_set_t mask = ToMask(cpus);
  std::error_code error;
  const std::string tasks = fmt::format("/proc/{}/task", pid);
  for (const auto& entry : std::filesystem::directory_iterator(tasks, error)) {
    const pid_t thread = static_cast<pid_t>(std::stol(entry.path().filename().string()));
    // A thread that ended since the listing is no error.
    if (::sched_setaffinity(thread, sizeof(mask), &mask) != 0 && errno != ESRCH) {
      return ErrnoFailure(fmt::format("sched_setaffinity(thread {} of pid {})", thread, pid), "",
                          errno);
    }
  }
  if (error) return InternalError(fmt::format("list {}: {}", tasks, error.message()));
  return {};
}

std::string SelfExecutable() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("/proc/self/exe") : path.string();
}

Result<ProcessMemory> ReadProcessMemory(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  std::ifstream status(path);
  if (!status) return NotFoundError("open " + path);
  ProcessMemory memory;
  const std::map<std::string_view, std::uint64_t*> wanted = {{"VmRSS:", &memory.vm_rss},
                                                             {"RssAnon:", &memory.rss_anon},
                                                             {"RssFile:", &memory.rss_file},
                                                             {"RssShmem:", &memory.rss_shmem}};
  if (AddStatusFields(status, wanted) != wanted.size()) {
    return InternalError(path + ": VmRSS, RssAnon, RssFile or RssShmem missing");
  }
  for (const auto& [name, bytes] : wanted) *bytes *= 1024;  // The file says kB.
  return memory;
}

Result<ProcessCpu> ReadProcessCpu(pid_t pid) {
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  std::filesystem::directory_iterator threads(tasks, error);
  if (error) return NotFoundError(fmt::format("list {}: {}", tasks.string(), error.message()));
  ProcessCpu cpu;
  for (const std::filesystem::directory_entry& thread : threads) {
    std::ifstream schedstat(thread.path() / "schedstat");
    std::ifstream status(thread.path() / "status");
    if (!schedstat || !status) continue;  // The thread ended.
    std::uint64_t ns = 0;
    if (!(schedstat >> ns)) return InternalError((thread.path() / "schedstat").string());
    std::uint64_t switches = 0;
    if (AddStatusFields(status, {{"voluntary_ctxt_switches:", &switches},
                                 {"nonvoluntary_ctxt_switches:", &switches}}) != 2) {
      return InternalError((thread.path() / "status").string() + ": no switches");
    }
    cpu.context_switches += switches;
    cpu.cpu_ns += ns;
  }
  return cpu;
}

}  // namespace hurray::bench
