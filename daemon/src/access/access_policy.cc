#include "access/access_policy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace hurray::daemon {
namespace {

std::string_view NamespaceOf(std::string_view name) { return name.substr(0, name.find('/')); }

std::string Caller(const PeerCredentials* peer) {
  return peer == nullptr ? std::string("anonymous callers") : fmt::format("uid {}", peer->uid);
}

Error Denied(AccessVerb verb, std::string_view name, const PeerCredentials* peer,
             std::string_view why) {
  return PermissionDeniedError(fmt::format("namespace \"{}\": {} denied to {} {}",
                                           NamespaceOf(name), AccessVerbName(verb), Caller(peer),
                                           why))
      .error();
}

Result<std::vector<Principal>> PrincipalsOf(const std::vector<std::string>& texts,
                                            const std::string& field) {
  std::vector<Principal> principals;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    HURRAY_ASSIGN_OR_RETURN(Principal principal,
                            Principal::Parse(texts[i], fmt::format("{}[{}]", field, i)));
    principals.push_back(std::move(principal));
  }
  return principals;
}

std::string ExplainList(const std::vector<Principal>& principals) {
  if (principals.empty()) return "nobody";
  std::vector<std::string> parts;
  parts.reserve(principals.size());
  for (const Principal& principal : principals) parts.push_back(principal.Explain());
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

std::string_view AccessVerbName(AccessVerb verb) {
  switch (verb) {
    case AccessVerb::kPublish:
      return "publish";
    case AccessVerb::kRead:
      return "read";
    case AccessVerb::kDelete:
      return "delete";
  }
  return "?";
}

const std::vector<Principal>& AccessPolicy::Rule::For(AccessVerb verb) const {
  switch (verb) {
    case AccessVerb::kPublish:
      return publish;
    case AccessVerb::kRead:
      return read;
    case AccessVerb::kDelete:
      return remove;
  }
  return read;
}

Result<AccessPolicy> AccessPolicy::Make(const std::vector<RuleSpec>& rules,
                                        const std::vector<PoolLimitSpec>& pools, uid_t daemon_uid) {
  AccessPolicy policy(daemon_uid);
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const std::string field = fmt::format("namespace[{}]", i);
    const RuleSpec& spec = rules[i];
    HURRAY_ASSIGN_OR_RETURN(NamespacePattern pattern,
                            NamespacePattern::Parse(spec.pattern, field + ".pattern"));
    HURRAY_ASSIGN_OR_RETURN(std::vector<Principal> publish,
                            PrincipalsOf(spec.publish, field + ".publish"));
    HURRAY_ASSIGN_OR_RETURN(std::vector<Principal> read, PrincipalsOf(spec.read, field + ".read"));
    HURRAY_ASSIGN_OR_RETURN(std::vector<Principal> remove,
                            PrincipalsOf(spec.remove, field + ".delete"));
    policy.rules_.push_back(Rule{.pattern = std::move(pattern),
                                 .publish = std::move(publish),
                                 .read = std::move(read),
                                 .remove = std::move(remove)});
  }
  for (const PoolLimitSpec& spec : pools) {
    if (spec.patterns.empty()) continue;
    PoolLimit limit{.pool = spec.pool, .patterns = {}};
    for (std::size_t i = 0; i < spec.patterns.size(); ++i) {
      HURRAY_ASSIGN_OR_RETURN(
          NamespacePattern pattern,
          NamespacePattern::Parse(spec.patterns[i],
                                  fmt::format("{}_pool.namespaces[{}]", spec.pool, i)));
      limit.patterns.push_back(std::move(pattern));
    }
    policy.pool_limits_.push_back(std::move(limit));
  }
  return policy;
}

Status AccessPolicy::Check(AccessVerb verb, std::string_view name, const PeerCredentials* peer,
                           std::optional<std::uint32_t> owner) const {
  if (peer != nullptr && (peer->uid == 0 || peer->uid == daemon_uid_)) return {};
  return rules_.empty() ? CheckDefault(verb, name, peer, owner) : CheckRules(verb, name, peer);
}

