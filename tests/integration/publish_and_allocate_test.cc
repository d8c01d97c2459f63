// WritableTensor::PublishAndAllocate: a publish that also allocates the next tensor of the
// same descriptor in the same pool, in one call, over both channels of the hot path.
#include <chrono>
#include <optional>
#include <utility>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class PublishAndAllocateTest : public BothChannelsTest {};

TEST_P(PublishAndAllocateTest, StreamsTensorsEachOneCallAfterTheFirst) {
  auto producer = ConnectWithHotPath("stream-producer");
  auto consumer = ConnectWithHotPath("stream-consumer");
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(consumer, nullptr);
  const TensorDescriptor descriptor = MakeByteTensor(64 << 10);
  auto first = producer->Allocate(descriptor);
  ASSERT_OK(first);
  std::optional<WritableTensor> tensor(std::move(*first));
  constexpr std::uint64_t kRounds = 5;
  for (std::uint64_t round = 1; round <= kRounds; ++round) {
    FillBuffer(tensor->buffer(0), /*seed=*/round, /*index=*/0);
    auto published = tensor->PublishAndAllocate("stream/t");
    ASSERT_OK(published);
    EXPECT_EQ(published->published.version, round);
    ASSERT_OK(published->next);
    WritableTensor& next = *published->next;
    EXPECT_EQ(next.descriptor(), descriptor);
    EXPECT_EQ(next.buffer(0).size(), std::size_t{64} << 10);
    EXPECT_NE(next.allocation_id(), 0u);

    auto view = consumer->Acquire("stream/t", {.version = round});
    ASSERT_OK(view);
    EXPECT_EQ(CheckBuffer(view->buffer(0), round, 0), "") << "round " << round;
    ASSERT_OK(view->Release());
    tensor.emplace(std::move(next));
  }
  EXPECT_EQ(Stats().pending_allocation_count, 1u) << "the last round's next tensor";
  FillBuffer(tensor->buffer(0), kRounds + 1, 0);
  auto last = tensor->Publish("stream/t");
  ASSERT_OK(last);
  EXPECT_EQ(last->version, kRounds + 1);
  EXPECT_EQ(Stats().pending_allocation_count, 0u);
  ASSERT_OK(producer->Delete("stream/t"));
  ExpectEverythingReturned();
}

TEST_P(PublishAndAllocateTest, ANextTensorThePoolHasNoRoomForLeavesThePublishInPlace) {
  auto producer = ConnectWithHotPath("full-producer");
  ASSERT_NE(producer, nullptr);
  // More than half the pool: the published one leaves no room for a second.
  const std::uint64_t bytes = daemon().pool_capacity_bytes() / 3 * 2;
  auto tensor = producer->Allocate(MakeByteTensor(bytes));
  ASSERT_OK(tensor);
  FillBuffer(tensor->buffer(0), 3, 0);
  auto published = tensor->PublishAndAllocate("stream/big");
  ASSERT_OK(published);
  EXPECT_EQ(published->published.version, 1u);
  EXPECT_ERROR(published->next, StatusCode::kResourceExhausted, {"pool cpu"});
  EXPECT_EQ(Stats().pending_allocation_count, 0u);

  auto view = producer->Acquire("stream/big");
  ASSERT_OK(view);
  EXPECT_EQ(CheckBuffer(view->buffer(0), 3, 0), "");
  ASSERT_OK(view->Release());
  ASSERT_OK(producer->Delete("stream/big"));
  ExpectEverythingReturned();
}

TEST_P(PublishAndAllocateTest, ARefusedPublishAllocatesNothingAndKeepsTheTensor) {
  auto producer = ConnectWithHotPath("refused-producer");
  ASSERT_NE(producer, nullptr);
  auto tensor = producer->Allocate(MakeByteTensor(4096));
  ASSERT_OK(tensor);
  FillBuffer(tensor->buffer(0), 5, 0);
  EXPECT_ERROR(tensor->PublishAndAllocate("bad name"), StatusCode::kInvalidArgument,
               {"\"bad name\""});
  EXPECT_EQ(Stats().pending_allocation_count, 1u) << "the refused tensor alone";
  ASSERT_EQ(tensor->buffer(0).size(), 4096u) << "still this object's, still writable";

  auto published = tensor->PublishAndAllocate("stream/ok");
  ASSERT_OK(published);
  ASSERT_OK(published->next);
  EXPECT_ERROR(tensor->PublishAndAllocate("stream/ok"), StatusCode::kFailedPrecondition,
               {"already published"});
  // Dropping the next tensor unpublished cancels it, as any allocation's.
  published->next = std::unexpected(Error(StatusCode::kCancelled, "dropped"));
  EXPECT_EQ(Stats().pending_allocation_count, 0u);
  ASSERT_OK(producer->Delete("stream/ok"));
  ExpectEverythingReturned();
}

TEST_P(PublishAndAllocateTest, ANextTensorLeftUnpublishedIsFreedWithItsSession) {
  {
    auto producer = ConnectWithHotPath("leaving-producer");
    ASSERT_NE(producer, nullptr);
    auto tensor = producer->Allocate(MakeByteTensor(1 << 20));
    ASSERT_OK(tensor);
    auto published = tensor->PublishAndAllocate("stream/left");
    ASSERT_OK(published);
    ASSERT_OK(published->next);
    EXPECT_EQ(Stats().pending_allocation_count, 1u);
    // The client goes while the next tensor is still held: the session frees it.
    producer.reset();
  }
  ASSERT_OK(client().Delete("stream/left"));
  ExpectEverythingReturned();
}

HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS(PublishAndAllocateTest);

}  // namespace
}  // namespace hurray::integration
