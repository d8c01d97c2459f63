#include "registry/session_table.h"

#include <utility>

namespace hurray::daemon {

Session& SessionTable::Open(std::uint64_t id, Session session) {
  id_by_token_.emplace(session.token, id);
  return sessions_.insert_or_assign(id, std::move(session)).first->second;
}

void SessionTable::Close(std::uint64_t id) {
  auto found = sessions_.find(id);
  if (found == sessions_.end()) return;
  id_by_token_.erase(found->second.token);
  sessions_.erase(found);
}

Session* SessionTable::Find(std::uint64_t id) {
  auto found = sessions_.find(id);
  return found == sessions_.end() ? nullptr : &found->second;
}

const Session* SessionTable::Find(std::uint64_t id) const {
  auto found = sessions_.find(id);
  return found == sessions_.end() ? nullptr : &found->second;
}

std::optional<std::uint64_t> SessionTable::FindByToken(std::string_view token) const {
  auto found = id_by_token_.find(std::string(token));
  if (found == id_by_token_.end()) return std::nullopt;
  return found->second;
}

}  // namespace hurray::daemon
