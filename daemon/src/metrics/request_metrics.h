// RequestMetrics: counts and latencies of the daemon's requests, per method and channel.
//
// Record() is on every request's path, so it takes no lock and allocates nothing: each
// (channel, method) pair has fixed atomic counters (one per status code) and fixed latency
// buckets, added to with relaxed atomics. Snapshot() reads them for a scrape; a snapshot
// taken while requests run may be a few requests apart between counters, never torn within
// one.
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hurray/error.h"

namespace hurray::daemon {

// Where a request came in.
enum class RequestChannel : std::uint8_t { kGrpc, kSession };
inline constexpr std::size_t kRequestChannelCount = 2;

// What it asked for: the Exchange rpcs, and the session socket's own requests.
enum class RequestMethod : std::uint8_t {
  kAllocate,
  kCancelAllocation,
  kPublish,
  kPublishBatch,
  kAcquire,
  kBatchAcquire,
  kRelease,
  kDelete,
  kList,
  kDescribe,
  kWatch,
  kStats,
  kHello,       // Session socket: the hello that opens a session.
  kMapSegment,  // Session socket: a segment's descriptor.
  kSlabMapped,  // Session socket: a CUDA slab mapped.
};
inline constexpr std::size_t kRequestMethodCount = 15;

// The name of a channel ("grpc", "session") and of a method ("Allocate", "MapSegment").
[[nodiscard]] std::string_view RequestChannelName(RequestChannel channel);
[[nodiscard]] std::string_view RequestMethodName(RequestMethod method);
// Whether requests of `method` can come in on `channel` (Watch is gRPC only, MapSegment
// session only, ...): the pairs a scrape shows.
[[nodiscard]] bool ServedOn(RequestChannel channel, RequestMethod method);

// Upper bounds of the latency buckets, in nanoseconds, from 5 us to 10 s (a last bucket
// above them: +Inf). Integers, so that Record compares without converting.
inline constexpr std::array<std::int64_t, 20> kLatencyBucketBoundsNs = {
    5'000,       10'000,        25'000,        50'000,        100'000,
    250'000,     500'000,       1'000'000,     2'500'000,     5'000'000,
    10'000'000,  25'000'000,    50'000'000,    100'000'000,   250'000'000,
    500'000'000, 1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
inline constexpr std::size_t kStatusCodeCount = 17;  // OK .. UNAUTHENTICATED.

class RequestMetrics {
 public:
  // What a scrape reads of one (channel, method) pair.
  struct Counts {
    std::array<std::uint64_t, kStatusCodeCount> by_code{};  // Index: the StatusCode.
    // Requests per latency bucket (not cumulative); the last is above every bound.
    std::array<std::uint64_t, kLatencyBucketBoundsNs.size() + 1> by_bucket{};
    std::uint64_t duration_sum_ns = 0;
  };

  RequestMetrics() = default;
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // Counts one request that ended with `code` after `duration`. No lock, no allocation.
  void Record(RequestChannel channel, RequestMethod method, StatusCode code,
              std::chrono::nanoseconds duration);

  [[nodiscard]] Counts Snapshot(RequestChannel channel, RequestMethod method) const;

 private:
  // One cache line or more per pair, so that pairs recorded on different threads do not
  // share lines.
  struct alignas(64) Cell {
    std::array<std::atomic<std::uint64_t>, kStatusCodeCount> by_code{};
    std::array<std::atomic<std::uint64_t>, kLatencyBucketBoundsNs.size() + 1> by_bucket{};
    std::atomic<std::uint64_t> duration_sum_ns{0};
  };

  std::array<std::array<Cell, kRequestMethodCount>, kRequestChannelCount> cells_{};
};

// Times one request from its construction; Finish records it. Cheap to copy (a clock
// reading and two bytes); `metrics` may be null (nothing is recorded).
class RequestTimer {
 public:
  RequestTimer(RequestMetrics* metrics, RequestChannel channel, RequestMethod method)
      : metrics_(metrics),
        channel_(channel),
        method_(method),
        start_(std::chrono::steady_clock::now()) {}

  void Finish(StatusCode code) const {
    if (metrics_ != nullptr) {
      metrics_->Record(channel_, method_, code, std::chrono::steady_clock::now() - start_);
    }
  }

 private:
  RequestMetrics* metrics_;
  RequestChannel channel_;
  RequestMethod method_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hurray::daemon
