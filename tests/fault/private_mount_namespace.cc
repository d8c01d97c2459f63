#include "private_mount_namespace.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

namespace hurray::fault {

using namespace std::chrono_literals;
using ::hurray::testing::ChildProcess;

Result<PrivateMountNamespace> PrivateMountNamespace::Start(const std::string& setup,
                                                           const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/usr/bin/unshare", "--mount", "--propagation", "private",
                                "/bin/sh",          "-c",      setup,           "sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  HURRAY_ASSIGN_OR_RETURN(ChildProcess holder, ChildProcess::Start(argv));
  const std::optional<std::string> line = holder.ReadLine(60s);
  if (line != "mounted") {
    return UnavailableError(fmt::format("{}: printed {} instead of \"mounted\"",
                                        holder.command_line(), line.value_or("nothing")));
  }
  return PrivateMountNamespace(std::move(holder));
}

std::vector<std::string> PrivateMountNamespace::EnterCommand() const {
  return {"/usr/bin/nsenter", fmt::format("--mount=/proc/{}/ns/mnt", holder_.pid())};
}

std::string PrivateMountNamespace::Root() const {
  return fmt::format("/proc/{}/root", holder_.pid());
}

Status PrivateMountNamespace::WriteWrapper(const std::string& path,
                                           const std::string& binary) const {
  const std::vector<std::string> enter = EnterCommand();
  {
    std::ofstream script(path);
    script << "#!/bin/sh\nexec " << enter[0] << ' ' << enter[1] << ' ' << binary << " \"$@\"\n";
    if (!script.flush()) return InternalError(fmt::format("cannot write {}", path));
  }
  std::error_code error;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all, error);
  if (error) return InternalError(fmt::format("chmod {}: {}", path, error.message()));
  return {};
}

Result<std::string> PrivateMountNamespace::Run(const std::vector<std::string>& command) const {
  std::vector<std::string> argv = EnterCommand();
  argv.insert(argv.end(), command.begin(), command.end());
  HURRAY_ASSIGN_OR_RETURN(ChildProcess process, ChildProcess::Start(argv));
  const std::optional<std::string> output = process.ReadToEnd(60s);
  const std::optional<int> status = process.Wait(10s);
  if (!output || !status)
    return InternalError(fmt::format("{} did not end", process.command_line()));
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return InternalError(
        fmt::format("{}: {}", process.command_line(), testing::DescribeWaitStatus(*status)));
  }
  return *output;
}

}  // namespace hurray::fault
