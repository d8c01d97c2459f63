// SessionTable: the registry's open sessions, by id and by token.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::daemon {

class Pool;
struct TensorVersion;

// A CUDA slab a session reported mapping (SlabMapped).
struct SlabMapping {
  const Pool* pool = nullptr;
  bool read_only = false;
};

// One client connection's standing in the registry: what it holds, so that closing it
// returns everything. Its waits are kept by the WaitSet.
struct Session {
  PeerCredentials peer;
  std::string client_name;
  std::string token;
  std::set<std::uint64_t> allocations;  // Unpublished allocation ids.
  std::set<std::uint64_t> leases;       // Lease ids.
  std::uint64_t pending_bytes = 0;      // Sum of the unpublished allocations' charged bytes.
  // Event-mode versions it published whose fence was not reached when last looked at: when
  // the session ends, those still unreached are poisoned and deleted.
  std::vector<std::weak_ptr<TensorVersion>> unsignalled;
  std::size_t unsignalled_prune_at = 0;      // Size at which `unsignalled` is pruned next.
  std::set<std::uint64_t> granted_segments;  // Segment ids GrantSegment opened for it.
  std::map<std::uint64_t, SlabMapping> slab_mappings;  // Slabs it reported, by segment id.
  // A pidfd on its process (Registry::SetPeerProcess), or none: what it could still write
  // when it ends is then quarantined until that process has exited.
  UniqueFd process;
};

// Sessions by id, and the id each token names. A token names exactly one open session.
//
// Not thread-safe: guarded by Registry::mutex_.
class SessionTable {
 public:
  // Adds a session under `id` (not in use) and its token (not in use); returns it.
  Session& Open(std::uint64_t id, Session session);
  // Removes the session and its token. Unknown ids are ignored.
  void Close(std::uint64_t id);

  // The session of `id`, or null.
  [[nodiscard]] Session* Find(std::uint64_t id);
  [[nodiscard]] const Session* Find(std::uint64_t id) const;
  // The id of the session `token` names, if one does.
  [[nodiscard]] std::optional<std::uint64_t> FindByToken(std::string_view token) const;

  [[nodiscard]] std::size_t size() const { return sessions_.size(); }
  [[nodiscard]] const std::unordered_map<std::uint64_t, Session>& sessions() const {
    return sessions_;
  }

 private:
  std::unordered_map<std::uint64_t, Session> sessions_;
  std::unordered_map<std::string, std::uint64_t> id_by_token_;
};

}  // namespace hurray::daemon
