#include "access/namespace_pattern.h"

#include <fmt/format.h>

#include <vector>

namespace hurray::daemon {
namespace {

// Glob matching by dynamic programming over (pattern, name) positions: linear space,
// time |pattern| * |name|, with no recursion however many stars the pattern has.
bool GlobMatches(std::string_view pattern, std::string_view name) {
  // reach[j]: the pattern's prefix so far matches name's first j characters.
  std::vector<char> reach(name.size() + 1, 0);
  reach[0] = 1;
  std::size_t i = 0;
  while (i < pattern.size()) {
    std::vector<char> next(name.size() + 1, 0);
    if (pattern[i] == '*') {
      const bool any = i + 1 < pattern.size() && pattern[i + 1] == '*';
      i += any ? 2 : 1;
      for (std::size_t j = 0; j <= name.size(); ++j) {
        // A star extends a match by one more character (never a '/' for a single star).
        next[j] = static_cast<char>(reach[j] != 0 ||
                                    (j > 0 && next[j - 1] != 0 && (any || name[j - 1] != '/')));
      }
    } else {
      for (std::size_t j = 1; j <= name.size(); ++j) {
        next[j] = static_cast<char>(reach[j - 1] != 0 && name[j - 1] == pattern[i]);
      }
      ++i;
    }
    reach = std::move(next);
  }
  return reach[name.size()] != 0;
}

}  // namespace

Result<NamespacePattern> NamespacePattern::Parse(std::string_view text, std::string_view field) {
  if (text.empty()) return InvalidArgumentError(fmt::format("{} is empty", field));
  if (text.find("***") != std::string_view::npos) {
    return InvalidArgumentError(
        fmt::format(R"({} "{}": "***" means nothing (use * or **))", field, text));
  }
  return NamespacePattern(std::string(text));
}

bool NamespacePattern::Matches(std::string_view name) const { return GlobMatches(text_, name); }

}  // namespace hurray::daemon
