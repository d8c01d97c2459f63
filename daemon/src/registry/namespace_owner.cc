#include "registry/namespace_owner.h"

#include <string>

#include "registry/tensor_name.h"

namespace hurray::daemon {

std::optional<std::uint32_t> NamespaceOwner(const VersionStore& versions, std::string_view name) {
  const std::string prefix(name.substr(0, name.find('/') + 1));  // "ns/"
  const VersionStore::Names& names = versions.names();
  const auto found = names.lower_bound(prefix);
  if (found == names.end() || !HasPrefix(found->first, prefix) || found->second.versions.empty()) {
    return std::nullopt;
  }
  return found->second.versions.front()->namespace_owner_uid;
}

}  // namespace hurray::daemon
