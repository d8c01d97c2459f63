// libFuzzer target for the Registry: the input is a program of Exchange requests, each run
// in-process against a fresh registry over a small CPU pool, from one of two sessions (of
// different uids). The steps and their ops: exchange_request_program.h; a request that does
// not parse is skipped.
//
// Promises checked: every buffer a reply hands out lies inside its segment and the session
// is granted that segment (writable for an allocation, read-only for a lease); watchers
// only see publishes, deletes and evictions; Stats never counts more tensors than versions
// nor more bytes in use than the pool holds; and once both sessions end and every name is
// deleted, the registry and the pool hold nothing (RegistryFuzzHarness::CheckDrained).
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "exchange_request_program.h"
#include "hurray/v1/exchange.pb.h"
#include "hurray/v1/session.pb.h"
#include "registry_fuzz_harness.h"
#include "spdlog/spdlog.h"

namespace hurray::daemon {
namespace {

constexpr const char* kFuzzer = "exchange_request_fuzzer";

template <typename Message>
bool Parse(std::span<const std::uint8_t> bytes, Message& message) {
  return message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

class Runner {
 public:
  explicit Runner(boost::asio::io_context& io) : io_(io), harness_(kFuzzer, io) {
    for (std::size_t i = 0; i < 2; ++i) sessions_[i] = Open(i);
    watch_ = registry().Watch(
        "",
        [](const v1::WatchEvent& event) {
          const auto kind = event.kind();
          if (kind != v1::WatchEvent::KIND_PUBLISHED && kind != v1::WatchEvent::KIND_DELETED &&
              kind != v1::WatchEvent::KIND_EVICTED) {
            BrokenInvariant(kFuzzer, "watchers see publishes, deletes and evictions only",
                            event.DebugString());
          }
        },
        /*viewer=*/nullptr);
  }

  void Run(std::span<const std::uint8_t> input) {
    Program program(input);
    Step step{};
    while (program.Next(step)) {
      RunStep(step);
      io_.poll();  // Expired waits.
      CheckStats();
    }
    for (const std::uint64_t session : sessions_) registry().CloseSession(session);
    io_.poll();
    registry().Unwatch(watch_);
    harness_.CheckDrained();
  }

 private:
  Registry& registry() { return harness_.registry(); }

  std::uint64_t Open(std::size_t index) {
    auto grant = registry().OpenSession(
        PeerCredentials{.pid = 1, .uid = 1000 + static_cast<std::uint32_t>(index), .gid = 1000},
        "fuzz");
    if (!grant) BrokenInvariant(kFuzzer, "a session opens", grant.error().ToString());
    return grant->session_id;
  }

  // Each buffer handed out lies inside its segment, which `session` may map.
  void CheckBuffers(std::uint64_t session,
                    const google::protobuf::RepeatedPtrField<v1::BufferLocation>& buffers,
                    bool writable) {
    for (const v1::BufferLocation& buffer : buffers) {
      if (buffer.segment_id() == 0) continue;
      if (buffer.offset() > buffer.segment_size() ||
          buffer.byte_size() > buffer.segment_size() - buffer.offset()) {
        BrokenInvariant(kFuzzer, "a buffer lies inside its segment", buffer.DebugString());
      }
      auto granted = registry().GrantSegment(session, buffer.segment_id(), writable);
      if (!granted) {
        BrokenInvariant(kFuzzer, "the holder of a buffer may map its segment",
                        granted.error().ToString());
      }
    }
  }

  void CheckStats() {
    const v1::StatsResponse stats = registry().Stats();
    if (stats.tensor_count() > stats.version_count() ||
        stats.pools(0).used_bytes() > stats.pools(0).capacity_bytes()) {
      BrokenInvariant(kFuzzer, "Stats is consistent", stats.DebugString());
    }
  }

  void RunStep(const Step& step);
  void RunAcquire(std::uint64_t session, const v1::AcquireRequest& request);

  boost::asio::io_context& io_;
  RegistryFuzzHarness harness_;
  std::uint64_t sessions_[2] = {0, 0};
  std::uint64_t watch_ = 0;
};

void Runner::RunAcquire(std::uint64_t session, const v1::AcquireRequest& request) {
  registry().Acquire(session, request, [this, session](Result<v1::AcquireResponse> acquired) {
    if (acquired) CheckBuffers(session, acquired->tensor().buffers(), /*writable=*/false);
  });
}

void Runner::RunStep(const Step& step) {
  const std::uint64_t session = sessions_[step.session];
  switch (step.op) {
    case Op::kAllocate: {
      v1::AllocateRequest request;
      if (!Parse(step.request, request)) return;
      auto allocated = registry().Allocate(session, request);
      if (allocated) CheckBuffers(session, allocated->buffers(), /*writable=*/true);
      return;
    }
    case Op::kCancelAllocation: {
      v1::CancelAllocationRequest request;
      if (Parse(step.request, request)) (void)registry().CancelAllocation(session, request);
      return;
    }
    case Op::kPublish: {
      v1::PublishRequest request;
      if (Parse(step.request, request)) (void)registry().Publish(session, request);
      return;
    }
    case Op::kPublishBatch: {
      v1::PublishBatchRequest request;
      if (Parse(step.request, request)) (void)registry().PublishBatch(session, request);
      return;
    }
    case Op::kAcquire: {
      v1::AcquireRequest request;
      if (Parse(step.request, request)) RunAcquire(session, request);
      return;
    }
    case Op::kBatchAcquire: {
      v1::BatchAcquireRequest request;
      if (!Parse(step.request, request)) return;
      registry().BatchAcquire(
          session, request, [this, session](Result<v1::BatchAcquireResponse> acquired) {
            if (!acquired) return;
            for (const v1::AcquireResponse& item : acquired->tensors()) {
              CheckBuffers(session, item.tensor().buffers(), /*writable=*/false);
            }
          });
      return;
    }
    case Op::kRelease: {
      v1::ReleaseRequest request;
      if (Parse(step.request, request)) (void)registry().Release(session, request);
      return;
    }
    case Op::kDelete: {
      v1::DeleteRequest request;
      if (Parse(step.request, request)) (void)registry().Delete(session, request);
      return;
    }
    case Op::kList: {
      v1::ListRequest request;
      const auto viewer = registry().SessionPeer(session);
      if (Parse(step.request, request)) (void)registry().List(request, viewer ? &*viewer : nullptr);
      return;
    }
    case Op::kDescribe: {
      v1::DescribeRequest request;
      const auto viewer = registry().SessionPeer(session);
      if (Parse(step.request, request)) {
        (void)registry().Describe(request, viewer ? &*viewer : nullptr);
      }
      return;
    }
    case Op::kStats:
      (void)registry().Stats();
      return;
    case Op::kMapSegment: {
      v1::MapSegmentRequest request;
      if (Parse(step.request, request)) {
        (void)registry().GrantSegment(session, request.segment_id(), request.writable());
      }
      return;
    }
    case Op::kReopen:
      registry().CloseSession(session);
      sessions_[step.session] = Open(step.session);
      return;
    case Op::kCount:
      return;
  }
}

}  // namespace
}  // namespace hurray::daemon

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::off);  // Refusals log; the fuzzer checks them instead.
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static boost::asio::io_context io;
  hurray::daemon::Runner runner(io);
  runner.Run(std::span(data, size));
  return 0;
}
