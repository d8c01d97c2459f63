// The group hurrayd gives its sockets (the socket_group setting), so that the members of that
// group may connect. Plain values and free functions; thread-safe (getgrnam_r, getgroups).
#pragma once

#include <sys/types.h>

#include <string>

#include "hurray/error.h"

namespace hurray::daemon {

struct SocketGroup {
  std::string name;
  gid_t gid = 0;
};

// The group called `name`, checked before any socket exists: the daemon may give a file that
// group only when it is its effective group or a supplementary one, or when it runs as root.
// FAILED_PRECONDITION naming socket_group and the group when there is no such group or the
// daemon is not in it.
[[nodiscard]] Result<SocketGroup> ResolveSocketGroup(const std::string& name);

// Gives `path` the group (chown with the owner left as it is). FAILED_PRECONDITION naming
// socket_group, the group and the path when the kernel refuses it (EPERM); other failures
// as hurray/ipc/errno_error.h.
[[nodiscard]] Status GiveSocketGroup(const std::string& path, const SocketGroup& group);

}  // namespace hurray::daemon
