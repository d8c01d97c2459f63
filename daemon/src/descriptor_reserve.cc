#include "descriptor_reserve.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <cerrno>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon {

Result<DescriptorLimit> RaiseDescriptorLimitToHard() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) {
    return ErrnoFailure("getrlimit(RLIMIT_NOFILE)", "", errno);
  }
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0) {
      return ErrnoFailure("setrlimit(RLIMIT_NOFILE)", "", errno);
    }
  }
  return DescriptorLimit{.soft = files.rlim_cur, .hard = files.rlim_max};
}

bool InDescriptorReserve(int fd, std::uint64_t soft_limit, std::uint32_t reserve) {
  if (reserve == 0 || fd < 0) return false;
  return static_cast<std::uint64_t>(fd) + reserve >= soft_limit;
}

std::optional<Error> DescriptorReserveRefusal(int fd, std::uint32_t reserve) {
  if (reserve == 0) return std::nullopt;
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return std::nullopt;  // Cannot fail here.
  if (!InDescriptorReserve(fd, files.rlim_cur, reserve)) return std::nullopt;
  return ResourceExhaustedError(
             fmt::format("reserved_descriptors {} reached: the connection got descriptor {} of "
                         "the {} RLIMIT_NOFILE allows; try again later",
                         reserve, fd, files.rlim_cur))
      .error();
}

}  // namespace hurray::daemon
