// The input format of exchange_request_fuzzer, shared by the fuzzer (which reads it) and
// its seed generator (which writes it): a sequence of steps, each
//   [op][session][length: 2 bytes, little-endian][length bytes: the request, serialized]
// with op taken modulo Op::kCount and session modulo 2; a short last step takes what is
// left. Plain values; not thread-safe.
#pragma once

#include <google/protobuf/message_lite.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hurray::daemon {

enum class Op : std::uint8_t {
  kAllocate,          // v1::AllocateRequest
  kCancelAllocation,  // v1::CancelAllocationRequest
  kPublish,           // v1::PublishRequest
  kPublishBatch,      // v1::PublishBatchRequest
  kAcquire,           // v1::AcquireRequest (waits of up to 20 ms)
  kBatchAcquire,      // v1::BatchAcquireRequest
  kRelease,           // v1::ReleaseRequest
  kDelete,            // v1::DeleteRequest
  kList,              // v1::ListRequest
  kDescribe,          // v1::DescribeRequest
  kStats,             // No request.
  kMapSegment,        // v1::MapSegmentRequest (session.proto), to GrantSegment.
  kReopen,            // No request: ends the session and opens a new one in its place.
  kCount,
};

struct Step {
  Op op = Op::kStats;
  std::size_t session = 0;
  std::span<const std::uint8_t> request;
};

// Reads the steps of an input, one at a time.
class Program {
 public:
  explicit Program(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  // The next step, or false at the end of the input.
  bool Next(Step& step) {
    if (bytes_.size() < 2) return false;
    step.op = static_cast<Op>(bytes_[0] % static_cast<std::uint8_t>(Op::kCount));
    step.session = bytes_[1] % 2;
    bytes_ = bytes_.subspan(2);
    std::size_t length = 0;
    if (bytes_.size() >= 2) {
      length = bytes_[0] | (static_cast<std::size_t>(bytes_[1]) << 8);
      bytes_ = bytes_.subspan(2);
    }
    step.request = bytes_.first(std::min(length, bytes_.size()));
    bytes_ = bytes_.subspan(step.request.size());
    return true;
  }

 private:
  std::span<const std::uint8_t> bytes_;
};

// Appends a step with `request` serialized (at most 65535 bytes) to `program`.
inline void AppendStep(Op op, std::size_t session, const google::protobuf::MessageLite& request,
                       std::string& program) {
  const std::string bytes = request.SerializeAsString();
  program.push_back(static_cast<char>(op));
  program.push_back(static_cast<char>(session));
  program.push_back(static_cast<char>(bytes.size() & 0xff));
  program.push_back(static_cast<char>((bytes.size() >> 8) & 0xff));
  program += bytes;
}

}  // namespace hurray::daemon
