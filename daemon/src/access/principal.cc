#include "access/principal.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>

#include "hurray/errno_error.h"

namespace hurray::daemon {
namespace {

constexpr std::size_t kLookupBufferBytes = 16384;

// Calls `lookup(buffer, size)` (a getpwnam_r or getgrnam_r) with a buffer grown until the
// entry fits; returns its error number.
template <typename Lookup>
int WithBuffer(std::vector<char>& buffer, Lookup lookup) {
  buffer.resize(kLookupBufferBytes);
  int error = 0;
  while ((error = lookup(buffer.data(), buffer.size())) == ERANGE) buffer.resize(buffer.size() * 2);
  return error;
}

std::optional<std::uint32_t> ParseId(std::string_view text) {
  std::uint32_t id = 0;
  const char* end = text.data() + text.size();
  auto [rest, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || error != std::errc() || rest != end) return std::nullopt;
  return id;
}

Result<uid_t> UidOfUser(const std::string& name, std::string_view field) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer;
  const int error = WithBuffer(buffer, [&](char* data, std::size_t size) {
    return ::getpwnam_r(name.c_str(), &entry, data, size, &found);
  });
  if (error != 0) {
    return std::unexpected(ErrnoError("getpwnam_r", name, error).WithContext(field));
  }
  if (found == nullptr) {
    return InvalidArgumentError(fmt::format("{}: user \"{}\" does not exist", field, name));
  }
  return entry.pw_uid;
}

}  // namespace

Result<Principal> Principal::Parse(std::string_view text, std::string_view field) {
  if (text == "any") return Principal(Kind::kAny, "any");
  const std::size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  const std::string value(colon == std::string_view::npos ? "" : text.substr(colon + 1));
  if (value.empty() || (kind != "uid" && kind != "gid" && kind != "user" && kind != "group")) {
    return InvalidArgumentError(
        fmt::format("{}: \"{}\" is not uid:N, user:NAME, gid:N, group:NAME or any", field, text));
  }
  if (kind == "uid" || kind == "gid") {
    const std::optional<std::uint32_t> id = ParseId(value);
    if (!id) {
      return InvalidArgumentError(
          fmt::format("{}: \"{}\": {} is not a number", field, text, value));
    }
    Principal principal(kind == "uid" ? Kind::kUid : Kind::kGid, std::string(text));
    principal.uid_ = *id;
    principal.gid_ = *id;
    return principal;
  }
  if (kind == "user") {
    HURRAY_ASSIGN_OR_RETURN(const uid_t uid, UidOfUser(value, field));
    Principal principal(Kind::kUid, std::string(text));
    principal.uid_ = uid;
    return principal;
  }
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer;
  const int error = WithBuffer(buffer, [&](char* data, std::size_t size) {
    return ::getgrnam_r(value.c_str(), &entry, data, size, &found);
  });
  if (error != 0) {
    return std::unexpected(ErrnoError("getgrnam_r", value, error).WithContext(field));
  }
  if (found == nullptr) {
    return InvalidArgumentError(fmt::format("{}: group \"{}\" does not exist", field, value));
  }
  Principal principal(Kind::kGid, std::string(text));
  principal.gid_ = entry.gr_gid;
  std::vector<std::string> members;
  for (char** member = entry.gr_mem; member != nullptr && *member != nullptr; ++member) {
    members.emplace_back(*member);
  }
  for (const std::string& member : members) {
    // A listed member without a passwd entry can never connect as that name: skipped.
    if (auto uid = UidOfUser(member, field)) principal.members_.push_back(*uid);
  }
  return principal;
}

bool Principal::Matches(const PeerCredentials& peer) const {
  switch (kind_) {
    case Kind::kAny:
      return true;
    case Kind::kUid:
      return peer.uid == uid_;
    case Kind::kGid:
      return peer.gid == gid_ || std::ranges::find(members_, peer.uid) != members_.end();
  }
  return false;
}

std::string Principal::Explain() const {
  switch (kind_) {
    case Kind::kAny:
      return "any uid (and, to read, anonymous gRPC callers)";
    case Kind::kUid:
      return text_.starts_with("uid:") ? text_ : fmt::format("{} (uid {})", text_, uid_);
    case Kind::kGid:
      if (members_.empty()) return fmt::format("{} (gid {})", text_, gid_);
      return fmt::format("{} (gid {}, or uids {})", text_, gid_, fmt::join(members_, ", "));
  }
  return text_;
}

}  // namespace hurray::daemon
