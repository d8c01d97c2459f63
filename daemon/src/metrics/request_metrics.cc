#include "metrics/request_metrics.h"

#include <algorithm>

namespace hurray::daemon {
namespace {

constexpr std::array<std::string_view, kRequestMethodCount> kMethodNames = {
    "Allocate", "CancelAllocation", "Publish",   "PublishBatch", "Acquire", "BatchAcquire",
    "Release",  "Delete",           "List",      "Describe",     "Watch",   "Stats",
    "Hello",    "MapSegment",       "SlabMapped"};

}  // namespace

std::string_view RequestChannelName(RequestChannel channel) {
  return channel == RequestChannel::kGrpc ? "grpc" : "session";
}

std::string_view RequestMethodName(RequestMethod method) {
  return kMethodNames[static_cast<std::size_t>(method)];
}

bool ServedOn(RequestChannel channel, RequestMethod method) {
  switch (method) {
    case RequestMethod::kAllocate:
    case RequestMethod::kCancelAllocation:
    case RequestMethod::kPublish:
    case RequestMethod::kPublishBatch:
    case RequestMethod::kAcquire:
    case RequestMethod::kRelease:
      return true;
    case RequestMethod::kBatchAcquire:
    case RequestMethod::kDelete:
    case RequestMethod::kList:
    case RequestMethod::kDescribe:
    case RequestMethod::kWatch:
    case RequestMethod::kStats:
      return channel == RequestChannel::kGrpc;
    case RequestMethod::kHello:
    case RequestMethod::kMapSegment:
    case RequestMethod::kSlabMapped:
      return channel == RequestChannel::kSession;
  }
  return false;
}

void RequestMetrics::Record(RequestChannel channel, RequestMethod method, StatusCode code,
                            std::chrono::nanoseconds duration) {
  Cell& cell = cells_[static_cast<std::size_t>(channel)][static_cast<std::size_t>(method)];
  const auto code_index = std::min(static_cast<std::size_t>(code), kStatusCodeCount - 1);
  cell.by_code[code_index].fetch_add(1, std::memory_order_relaxed);
  const std::int64_t nanoseconds = std::max<std::int64_t>(duration.count(), 0);
  const auto bucket =
      static_cast<std::size_t>(std::ranges::lower_bound(kLatencyBucketBoundsNs, nanoseconds) -
                               kLatencyBucketBoundsNs.begin());
  cell.by_bucket[bucket].fetch_add(1, std::memory_order_relaxed);
  cell.duration_sum_ns.fetch_add(static_cast<std::uint64_t>(nanoseconds),
                                 std::memory_order_relaxed);
}

RequestMetrics::Counts RequestMetrics::Snapshot(RequestChannel channel,
                                                RequestMethod method) const {
  const Cell& cell = cells_[static_cast<std::size_t>(channel)][static_cast<std::size_t>(method)];
  Counts counts;
  for (std::size_t i = 0; i < kStatusCodeCount; ++i) {
    counts.by_code[i] = cell.by_code[i].load(std::memory_order_relaxed);
  }
  for (std::size_t i = 0; i < counts.by_bucket.size(); ++i) {
    counts.by_bucket[i] = cell.by_bucket[i].load(std::memory_order_relaxed);
  }
  counts.duration_sum_ns = cell.duration_sum_ns.load(std::memory_order_relaxed);
  return counts;
}

}  // namespace hurray::daemon
