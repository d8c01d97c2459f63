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

// Upper bounds of the latency buckets, in seconds (a last bucket above them: +Inf).
inline constexpr std::array<double, 20> kLatencyBucketBounds = {
    0.000'005, 0.000'01, 0.000'025, 0.000'05, 0.000'1, 0.000'25, 0.000'5, 0.001, 0.002'5, 0.005,
    0.01,      0.025,    0.05,      0.1,      0.25,    0.5,      1.0,     2.5,   5.0,     10.0};
inline constexpr std::size_t kStatusCodeCount = 17;  // OK .. UNAUTHENTICATED.

class RequestMetrics {
 public:
  // What a scrape reads of one (channel, method) pair.
  struct Counts {
    std::array<std::uint64_t, kStatusCodeCount> by_code{};  // Index: the StatusCode.
    // Requests per latency bucket (not cumulative); the last is above every bound.
    std::array<std::uint64_t, kLatencyBucketBounds.size() + 1> by_bucket{};
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
    std::array<std::atomic<std::uint64_t>, kLatencyBucketBounds.size() + 1> by_bucket{};
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
