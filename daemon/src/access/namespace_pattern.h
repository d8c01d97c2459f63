// NamespacePattern: a glob over tensor names, as access rules and pool limits write them.
#pragma once

#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

// `*` matches any run of characters within one component (no '/'); `**` matches any run,
// '/' included; every other character matches itself. "team-a/**" matches every name of
// namespace team-a; "shared/*" the names of shared with no further '/'. A plain value;
// thread-safe to read.
class NamespacePattern {
 public:
  // INVALID_ARGUMENT naming `field` for an empty pattern or one with "***".
  [[nodiscard]] static Result<NamespacePattern> Parse(std::string_view text,
                                                      std::string_view field);

  [[nodiscard]] bool Matches(std::string_view name) const;
  [[nodiscard]] const std::string& text() const { return text_; }

 private:
  explicit NamespacePattern(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

}  // namespace hurray::daemon
