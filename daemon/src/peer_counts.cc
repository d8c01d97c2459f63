#include "peer_counts.h"

#include <fmt/format.h>

namespace hurray::daemon {

std::string DescribePeer(PeerKey peer) {
  return peer ? fmt::format("uid {}", *peer) : std::string("TCP clients");
}

std::optional<Error> PeerCounts::Refusal(PeerKey peer) const {
  if (limits_.max_total != 0 && total_ >= limits_.max_total) {
    return ResourceExhaustedError(fmt::format("{} {} reached: the daemon already holds {} {}; try "
                                              "again later",
                                              limits_.total_setting, limits_.max_total, total_,
                                              limits_.what))
        .error();
  }
  const std::size_t held = of(peer);
  if (limits_.max_per_peer != 0 && held >= limits_.max_per_peer) {
    return ResourceExhaustedError(
               fmt::format("{}: {} {} reached: {} already hold{} {} {}; end some first",
                           DescribePeer(peer), limits_.per_peer_setting, limits_.max_per_peer,
                           peer ? "that uid" : "they", peer ? "s" : "", held, limits_.what))
        .error();
  }
  return std::nullopt;
}

std::optional<Error> PeerCounts::TryAdd(PeerKey peer) {
  if (auto refusal = Refusal(peer)) return refusal;
  ++by_peer_[peer];
  ++total_;
  return std::nullopt;
}

void PeerCounts::Remove(PeerKey peer) {
  const auto found = by_peer_.find(peer);
  if (found == by_peer_.end()) return;
  if (--found->second == 0) by_peer_.erase(found);
  --total_;
}

std::size_t PeerCounts::of(PeerKey peer) const {
  const auto found = by_peer_.find(peer);
  return found == by_peer_.end() ? 0 : found->second;
}

}  // namespace hurray::daemon
