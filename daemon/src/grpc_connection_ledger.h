// GrpcConnectionLedger: the gRPC connections the daemon handed to its gRPC server, by
// descriptor, counted per peer against max_grpc_connections and
// max_grpc_connections_per_uid. Pure bookkeeping: whether a connection is still open is
// asked of the StillOpen function (GrpcListener's fstat), so the logic is tested without
// sockets.
//
// gRPC closes a connection's descriptor itself and tells nobody, so the ledger learns of
// closed connections lazily: a descriptor number that accept returns again was closed
// (its old entry goes), and before a cap refuses, the ledger sweeps its entries for closed
// ones (at most once per sweep interval, so that a flood of refused connections does not
// buy a sweep each). The counts are therefore exact whenever they refuse, and at most one
// sweep interval stale otherwise.
//
// Not thread-safe: its owner serializes calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "hurray/error.h"
#include "peer_counts.h"

namespace hurray::daemon {

class GrpcConnectionLedger {
 public:
  // One connection: its descriptor (the gRPC server owns it), the socket's inode (which
  // tells it from a later descriptor of the same number) and whom it is charged to.
  struct Connection {
    int fd = -1;
    std::uint64_t inode = 0;
    PeerKey peer;
  };
  // Whether `connection`'s descriptor is still that socket.
  using StillOpen = std::function<bool(const Connection& connection)>;

  GrpcConnectionLedger(PeerCounts::Limits limits, StillOpen still_open,
                       std::chrono::milliseconds sweep_interval = std::chrono::milliseconds(100));

  // Records `connection`, or returns the RESOURCE_EXHAUSTED refusal (PeerCounts::Refusal)
  // when it would exceed a cap even after a sweep. `now` paces the sweeps.
  [[nodiscard]] std::optional<Error> Admit(const Connection& connection,
                                           std::chrono::steady_clock::time_point now);
  // Drops the entries whose descriptor is closed (or is another socket now).
  void Sweep();

  // Whom the connection on descriptor `fd` is charged to; nullopt when no connection of
  // the ledger has it.
  [[nodiscard]] std::optional<PeerKey> PeerOf(int fd) const;

  [[nodiscard]] std::size_t count() const { return counts_.total(); }
  [[nodiscard]] std::size_t count_of(PeerKey peer) const { return counts_.of(peer); }

 private:
  void Forget(std::map<int, Connection>::iterator entry);

  PeerCounts counts_;
  const StillOpen still_open_;
  const std::chrono::milliseconds sweep_interval_;
  std::map<int, Connection> by_fd_;
  std::optional<std::chrono::steady_clock::time_point> last_sweep_;
};

}  // namespace hurray::daemon
