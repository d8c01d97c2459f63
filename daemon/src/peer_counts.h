// PeerCounts: how many of something (gRPC connections, Watch streams) each peer holds, capped
// overall and per peer, with the refusal that names the cap.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

// Whom a limit charges: the uid of a unix-socket peer (SO_PEERCRED), or nullopt for the TCP
// clients, which carry no uid and so share one peer's limit.
using PeerKey = std::optional<uid_t>;

// "uid 1001", or "TCP clients".
[[nodiscard]] std::string DescribePeer(PeerKey peer);

// Not thread-safe: its owner serializes calls.
class PeerCounts {
 public:
  struct Limits {
    std::size_t max_total = 0;     // 0: no limit.
    std::size_t max_per_peer = 0;  // 0: no limit.
    // How refusals name the caps and what they count ("max_watchers", "max_watchers_per_uid",
    // "Watch streams"); string literals.
    std::string_view total_setting;
    std::string_view per_peer_setting;
    std::string_view what;
  };

  explicit PeerCounts(Limits limits) : limits_(limits) {}

  // RESOURCE_EXHAUSTED naming the cap one more for `peer` would exceed; nullopt when it fits:
  //   "max_watchers 256 reached: the daemon already holds 256 Watch streams; try again later"
  //   "uid 1001: max_watchers_per_uid 32 reached: that uid already holds 32 Watch streams;
  //    end some first"
  [[nodiscard]] std::optional<Error> Refusal(PeerKey peer) const;
  // Refusal, or counts one more for `peer`.
  [[nodiscard]] std::optional<Error> TryAdd(PeerKey peer);
  // Counts one less for `peer` (nothing when it holds none).
  void Remove(PeerKey peer);

  [[nodiscard]] std::size_t total() const { return total_; }
  [[nodiscard]] std::size_t of(PeerKey peer) const;
  [[nodiscard]] const Limits& limits() const { return limits_; }

 private:
  const Limits limits_;
  std::map<PeerKey, std::size_t> by_peer_;  // No zero counts.
  std::size_t total_ = 0;
};

}  // namespace hurray::daemon
