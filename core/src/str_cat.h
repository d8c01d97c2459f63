// Message building for errors: StrCat of strings and numbers.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace hurray::internal {

// Concatenates anything an ostream prints; 8-bit integers print as numbers.
template <typename... Parts>
[[nodiscard]] std::string StrCat(const Parts&... parts) {
  std::ostringstream out;
  auto append = [&out](const auto& part) {
    using Part = std::decay_t<decltype(part)>;
    if constexpr (std::is_same_v<Part, std::uint8_t> || std::is_same_v<Part, std::int8_t>) {
      out << static_cast<int>(part);
    } else {
      out << part;
    }
  };
  (append(parts), ...);
  return std::move(out).str();
}

}  // namespace hurray::internal
