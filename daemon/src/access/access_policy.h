// AccessPolicy: who may publish, read and delete in which namespace, and which namespaces a
// pool may hold. Built once from the configuration; the registry asks it on every
// publish, acquire, delete and inspection, whichever channel (gRPC or the session socket)
// the request came on.
//
// Default (no [[namespace]] rule): a namespace (the `ns` of "ns/name") belongs to the uid
// that first published in it, for as long as any version in it lives; only that uid may
// publish, supersede or delete in it; everyone may read, anonymous gRPC callers included.
//
// Configured: the first rule whose pattern matches the tensor's name decides, by its list
// for the verb; a name no rule matches is denied. Anonymous callers match only "any".
//
// Either way the daemon's own uid and root are always allowed.
//
// Immutable once built; thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "access/namespace_pattern.h"
#include "access/principal.h"
#include "hurray/error.h"
#include "hurray/ipc/peer_credentials.h"

namespace hurray::daemon {

enum class AccessVerb : std::uint8_t { kPublish, kRead, kDelete };

// "publish", "read", "delete".
[[nodiscard]] std::string_view AccessVerbName(AccessVerb verb);

class AccessPolicy {
 public:
  // One [[namespace]] table as the configuration writes it.
  struct RuleSpec {
    std::string pattern;
    std::vector<std::string> publish;
    std::vector<std::string> read;
    std::vector<std::string> remove;  // The key "delete".
  };
  // A pool's `namespaces`: `pool` is a pool's name, or its family ("cuda" for every
  // cuda:N); an empty list leaves the pool open to every namespace.
  struct PoolLimitSpec {
    std::string pool;
    std::vector<std::string> patterns;
  };

  // The default policy, for a daemon running as `daemon_uid`.
  explicit AccessPolicy(uid_t daemon_uid) : daemon_uid_(daemon_uid) {}

  // Parses every rule and pool limit, resolving user and group names now. INVALID_ARGUMENT
  // naming the table and key ("namespace[1].read[0]: user \"bob\" does not exist").
  [[nodiscard]] static Result<AccessPolicy> Make(const std::vector<RuleSpec>& rules,
                                                 const std::vector<PoolLimitSpec>& pools,
                                                 uid_t daemon_uid);

  // OK when `peer` (null: an anonymous gRPC caller) may do `verb` to tensor `name`;
  // `owner` is the uid owning the name's namespace, when any version in it lives.
  // PERMISSION_DENIED naming the namespace, the verb, the caller and the rule otherwise.
  [[nodiscard]] Status Check(AccessVerb verb, std::string_view name, const PeerCredentials* peer,
                             std::optional<std::uint32_t> owner) const;
  [[nodiscard]] bool MayRead(std::string_view name, const PeerCredentials* peer) const {
    return Check(AccessVerb::kRead, name, peer, std::nullopt).has_value();
  }
  // OK when pool `pool_name` may hold tensor `name`; PERMISSION_DENIED naming the pool and
  // its patterns otherwise.
  [[nodiscard]] Status CheckPool(std::string_view pool_name, std::string_view name) const;
  // The patterns limiting `pool_name`; empty when it may hold any namespace.
  [[nodiscard]] std::vector<std::string> PoolNamespaces(std::string_view pool_name) const;

  [[nodiscard]] bool configured() const { return !rules_.empty(); }
  // The policy in words, rule by rule (hurrayd --check-config).
  [[nodiscard]] std::string Explain() const;

 private:
  struct Rule {
    NamespacePattern pattern;
    std::vector<Principal> publish;
    std::vector<Principal> read;
    std::vector<Principal> remove;
    [[nodiscard]] const std::vector<Principal>& For(AccessVerb verb) const;
  };
  struct PoolLimit {
    std::string pool;
    std::vector<NamespacePattern> patterns;
  };

  [[nodiscard]] const PoolLimit* FindPoolLimit(std::string_view pool_name) const;
  [[nodiscard]] Status CheckDefault(AccessVerb verb, std::string_view name,
                                    const PeerCredentials* peer,
                                    std::optional<std::uint32_t> owner) const;
  [[nodiscard]] Status CheckRules(AccessVerb verb, std::string_view name,
                                  const PeerCredentials* peer) const;

  uid_t daemon_uid_;
  std::vector<Rule> rules_;
  std::vector<PoolLimit> pool_limits_;
};

}  // namespace hurray::daemon
