// Principal: who an access rule names ("uid:N", "user:NAME", "gid:N", "group:NAME", "any"),
// with user and group names resolved once, when the configuration is loaded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/peer_credentials.h"

namespace hurray::daemon {

// A plain value; thread-safe to read. A group matches a peer whose primary gid (as
// SO_PEERCRED reports it) is the group's, or whose uid is one of the members the group
// database listed when the configuration was loaded.
class Principal {
 public:
  // Parses and resolves one entry. INVALID_ARGUMENT naming `field` and the entry for a
  // malformed entry, an unknown user or an unknown group.
  [[nodiscard]] static Result<Principal> Parse(std::string_view text, std::string_view field);

  [[nodiscard]] bool Matches(const PeerCredentials& peer) const;
  // True for "any": anonymous callers match it too.
  [[nodiscard]] bool is_any() const { return kind_ == Kind::kAny; }
  // As written in the configuration ("user:alice"), with what it resolved to
  // ("user:alice (uid 1001)").
  [[nodiscard]] const std::string& text() const { return text_; }
  [[nodiscard]] std::string Explain() const;

 private:
  enum class Kind : std::uint8_t { kAny, kUid, kGid };
  Principal(Kind kind, std::string text) : kind_(kind), text_(std::move(text)) {}

  Kind kind_;
  std::string text_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::vector<uid_t> members_;  // Of a group: its listed members' uids.
};

}  // namespace hurray::daemon
