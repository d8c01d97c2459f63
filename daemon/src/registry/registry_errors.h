// What the registry's refusals say of an ended session, shared by the files that define
// Registry's members; they show names as hurray/tensor_name.h's ShownName does.
#pragma once

#include <fmt/format.h>

#include <cstdint>

#include "hurray/error.h"
#include "hurray/tensor_name.h"  // IWYU pragma: export (ShownName)

namespace hurray::daemon {

// UNAUTHENTICATED: the session a request names has ended (or never was).
inline Error SessionEnded(std::uint64_t session_id) {
  return UnauthenticatedError(fmt::format("session {} ended", session_id)).error();
}

}  // namespace hurray::daemon
