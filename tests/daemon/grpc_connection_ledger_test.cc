// The caps on what peers hold: PeerCounts (gRPC connections, Watch streams, per uid and
// overall), GrpcConnectionLedger (connections by descriptor, swept for closed ones before a
// cap refuses), and the descriptor reserve's rule.
#include "grpc_connection_ledger.h"

#include <gtest/gtest.h>

#include <set>

#include "descriptor_reserve.h"
#include "peer_counts.h"

namespace hurray::daemon {
namespace {

using std::chrono::milliseconds;

constexpr PeerCounts::Limits kLimits{.max_total = 5,
                                     .max_per_peer = 2,
                                     .total_setting = "max_grpc_connections",
                                     .per_peer_setting = "max_grpc_connections_per_uid",
                                     .what = "gRPC connections"};

TEST(PeerCountsTest, RefusesBeyondThePerPeerCapNamingItAndTheUid) {
  PeerCounts counts(kLimits);
  EXPECT_FALSE(counts.TryAdd(uid_t{1001}));
  EXPECT_FALSE(counts.TryAdd(uid_t{1001}));
  const std::optional<Error> refusal = counts.TryAdd(uid_t{1001});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refusal->message(),
            "uid 1001: max_grpc_connections_per_uid 2 reached: that uid already holds 2 gRPC "
            "connections; end some first");
  EXPECT_EQ(counts.of(uid_t{1001}), 2u);
  // Another uid is not held back by the first.
  EXPECT_FALSE(counts.TryAdd(uid_t{0}));
  counts.Remove(uid_t{1001});
  EXPECT_FALSE(counts.TryAdd(uid_t{1001}));
}

TEST(PeerCountsTest, RefusesBeyondTheTotalAndCountsTcpClientsAsOnePeer) {
  PeerCounts counts(kLimits);
  EXPECT_FALSE(counts.TryAdd(std::nullopt));
  EXPECT_FALSE(counts.TryAdd(std::nullopt));
  const std::optional<Error> tcp = counts.Refusal(std::nullopt);
  ASSERT_TRUE(tcp);
  EXPECT_NE(tcp->message().find("TCP clients: max_grpc_connections_per_uid 2 reached"),
            std::string::npos)
      << tcp->message();
  for (uid_t uid : {1, 2, 3}) EXPECT_FALSE(counts.TryAdd(uid));
  const std::optional<Error> full = counts.TryAdd(uid_t{4});
  ASSERT_TRUE(full);
  EXPECT_EQ(full->message(),
            "max_grpc_connections 5 reached: the daemon already holds 5 gRPC connections; try "
            "again later");
  EXPECT_EQ(counts.total(), 5u);
  counts.Remove(uid_t{4});  // Holds none: nothing changes.
  EXPECT_EQ(counts.total(), 5u);
}

TEST(PeerCountsTest, ZeroLiftsACap) {
  PeerCounts counts({.max_total = 0,
                     .max_per_peer = 0,
                     .total_setting = "max_watchers",
                     .per_peer_setting = "max_watchers_per_uid",
                     .what = "Watch streams"});
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(counts.TryAdd(uid_t{7}));
  EXPECT_EQ(counts.of(uid_t{7}), 1000u);
}

class GrpcConnectionLedgerTest : public ::testing::Test {
 protected:
  // Connections whose descriptor is in `open_` are open.
  GrpcConnectionLedger ledger_{kLimits,
                               [this](const GrpcConnectionLedger::Connection& connection) {
                                 ++sweeps_asked_;
                                 return open_.contains(connection.fd);
                               },
                               milliseconds(100)};
  std::set<int> open_;
  int sweeps_asked_ = 0;
  std::chrono::steady_clock::time_point now_{};

  std::optional<Error> Accept(int fd, PeerKey peer) {
    open_.insert(fd);
    return ledger_.Admit({.fd = fd, .inode = static_cast<std::uint64_t>(fd) + 1000, .peer = peer},
                         now_);
  }
};

TEST_F(GrpcConnectionLedgerTest, KnowsWhomEachDescriptorIsChargedTo) {
  EXPECT_FALSE(Accept(10, uid_t{1001}));
  EXPECT_FALSE(Accept(11, std::nullopt));
  EXPECT_EQ(ledger_.PeerOf(10), PeerKey(1001));
  EXPECT_EQ(ledger_.PeerOf(11), std::optional<PeerKey>(PeerKey()));  // A TCP client.
  EXPECT_FALSE(ledger_.PeerOf(12).has_value());
  EXPECT_EQ(ledger_.count(), 2u);
}

TEST_F(GrpcConnectionLedgerTest, SweepsClosedConnectionsBeforeItRefuses) {
  EXPECT_FALSE(Accept(10, uid_t{1001}));
  EXPECT_FALSE(Accept(11, uid_t{1001}));
  EXPECT_EQ(sweeps_asked_, 0);  // Nothing refused yet: no sweep.
  open_.erase(10);              // gRPC closed it; the ledger does not know yet.
  EXPECT_FALSE(Accept(12, uid_t{1001}));
  EXPECT_EQ(ledger_.count_of(uid_t{1001}), 2u);
  EXPECT_FALSE(ledger_.PeerOf(10).has_value());
  // Both open: the third is refused, and a flood of refusals sweeps once per interval.
  const int sweeps = sweeps_asked_;
  EXPECT_TRUE(Accept(13, uid_t{1001}));
  EXPECT_TRUE(Accept(14, uid_t{1001}));
  EXPECT_EQ(sweeps_asked_, sweeps);
  now_ += milliseconds(100);
  open_.erase(11);
  EXPECT_FALSE(Accept(15, uid_t{1001}));
  EXPECT_EQ(ledger_.count(), 2u);
}

TEST_F(GrpcConnectionLedgerTest, ADescriptorNumberAcceptedAgainReplacesItsClosedEntry) {
  EXPECT_FALSE(Accept(10, uid_t{1001}));
  EXPECT_FALSE(Accept(11, uid_t{1001}));
  // Descriptor 10 was closed and the kernel gave its number to the next connection.
  EXPECT_FALSE(Accept(10, uid_t{1002}));
  EXPECT_EQ(ledger_.count_of(uid_t{1001}), 1u);
  EXPECT_EQ(ledger_.PeerOf(10), PeerKey(1002));
  EXPECT_EQ(sweeps_asked_, 0);
}

TEST(DescriptorReserveTest, TheLastDescriptorsOfTheLimitAreKept) {
  EXPECT_FALSE(InDescriptorReserve(871, 1000, 128));
  EXPECT_TRUE(InDescriptorReserve(872, 1000, 128));
  EXPECT_TRUE(InDescriptorReserve(999, 1000, 128));
  EXPECT_FALSE(InDescriptorReserve(999, 1000, 0));  // None kept.
  EXPECT_TRUE(InDescriptorReserve(3, 100, 1000));   // A reserve above the limit keeps all.
  // The process's own limit: the descriptors it uses now are far below it.
  EXPECT_FALSE(DescriptorReserveRefusal(3, 1).has_value());
  const std::optional<Error> refusal = DescriptorReserveRefusal(3, 1'000'000'000);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refusal->message().find("reserved_descriptors 1000000000 reached"), std::string::npos)
      << refusal->message();
}

}  // namespace
}  // namespace hurray::daemon
