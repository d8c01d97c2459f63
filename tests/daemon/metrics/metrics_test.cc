// The daemon's metrics without a daemon: RequestMetrics' counters and buckets, the metric
// families of a Stats reply and of the request counts (as a scrape prints them), the
// metrics_address setting, and MeteredSessionHost's recording.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <string>

#include "metrics/daemon_collector.h"
#include "metrics/metered_session_host.h"
#include "metrics/metrics_address.h"
#include "metrics/request_metrics.h"
#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

std::string Serialize(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

TEST(RequestMetricsTest, CountsEachRequestByCodeAndLatencyBucket) {
  RequestMetrics metrics;
  metrics.Record(RequestChannel::kSession, RequestMethod::kAcquire, StatusCode::kOk,
                 microseconds(3));
  metrics.Record(RequestChannel::kSession, RequestMethod::kAcquire, StatusCode::kOk,
                 milliseconds(7));
  metrics.Record(RequestChannel::kSession, RequestMethod::kAcquire, StatusCode::kNotFound,
                 std::chrono::seconds(30));
  const RequestMetrics::Counts counts =
      metrics.Snapshot(RequestChannel::kSession, RequestMethod::kAcquire);
  EXPECT_EQ(counts.by_code[0], 2u);
  EXPECT_EQ(counts.by_code[static_cast<std::size_t>(StatusCode::kNotFound)], 1u);
  EXPECT_EQ(counts.by_bucket[0], 1u);   // <= 5 us.
  EXPECT_EQ(counts.by_bucket[10], 1u);  // Above 5 ms, <= 10 ms.
  EXPECT_EQ(counts.by_bucket[20], 1u);  // Above 10 s: +Inf.
  EXPECT_EQ(counts.duration_sum_ns, 30'007'003'000u);
  // The other channel's cell is untouched.
  EXPECT_EQ(metrics.Snapshot(RequestChannel::kGrpc, RequestMethod::kAcquire).by_code[0], 0u);
}

TEST(RequestFamiliesTest, ScrapeShowsCountsByCodeAndACumulativeHistogram) {
  RequestMetrics metrics;
  metrics.Record(RequestChannel::kGrpc, RequestMethod::kDescribe, StatusCode::kNotFound,
                 microseconds(40));
  metrics.Record(RequestChannel::kGrpc, RequestMethod::kDescribe, StatusCode::kOk,
                 microseconds(400));
  const std::string text = Serialize(RequestFamilies(metrics));
  EXPECT_NE(text.find("# TYPE hurray_requests_total counter"), std::string::npos) << text;
  EXPECT_NE(
      text.find("hurray_requests_total{channel=\"grpc\",method=\"Describe\",code=\"NOT_FOUND\"} 1"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("hurray_requests_total{channel=\"session\",method=\"MapSegment\",code=\"OK\"} 0"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE hurray_request_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("hurray_request_duration_seconds_bucket{channel=\"grpc\",method="
                      "\"Describe\",le=\"5e-05\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hurray_request_duration_seconds_bucket{channel=\"grpc\",method="
                      "\"Describe\",le=\"+Inf\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hurray_request_duration_seconds_count{channel=\"grpc\",method="
                      "\"Describe\"} 2"),
            std::string::npos);
  // Pairs no channel serves are not shown.
  EXPECT_EQ(text.find("channel=\"session\",method=\"Watch\""), std::string::npos);
  EXPECT_EQ(text.find("channel=\"grpc\",method=\"MapSegment\""), std::string::npos);
}

TEST(StatsFamiliesTest, PoolsAreLabelledAndCountersEndInTotal) {
  v1::StatsResponse stats;
  v1::PoolStats& pool = *stats.add_pools();
  pool.set_name("cpu");
  pool.set_kind("cpu");
  pool.set_capacity_bytes(1 << 20);
  pool.set_used_bytes(4096);
  pool.set_fragmentation(0.25);
  stats.set_session_count(3);
  stats.set_published_bytes_total(8192);
  stats.set_closed_session_allocation_bytes(123);
  stats.set_evicted_tensor_count(5);
  stats.set_evicted_bytes_total(20480);
  const std::string text = Serialize(StatsFamilies(stats));
  EXPECT_NE(text.find("hurray_pool_used_bytes{kind=\"cpu\",pool=\"cpu\"} 4096"), std::string::npos)
      << text;
  EXPECT_NE(text.find("hurray_pool_capacity_bytes{kind=\"cpu\",pool=\"cpu\"} 1048576"),
            std::string::npos);
  EXPECT_NE(text.find("hurray_pool_fragmentation_ratio{kind=\"cpu\",pool=\"cpu\"} 0.25"),
            std::string::npos);
  EXPECT_NE(text.find("hurray_sessions 3"), std::string::npos);
  EXPECT_NE(text.find("# TYPE hurray_published_bytes_total counter"), std::string::npos);
  EXPECT_NE(text.find("hurray_published_bytes_total 8192"), std::string::npos);
  EXPECT_NE(text.find("hurray_closed_session_allocation_bytes_total 123"), std::string::npos);
  EXPECT_NE(text.find("hurray_evicted_tensors_total 5"), std::string::npos);
  EXPECT_NE(text.find("hurray_evicted_bytes_total 20480"), std::string::npos);
  for (const prometheus::MetricFamily& family : StatsFamilies(stats)) {
    EXPECT_EQ(family.name.rfind("hurray_", 0), 0u) << family.name;
    EXPECT_FALSE(family.help.empty()) << family.name;
    const bool total = family.name.ends_with("_total");
    EXPECT_EQ(family.type == prometheus::MetricType::Counter, total) << family.name;
  }
}

TEST(MetricsAddressTest, TakesHostAndPortAndTellsLoopback) {
  ASSERT_OK_AND_ASSIGN(MetricsAddress v4, ParseMetricsAddress("127.0.0.1:9470"));
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.port, 9470);
  EXPECT_TRUE(v4.loopback);
  ASSERT_OK_AND_ASSIGN(MetricsAddress named, ParseMetricsAddress("localhost:0"));
  EXPECT_EQ(named.ToString(), "127.0.0.1:0");
  ASSERT_OK_AND_ASSIGN(MetricsAddress v6, ParseMetricsAddress("[::1]:9470"));
  EXPECT_TRUE(v6.loopback);
  ASSERT_OK_AND_ASSIGN(MetricsAddress any, ParseMetricsAddress("0.0.0.0:9470"));
  EXPECT_FALSE(any.loopback);
  EXPECT_ERROR(ParseMetricsAddress("127.0.0.1"), StatusCode::kInvalidArgument,
               {"metrics_address \"127.0.0.1\"", "no port"});
  EXPECT_ERROR(ParseMetricsAddress("127.0.0.1:70000"), StatusCode::kInvalidArgument,
               {"port \"70000\""});
  EXPECT_ERROR(ParseMetricsAddress("metrics.example:9470"), StatusCode::kInvalidArgument,
               {"host \"metrics.example\""});
  EXPECT_ERROR(ParseMetricsAddress("[nope]:9470"), StatusCode::kInvalidArgument,
               {"\"nope\" is not an IPv6 address"});
}

// A host that refuses every allocation and grants every session.
class RefusingHost final : public SessionHost {
 public:
  Result<SessionGrant> OpenSession(const PeerCredentials& /*peer*/,
                                   std::string_view /*client_name*/) override {
    return SessionGrant{.session_id = 1, .token = "t"};
  }
  void CloseSession(std::uint64_t /*session_id*/) override { ++closed; }
  Result<SegmentAccess> GrantSegment(std::uint64_t /*session_id*/, std::uint64_t segment_id,
                                     bool /*writable*/) override {
    return NotFoundError(fmt::format("no segment {}", segment_id));
  }
  Result<v1::AllocateResponse> Allocate(std::uint64_t /*session_id*/,
                                        const v1::AllocateRequest& /*request*/) override {
    return ResourceExhaustedError("pool cpu is full");
  }

  int closed = 0;
};

TEST(MeteredSessionHostTest, RecordsEachRequestWithItsCodeAndHandsItOn) {
  RefusingHost inner;
  RequestMetrics metrics;
  MeteredSessionHost host(inner, metrics);
  ASSERT_OK(host.OpenSession(PeerCredentials{}, "c"));
  EXPECT_ERROR(host.Allocate(1, v1::AllocateRequest()), StatusCode::kResourceExhausted,
               {"pool cpu is full"});
  EXPECT_ERROR(host.GrantSegment(1, 9, false), StatusCode::kNotFound, {"no segment 9"});
  EXPECT_ERROR(host.Publish(1, v1::PublishRequest()), StatusCode::kUnimplemented, {});
  host.CloseSession(1);
  EXPECT_EQ(inner.closed, 1);
  const auto code = [](StatusCode status) { return static_cast<std::size_t>(status); };
  EXPECT_EQ(metrics.Snapshot(RequestChannel::kSession, RequestMethod::kHello).by_code[0], 1u);
  EXPECT_EQ(metrics.Snapshot(RequestChannel::kSession, RequestMethod::kAllocate)
                .by_code[code(StatusCode::kResourceExhausted)],
            1u);
  EXPECT_EQ(metrics.Snapshot(RequestChannel::kSession, RequestMethod::kMapSegment)
                .by_code[code(StatusCode::kNotFound)],
            1u);
  EXPECT_EQ(metrics.Snapshot(RequestChannel::kSession, RequestMethod::kPublish)
                .by_code[code(StatusCode::kUnimplemented)],
            1u);
  EXPECT_EQ(metrics.Snapshot(RequestChannel::kGrpc, RequestMethod::kAllocate).by_code[0], 0u);
}

}  // namespace
}  // namespace hurray::daemon
