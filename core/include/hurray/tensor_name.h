// Tensor names: "namespace/name". The one rule the daemon enforces, and that a client checks
// before it allocates anything for a name (ImportTensorFile).
//
// Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray {

inline constexpr std::size_t kMaxTensorNameBytes = 512;
inline constexpr std::size_t kMaxNamePartBytes = 128;

// OK when `name` is a namespace and a name, each 1-128 characters of [A-Za-z0-9._-],
// separated by '/', where the name may have further '/'-separated parts of the same form
// (none "." or ".."), at most 512 characters in all. INVALID_ARGUMENT naming `field`
// and the value otherwise.
[[nodiscard]] Status ValidateTensorName(std::string_view name, std::string_view field = "name");

// How much of a tensor name a message shows.
inline constexpr std::size_t kShownNameBytes = 200;

// A tensor name as every message and log line shows it, valid or not: its first
// kShownNameBytes bytes, each byte outside printable ASCII as '?', and "..." after a name
// that was cut.
[[nodiscard]] std::string ShownName(std::string_view name);

// True when `name` starts with `prefix` (what List, BatchAcquire and Watch match by).
[[nodiscard]] inline bool HasPrefix(std::string_view name, std::string_view prefix) {
  return name.substr(0, prefix.size()) == prefix;
}

}  // namespace hurray
