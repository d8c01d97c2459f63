// Writes the seed corpus of exchange_request_fuzzer into the directory given as its one
// argument: programs (exchange_request_program.h) that publish, acquire, release and
// delete; cancel; publish a batch; fill the pool with evictable tensors and allocate past
// it; wait for a tensor another session then publishes; map segments; end a session that
// holds an allocation and a lease; and requests the registry refuses. The registry of each
// input is fresh, so the ids are known: sessions 1 and 2, then 3, 4, ... in order (one
// sequence for sessions, allocations, leases and waits).
//
// Usage: make_exchange_request_corpus tests/fuzz/corpus/exchange_request
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "exchange_request_program.h"
#include "hurray/descriptor_codec.h"
#include "hurray/v1/exchange.pb.h"
#include "hurray/v1/session.pb.h"

namespace hurray::daemon {
namespace {

namespace fs = std::filesystem;

// A quarter of RegistryFuzzHarness::kPoolBytes in float32 elements.
constexpr std::uint64_t kQuarterElements = (1 << 20) / 4 / sizeof(float);

class Seed {
 public:
  Seed& Allocate(std::size_t session, std::uint64_t elements) {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() =
        DescriptorToProto(*TensorDescriptor::Dense(ElementType::kFloat32, {elements}));
    return Add(Op::kAllocate, session, request);
  }
  Seed& Publish(std::size_t session, std::uint64_t allocation, const std::string& name,
                bool evictable = false) {
    v1::PublishRequest request;
    request.set_allocation_id(allocation);
    request.set_name(name);
    request.set_evictable(evictable);
    return Add(Op::kPublish, session, request);
  }
  Seed& Acquire(std::size_t session, const std::string& name, std::uint32_t wait_ms = 0) {
    v1::AcquireRequest request;
    request.set_name(name);
    request.set_wait_timeout_ms(wait_ms);
    return Add(Op::kAcquire, session, request);
  }
  Seed& Release(std::size_t session, std::uint64_t lease) {
    v1::ReleaseRequest request;
    request.add_lease_ids(lease);
    return Add(Op::kRelease, session, request);
  }
  Seed& Delete(const std::string& name) {
    v1::DeleteRequest request;
    request.set_name(name);
    return Add(Op::kDelete, 0, request);
  }
  Seed& MapSegment(std::size_t session, std::uint64_t segment, bool writable) {
    v1::MapSegmentRequest request;
    request.set_segment_id(segment);
    request.set_writable(writable);
    return Add(Op::kMapSegment, session, request);
  }
  Seed& Add(Op op, std::size_t session, const google::protobuf::MessageLite& request) {
    AppendStep(op, session, request, program_);
    return *this;
  }
  void Save(const fs::path& path) const {
    std::ofstream(path, std::ios::binary) << program_;
    if (!fs::exists(path)) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      std::exit(1);
    }
  }

 private:
  std::string program_;
};

void WriteCorpus(const fs::path& directory) {
  Seed()
      .Allocate(0, 1024)
      .Publish(0, 3, "fuzz/a")
      .Acquire(1, "fuzz/a")
      .Release(1, 4)
      .Delete("fuzz/a")
      .Save(directory / "publish_acquire_release_delete");
  Seed()
      .Allocate(0, 1024)
      .Add(Op::kCancelAllocation, 0,
           [] {
             v1::CancelAllocationRequest request;
             request.set_allocation_id(3);
             return request;
           }())
      .Save(directory / "cancel");
  {
    v1::PublishBatchRequest batch;
    for (std::uint64_t id : {3, 4}) {
      v1::PublishRequest& item = *batch.add_items();
      item.set_allocation_id(id);
      item.set_name("batch/t" + std::to_string(id));
    }
    v1::BatchAcquireRequest acquire;
    acquire.set_prefix("batch/");
    Seed()
        .Allocate(0, 16)
        .Allocate(0, 16)
        .Add(Op::kPublishBatch, 0, batch)
        .Add(Op::kBatchAcquire, 1, acquire)
        .Add(Op::kList, 1, v1::ListRequest())
        .Save(directory / "publish_batch_acquire_prefix");
  }
  Seed evict;
  for (std::uint64_t i = 0; i < 4; ++i) {
    evict.Allocate(0, kQuarterElements).Publish(0, 3 + i, "e/" + std::to_string(i), true);
  }
  evict.Acquire(1, "e/2")
      .Allocate(1, 2 * kQuarterElements)
      .Add(Op::kStats, 0, v1::StatsRequest())
      .Save(directory / "evict_when_full");
  Seed()  // The wait takes id 3.
      .Acquire(1, "wait/x", 20)
      .Allocate(0, 8)
      .Publish(0, 4, "wait/x")
      .Save(directory / "wait_then_publish");
  Seed()
      .Allocate(0, 8)
      .MapSegment(0, 1, true)
      .MapSegment(1, 1, false)
      .Publish(0, 3, "m/x")
      .MapSegment(0, 1, true)
      .Acquire(1, "m/x")
      .MapSegment(1, 1, false)
      .Save(directory / "map_segments");
  {
    v1::DescribeRequest describe;
    describe.set_name("r/x");
    Seed()
        .Allocate(0, 8)
        .Publish(0, 3, "r/x")
        .Acquire(1, "r/x")
        .Allocate(1, 8)
        .Add(Op::kReopen, 1, v1::StatsRequest())
        .Add(Op::kDescribe, 0, describe)
        .Save(directory / "reopen_holding_lease_and_allocation");
  }
  Seed()
      .Allocate(0, 8)
      .Publish(0, 3, "no-slash")
      .Publish(1, 3, "x/other_session")
      .Release(0, 99)
      .Delete("x/absent")
      .Allocate(0, 1u << 24)
      .Save(directory / "invalid_requests");
}

}  // namespace
}  // namespace hurray::daemon

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::filesystem::path directory = argv[1];
  std::filesystem::create_directories(directory);
  hurray::daemon::WriteCorpus(directory);
  std::printf("wrote the exchange_request corpus to %s\n", directory.c_str());
  return 0;
}
