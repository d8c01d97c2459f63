#include "grpc_connection_ledger.h"

#include <utility>

namespace hurray::daemon {

GrpcConnectionLedger::GrpcConnectionLedger(PeerCounts::Limits limits, StillOpen still_open,
                                           std::chrono::milliseconds sweep_interval)
    : counts_(limits), still_open_(std::move(still_open)), sweep_interval_(sweep_interval) {}

std::optional<Error> GrpcConnectionLedger::Admit(const Connection& connection,
                                                 std::chrono::steady_clock::time_point now) {
  // accept returned this number: whatever had it before is closed.
  if (auto stale = by_fd_.find(connection.fd); stale != by_fd_.end()) Forget(stale);
  std::optional<Error> refusal = counts_.Refusal(connection.peer);
  if (refusal && (!last_sweep_ || now - *last_sweep_ >= sweep_interval_)) {
    last_sweep_ = now;
    Sweep();
    refusal = counts_.Refusal(connection.peer);
  }
  if (refusal) return refusal;
  (void)counts_.TryAdd(connection.peer);  // Fits: Refusal said so.
  by_fd_.emplace(connection.fd, connection);
  return std::nullopt;
}

void GrpcConnectionLedger::Sweep() {
  for (auto entry = by_fd_.begin(); entry != by_fd_.end();) {
    auto next = std::next(entry);
    if (!still_open_(entry->second)) Forget(entry);
    entry = next;
  }
}

std::optional<PeerKey> GrpcConnectionLedger::PeerOf(int fd) const {
  const auto found = by_fd_.find(fd);
  if (found == by_fd_.end()) return std::nullopt;
  return found->second.peer;
}

void GrpcConnectionLedger::Forget(std::map<int, Connection>::iterator entry) {
  counts_.Remove(entry->second.peer);
  by_fd_.erase(entry);
}

}  // namespace hurray::daemon
