// What the registry's refusals say of a tensor name and of an ended session, shared by the
// files that define Registry's members.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

// How much of a tensor name a refusal or a log line shows.
inline constexpr std::size_t kShownNameBytes = 200;

inline std::string_view ShownName(std::string_view name) { return name.substr(0, kShownNameBytes); }

// UNAUTHENTICATED: the session a request names has ended (or never was).
inline Error SessionEnded(std::uint64_t session_id) {
  return UnauthenticatedError(fmt::format("session {} ended", session_id)).error();
}

}  // namespace hurray::daemon
