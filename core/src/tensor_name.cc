#include "hurray/tensor_name.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace hurray {
namespace {

bool IsNameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

std::string ShownName(std::string_view name) {
  std::string shown;
  shown.reserve(std::min(name.size(), kShownNameBytes) + 3);
  for (const char c : name.substr(0, kShownNameBytes)) {
    shown += (c >= 0x20 && c < 0x7F) ? c : '?';
  }
  if (name.size() > kShownNameBytes) shown += "...";
  return shown;
}

Status ValidateTensorName(std::string_view name, std::string_view field) {
  // Built only for an error: every request that names a tensor comes through here.
  // A long or binary name is cut for the message; the limit check reports its length.
  const auto prefix = [&] { return fmt::format("{} \"{}\"", field, ShownName(name)); };
  if (name.size() > kMaxTensorNameBytes) {
    return InvalidArgumentError(fmt::format("{} is {} bytes, above the limit {}", prefix(),
                                            name.size(), kMaxTensorNameBytes));
  }
  if (name.find('/') == std::string_view::npos) {
    return InvalidArgumentError(
        fmt::format("{} has no namespace: names are \"namespace/name\"", prefix()));
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, end - start);
    if (part.empty()) {
      return InvalidArgumentError(fmt::format("{} has an empty part", prefix()));
    }
    if (part.size() > kMaxNamePartBytes) {
      return InvalidArgumentError(
          fmt::format("{} has a part longer than {} characters", prefix(), kMaxNamePartBytes));
    }
    if (part == "." || part == "..") {
      return InvalidArgumentError(fmt::format(R"({} has a "." or ".." part)", prefix()));
    }
    for (char c : part) {
      if (!IsNameCharacter(c)) {
        return InvalidArgumentError(
            fmt::format("{} has a character outside [A-Za-z0-9._-/]", prefix()));
      }
    }
    if (end == name.size()) break;
    start = end + 1;
  }
  return {};
}

}  // namespace hurray
