// Message building for errors: StrCat of strings and numbers, and hex bytes.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace hurray::internal {

// "0x0A": a one-byte tag as it is written in docs (wider values print in full).
[[nodiscard]] inline std::string HexByte(std::uint32_t value) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string text = "0x";
  int shift = 28;
  while (shift > 4 && ((value >> shift) & 0xF) == 0) shift -= 4;
  for (; shift >= 0; shift -= 4) text += kDigits[(value >> shift) & 0xF];
  return text;
}

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
