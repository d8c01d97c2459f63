// The hot path (allocate, publish, acquire, release, cancel) answers the same over the
// session socket, the default, as over gRPC: the same results, the same errors.
#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class HotPathTest : public BothChannelsTest {};

TEST_P(HotPathTest, ExchangesATensorAndReturnsEveryByte) {
  auto producer = ConnectWithHotPath("hot-producer");
  auto consumer = ConnectWithHotPath("hot-consumer");
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(consumer, nullptr);
  auto tensor = producer->Allocate(MakeByteTensor(1 << 20));
  ASSERT_OK(tensor);
  FillBuffer(tensor->buffer(0), /*seed=*/7, /*index=*/0);
  auto published = tensor->Publish("hot/t");
  ASSERT_OK(published);
  EXPECT_EQ(published->version, 1u);

  for (int round = 0; round < 50; ++round) {
    auto view = consumer->Acquire("hot/t");
    ASSERT_OK(view);
    EXPECT_EQ(CheckBuffer(view->buffer(0), 7, 0), "");
    ASSERT_OK(view->Release());
  }
  auto cancelled = producer->Allocate(MakeByteTensor(4096));
  ASSERT_OK(cancelled);
  ASSERT_OK(cancelled->Cancel());
  // Seen by the consumer's own client, which sees its releases (they are one-way on the
  // session socket: another client may see them a moment later).
  auto seen = consumer->Stats();
  ASSERT_OK(seen);
  EXPECT_EQ(seen->lease_count, 0u);
  EXPECT_EQ(Stats().pending_allocation_count, 0u);
  ASSERT_OK(producer->Delete("hot/t"));
  ExpectEverythingReturned();
}

TEST_P(HotPathTest, ErrorsAreTheSameOnBothChannels) {
  auto client = ConnectWithHotPath("hot-errors");
  ASSERT_NE(client, nullptr);
  EXPECT_ERROR(client->Acquire("hot/missing"), StatusCode::kNotFound,
               {"hot/missing is not published"});
  EXPECT_ERROR(client->Acquire("no-namespace"), StatusCode::kInvalidArgument, {"namespace"});
  EXPECT_ERROR(client->Allocate(MakeByteTensor(std::uint64_t{1} << 40)),
               StatusCode::kResourceExhausted, {"pool cpu"});
  auto tensor = client->Allocate(MakeByteTensor(64));
  ASSERT_OK(tensor);
  EXPECT_ERROR(tensor->Publish("bad name"), StatusCode::kInvalidArgument, {"\"bad name\""});
  ASSERT_OK(tensor->Publish("hot/ok"));
  // A wait always goes through gRPC, whichever channel carries the rest.
  auto waited = client->Acquire("hot/ok", {.version = 0, .wait = std::chrono::seconds(5)});
  ASSERT_OK(waited);
  ASSERT_OK(waited->Release());
  ASSERT_OK(client->Delete("hot/ok"));
  ExpectEverythingReturned();
}

HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS(HotPathTest);

}  // namespace
}  // namespace hurray::integration
