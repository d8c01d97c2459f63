#include "socket_group.h"

#include <fmt/format.h>
#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon {
namespace {

// Whether a file of the daemon's may be given group `gid`: chown(2) lets a process give its
// own files any group it is a member of, and root any group.
Result<bool> MayGiveGroup(gid_t gid) {
  if (::geteuid() == 0 || ::getegid() == gid) return true;
  const int count = ::getgroups(0, nullptr);
  if (count < 0) return ErrnoFailure("getgroups", "", errno);
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  const int got = ::getgroups(count, groups.data());
  if (got < 0) return ErrnoFailure("getgroups", "", errno);
  groups.resize(static_cast<std::size_t>(got));
  return std::ranges::find(groups, gid) != groups.end();
}

std::unexpected<Error> NotAMember(const SocketGroup& group) {
  return FailedPreconditionError(fmt::format(
      "socket_group: hurrayd (uid {}) is not a member of group \"{}\" (gid {}), so it cannot "
      "give its sockets that group: add the user to the group (under systemd: "
      "SupplementaryGroups={}) or change socket_group",
      ::geteuid(), group.name, group.gid, group.name));
}

}  // namespace

Result<SocketGroup> ResolveSocketGroup(const std::string& name) {
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  int error = 0;
  while ((error = ::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found)) ==
         ERANGE) {
    buffer.resize(buffer.size() * 2);
  }
  if (error != 0) return ErrnoFailure("getgrnam_r", name, error);
  if (found == nullptr) {
    return FailedPreconditionError(
        fmt::format("socket_group: there is no group \"{}\" on this host", name));
  }
  SocketGroup group{.name = name, .gid = entry.gr_gid};
  HURRAY_ASSIGN_OR_RETURN(const bool may_give, MayGiveGroup(group.gid));
  if (!may_give) return NotAMember(group);
  return group;
}

Status GiveSocketGroup(const std::string& path, const SocketGroup& group) {
  if (::chown(path.c_str(), static_cast<uid_t>(-1), group.gid) == 0) return {};
  const int error = errno;
  if (error == EPERM) return std::unexpected(NotAMember(group).error().WithContext(path));
  return ErrnoFailure(fmt::format("chown :{}", group.name), path, error);
}

}  // namespace hurray::daemon
