#include "testing/host_facilities.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace hurray::testing {

std::optional<std::string> WhyNoPseudoTerminal() {
  const int terminal = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (terminal < 0) {
    return fmt::format("no pseudo-terminal: posix_openpt: {} (is /dev/pts mounted?)",
                       std::strerror(errno));
  }
  ::close(terminal);
  return std::nullopt;
}

std::optional<std::string> WhyNoPrivateMountNamespace() {
  if (::geteuid() != 0) return "needs root: a private mount namespace";
  const int status =
      std::system("/usr/bin/unshare --mount --propagation private /bin/true >/dev/null 2>&1");
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "unshare --mount --propagation private fails here (is / a mount point? not in a "
           "chroot)";
  }
  return std::nullopt;
}

}  // namespace hurray::testing
