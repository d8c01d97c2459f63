// The pool an allocation goes to when it names none: one name for the daemon, the clients
// and Python.
#pragma once

#include <string_view>

namespace hurray {

// The daemon's CPU pool, which it always has: where an allocation request that names no pool
// (AllocateRequest.pool empty) allocates, and the name the clients give that pool.
inline constexpr std::string_view kDefaultPoolName = "cpu";

}  // namespace hurray
