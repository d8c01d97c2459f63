// Client::PublishBatch against the real hurrayd, on both hot-path channels: a set appears
// all at once to other processes, a refused set leaves every tensor the caller's, a set too
// large for one session frame goes through gRPC, and a consumer racing the publishes never
// sees a part of a set.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

constexpr std::uint64_t kSeed = 5000;

std::string SetName(std::string_view prefix, std::size_t index) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "%03zu", index);
  return std::string(prefix) + suffix;
}

class PublishBatchTest : public BothChannelsTest {
 protected:
  // `count` tensors of `bytes` bytes, each filled with the pattern of kSeed + its index.
  static std::vector<WritableTensor> AllocateFilled(Client& client, std::size_t count,
                                                    std::uint64_t bytes = 256) {
    std::vector<WritableTensor> tensors;
    tensors.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      auto tensor = client.Allocate(MakeByteTensor(bytes));
      EXPECT_OK(tensor);
      if (!tensor) break;
      if (bytes != 0) FillBuffer(tensor->buffer(0), kSeed + i, 0);
      tensors.push_back(std::move(*tensor));
    }
    return tensors;
  }

  static std::vector<std::string> Names(std::string_view prefix, std::size_t count) {
    std::vector<std::string> names;
    names.reserve(count);
    for (std::size_t i = 0; i < count; ++i) names.push_back(SetName(prefix, i));
    return names;
  }
};

TEST_P(PublishBatchTest, PublishesTheWholeSetForAnotherProcess) {
  auto producer = ConnectWithHotPath("batch-producer");
  ASSERT_NE(producer, nullptr);
  std::vector<WritableTensor> tensors = AllocateFilled(*producer, 50);
  ASSERT_EQ(tensors.size(), 50u);
  const std::vector<std::string> names = Names("set/t", 50);
  auto published = producer->PublishBatch(tensors, names);
  ASSERT_OK(published);
  ASSERT_EQ(published->size(), 50u);
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ((*published)[i].name, names[i]);
    EXPECT_EQ((*published)[i].version, 1u);
  }
  // Every tensor is consumed: publishing one again is refused.
  EXPECT_ERROR(tensors[0].Publish("set/again"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Stats().pending_allocation_count, 0u);
  const std::string consumed = RunAgent({"consume", "set/t049", std::to_string(kSeed + 49)});
  EXPECT_TRUE(consumed.starts_with("OK ") && consumed.ends_with(" v1\n")) << consumed;
  auto batch = client().BatchAcquire({}, "set/");
  ASSERT_OK(batch);
  ASSERT_EQ(batch->size(), 50u);
  for (std::size_t i = 0; i < batch->size(); ++i) {
    EXPECT_EQ(CheckBuffer((*batch)[i].buffer(0), kSeed + i, 0), "") << names[i];
  }
}

TEST_P(PublishBatchTest, ARefusedSetLeavesEveryTensorTheCallers) {
  auto producer = ConnectWithHotPath("batch-refused");
  auto other = ConnectWithHotPath("batch-other");
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(other, nullptr);
  std::vector<WritableTensor> tensors = AllocateFilled(*producer, 3);
  ASSERT_EQ(tensors.size(), 3u);
  std::vector<std::string> names = {"ref/a", "ref/b", "ref/a"};
  EXPECT_ERROR(producer->PublishBatch(tensors, names), StatusCode::kInvalidArgument,
               {"items[2] (ref/a)", "items[0]"});
  names[2] = "ref/bad name";
  EXPECT_ERROR(producer->PublishBatch(tensors, names), StatusCode::kInvalidArgument,
               {"items[2] (ref/bad name)"});
  EXPECT_ERROR(producer->PublishBatch(tensors, std::span(names).first(2)),
               StatusCode::kInvalidArgument, {"3 tensors but 2 names"});
  EXPECT_ERROR(producer->PublishBatch({}, {}), StatusCode::kInvalidArgument, {"0 tensors"});
  std::vector<WritableTensor> foreign = AllocateFilled(*other, 1);
  ASSERT_EQ(foreign.size(), 1u);
  std::swap(tensors[1], foreign[0]);
  names[2] = "ref/c";
  EXPECT_ERROR(producer->PublishBatch(tensors, names), StatusCode::kInvalidArgument,
               {"tensors[1] (ref/b)", "another client"});
  std::swap(tensors[1], foreign[0]);
  EXPECT_EQ(Stats().tensor_count, 0u);
  EXPECT_EQ(Stats().pending_allocation_count, 4u);

  // Still the caller's: the same tensors publish once the names are right.
  auto published = producer->PublishBatch(tensors, names);
  ASSERT_OK(published);
  EXPECT_EQ(Stats().tensor_count, 3u);
  EXPECT_ERROR(producer->PublishBatch(tensors, names), StatusCode::kFailedPrecondition,
               {"tensors[0] (ref/a)", "already published"});
}

