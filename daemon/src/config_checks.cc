// What a configuration implies beyond its values: the warnings `hurrayd --check-config` and
// a start print (ConfigWarnings), and the access policy its [[namespace]] rules and pool
// namespaces make (MakeAccessPolicy).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config.h"
#include "metrics/metrics_address.h"

namespace hurray::daemon {

namespace {

// The literal start of a NamespacePattern: everything before its first '*'.
std::string_view LiteralPrefix(std::string_view pattern) {
  return pattern.substr(0, std::min(pattern.find('*'), pattern.size()));
}

// Whether some name could match both patterns. Over-approximated: unless the literal start of
// one is a start of the other, no name can match both.
bool MayOverlap(std::string_view a, std::string_view b) {
  const std::string_view prefix_a = LiteralPrefix(a);
  const std::string_view prefix_b = LiteralPrefix(b);
  return prefix_a.starts_with(prefix_b) || prefix_b.starts_with(prefix_a);
}

// The warning of ConfigWarnings for `pool` (its `namespaces`, empty: any), when the rules
// that may place names in it do not all give the same uids read.
std::optional<std::string> TrustDomainWarning(std::string_view pool,
                                              const std::vector<std::string>& pool_patterns,
                                              const std::vector<AccessPolicy::RuleSpec>& rules) {
  std::vector<std::string> described;
  std::optional<std::vector<std::string>> first_readers;
  bool differ = false;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const AccessPolicy::RuleSpec& rule = rules[i];
    const bool in_pool =
        pool_patterns.empty() || std::ranges::any_of(pool_patterns, [&](const std::string& held) {
          return MayOverlap(held, rule.pattern);
        });
    if (!in_pool) continue;
    std::vector<std::string> readers = rule.read;
    std::ranges::sort(readers);
    readers.erase(std::ranges::unique(readers).begin(), readers.end());
    if (!first_readers) {
      first_readers = readers;
    } else if (readers != *first_readers) {
      differ = true;
    }
    described.push_back(
        fmt::format("namespace[{}] \"{}\" read [{}]", i, rule.pattern, fmt::join(rule.read, ", ")));
  }
  if (!differ) return std::nullopt;
  return fmt::format(
      "the {} pool holds names of rules whose read lists differ ({}): a pool is one trust "
      "domain, so a uid that may acquire any tensor in it, or publish in it, maps the pool's "
      "memory and can read every tensor there, whatever that tensor's read rule; give "
      "namespaces that must not read each other different pools ({}_pool.namespaces, or the "
      "sealed pool, which maps each tensor on its own)",
      pool, fmt::join(described, "; "), pool);
}

}  // namespace

std::vector<std::string> ConfigWarnings(const Config& config) {
  std::vector<std::string> warnings;
  const auto not_loopback = [&](std::string_view setting, const std::string& text,
                                std::string_view consequence) {
    if (text.empty()) return;
    auto address = ParseTcpAddress(text, setting);
    if (address && !address->loopback) {
      warnings.push_back(
          fmt::format("{} {} is not a loopback address: {}", setting, text, consequence));
    }
  };
  not_loopback("tcp_address", config.tcp_address,
               "anyone who reaches it may call the gRPC service (anonymously, or with a session "
               "token that travels in clear text)");
  not_loopback("metrics_address", config.metrics_address,
               "anyone who reaches it sees the pools' use and the request counts");
  if (auto cpu = TrustDomainWarning("cpu", config.cpu_pool.namespaces, config.namespace_rules)) {
    warnings.push_back(std::move(*cpu));
  }
  if (config.cuda_pool.enabled) {
    if (auto cuda =
            TrustDomainWarning("cuda", config.cuda_pool.namespaces, config.namespace_rules)) {
      warnings.push_back(std::move(*cuda));
    }
  }
  return warnings;
}

Result<AccessPolicy> MakeAccessPolicy(const Config& config) {
  return AccessPolicy::Make(config.namespace_rules,
                            {{.pool = "cpu", .patterns = config.cpu_pool.namespaces},
                             {.pool = "cuda", .patterns = config.cuda_pool.namespaces},
                             {.pool = "sealed", .patterns = config.sealed_pool.namespaces}},
                            ::geteuid());
}

}  // namespace hurray::daemon