Status AccessPolicy::CheckDefault(AccessVerb verb, std::string_view name,
                                  const PeerCredentials* peer,
                                  std::optional<std::uint32_t> owner) const {
  if (verb == AccessVerb::kRead) return {};
  if (peer == nullptr) return std::unexpected(Denied(verb, name, peer, "(no session)"));
  if (!owner || *owner == peer->uid) return {};
  return std::unexpected(
      Denied(verb, name, peer, fmt::format("by the default policy (owned by uid {})", *owner)));
}

Status AccessPolicy::CheckRules(AccessVerb verb, std::string_view name,
                                const PeerCredentials* peer) const {
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const Rule& rule = rules_[i];
    if (!rule.pattern.Matches(name)) continue;
    const std::vector<Principal>& allowed = rule.For(verb);
    const bool admitted = std::ranges::any_of(allowed, [peer](const Principal& principal) {
      return peer == nullptr ? principal.is_any() : principal.Matches(*peer);
    });
    if (admitted) return {};
    return std::unexpected(Denied(
        verb, name, peer, fmt::format("by rule {} (pattern \"{}\")", i + 1, rule.pattern.text())));
  }
  return std::unexpected(
      Denied(verb, name, peer, "by default: no [[namespace]] rule's pattern matches the name"));
}

const AccessPolicy::PoolLimit* AccessPolicy::FindPoolLimit(std::string_view pool_name) const {
  const std::string_view family = pool_name.substr(0, pool_name.find(':'));
  for (const PoolLimit& limit : pool_limits_) {
    if (limit.pool == pool_name || limit.pool == family) return &limit;
  }
  return nullptr;
}

Status AccessPolicy::CheckPool(std::string_view pool_name, std::string_view name) const {
  const PoolLimit* limit = FindPoolLimit(pool_name);
  if (limit == nullptr) return {};
  if (std::ranges::any_of(limit->patterns, [name](const NamespacePattern& pattern) {
        return pattern.Matches(name);
      })) {
    return {};
  }
  return PermissionDeniedError(
      fmt::format("pool {} holds only namespaces [{}]: {} matches none of them", pool_name,
                  fmt::join(PoolNamespaces(pool_name), ", "), name));
}

std::vector<std::string> AccessPolicy::PoolNamespaces(std::string_view pool_name) const {
  std::vector<std::string> patterns;
  if (const PoolLimit* limit = FindPoolLimit(pool_name)) {
    for (const NamespacePattern& pattern : limit->patterns) patterns.push_back(pattern.text());
  }
  return patterns;
}

std::string AccessPolicy::Explain() const {
  std::string text = fmt::format(
      "access policy: the daemon's uid ({}) and root may do anything, in any namespace.\n",
      daemon_uid_);
  if (rules_.empty()) {
    text +=
        "no [[namespace]] rules: the default policy. A namespace belongs to the uid that first "
        "published in it, while any version in it lives; only that uid may publish, supersede or "
        "delete in it. Every admitted session may read, and anonymous gRPC callers may list, "
        "describe and watch everything.\n";
  } else {
    text += fmt::format(
        "{} [[namespace]] rules; the first whose pattern matches a tensor's name decides; a name "
        "no rule matches is denied. Anonymous gRPC callers see only names whose rule lets "
        "\"any\" read.\n",
        rules_.size());
    for (std::size_t i = 0; i < rules_.size(); ++i) {
      const Rule& rule = rules_[i];
      text += fmt::format(
          "rule {}: names matching \"{}\"\n  publish: {}\n  read:    {}\n  delete:  {}\n", i + 1,
          rule.pattern.text(), ExplainList(rule.publish), ExplainList(rule.read),
          ExplainList(rule.remove));
    }
  }
  for (const PoolLimit& limit : pool_limits_) {
    text += fmt::format("pool {} holds only names matching [{}]\n", limit.pool,
                        fmt::join(PoolNamespaces(limit.pool), ", "));
  }
  return text;
}

}  // namespace hurray::daemon