// The names make the reply too large for one session frame: the client sends it through
// gRPC, whatever the hot path.
TEST_P(PublishBatchTest, ASetTooLargeForASessionFrameGoesThroughGrpc) {
  auto producer = ConnectWithHotPath("batch-large");
  ASSERT_NE(producer, nullptr);
  constexpr std::size_t kCount = 3000;
  std::vector<WritableTensor> tensors = AllocateFilled(*producer, kCount, /*bytes=*/0);
  ASSERT_EQ(tensors.size(), kCount);
  const std::string part(120, 'n');  // Names of 372 characters: 3000 of them pass 1 MiB.
  const std::string long_prefix = "large/" + part + "/" + part + "/" + part + "/";
  const std::vector<std::string> names = Names(long_prefix, kCount);
  auto published = producer->PublishBatch(tensors, names);
  ASSERT_OK(published);
  ASSERT_EQ(published->size(), kCount);
  EXPECT_EQ(published->back().name, names.back());
  EXPECT_EQ(Stats().tensor_count, kCount);
}

// Over the daemon's gRPC message limit (4 MiB) as well: RESOURCE_EXHAUSTED naming the size,
// and nothing published.
TEST_P(PublishBatchTest, ASetTooLargeForEitherChannelIsRefused) {
  auto producer = ConnectWithHotPath("batch-too-large");
  ASSERT_NE(producer, nullptr);
  constexpr std::size_t kCount = 9000;
  std::vector<WritableTensor> tensors = AllocateFilled(*producer, kCount, /*bytes=*/0);
  ASSERT_EQ(tensors.size(), kCount);
  const std::string part(118, 'n');  // Names of 484 characters: 9000 of them pass 4 MiB.
  const std::string long_prefix = "huge/" + part + "/" + part + "/" + part + "/" + part + "/";
  EXPECT_ERROR(producer->PublishBatch(tensors, Names(long_prefix, kCount)),
               StatusCode::kResourceExhausted, {"9000 items", "bytes"});
  EXPECT_EQ(Stats().tensor_count, 0u);
  EXPECT_EQ(Stats().pending_allocation_count, kCount);
}

// A consumer that keeps acquiring the prefix while sets are published sees every name at
// the same version: never a part of a set.
TEST_P(PublishBatchTest, ARacingConsumerNeverSeesAPartOfASet) {
  auto producer = ConnectWithHotPath("batch-racer-producer");
  ASSERT_NE(producer, nullptr);
  constexpr std::size_t kCount = 16;
  constexpr std::uint64_t kRounds = 30;
  const std::vector<std::string> names = Names("race/t", kCount);
  std::atomic<bool> done{false};
  std::atomic<int> acquired_sets{0};
  std::atomic<bool> stopped{false};
  std::string torn;  // Written by the consumer thread only; read after join.
  std::thread consumer([&] {
    auto reader = Connect("batch-racer-consumer");
    while (!done.load() && torn.empty()) {
      auto batch = reader->BatchAcquire({}, "race/");
      if (!batch) {
        torn = batch.error().ToString();
        break;
      }
      if (batch->empty()) continue;
      const std::uint64_t version = (*batch)[0].version();
      const bool whole =
          batch->size() == kCount && std::ranges::all_of(*batch, [version](const TensorView& view) {
            return view.version() == version;
          });
      if (!whole)
        torn = "a set of " + std::to_string(batch->size()) + " views, first at version " +
               std::to_string(version);
      ++acquired_sets;
    }
    stopped = true;
  });
  for (std::uint64_t round = 1; round <= kRounds; ++round) {
    std::vector<WritableTensor> tensors = AllocateFilled(*producer, kCount);
    ASSERT_EQ(tensors.size(), kCount);
    auto published = producer->PublishBatch(tensors, names);
    ASSERT_OK(published);
    EXPECT_EQ(published->front().version, round);
  }
  // At least one acquire once the last set is in, so that a full set is seen for sure.
  const int before = acquired_sets.load();
  EXPECT_TRUE(Eventually([&] { return acquired_sets.load() > before + 1 || stopped.load(); }));
  done = true;
  consumer.join();
  EXPECT_EQ(torn, "");
  EXPECT_GT(acquired_sets.load(), 0);
}

HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS(PublishBatchTest);

}  // namespace
}  // namespace hurray::integration
