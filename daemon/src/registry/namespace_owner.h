// The owner of a tensor name's namespace under the default access policy: the uid that
// first published in it, while any version in it lives (access/access_policy.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "registry/version_store.h"

namespace hurray::daemon {

// The namespace_owner_uid of the live versions of `name`'s namespace (every version in a
// namespace records the same owner), or nullopt when none lives. O(log names). Not
// thread-safe: the store is guarded by Registry::mutex_.
[[nodiscard]] std::optional<std::uint32_t> NamespaceOwner(const VersionStore& versions,
                                                          std::string_view name);

}  // namespace hurray::daemon
