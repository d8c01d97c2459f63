// SessionBodyName: the name of a session message's body, for errors and logs;
// PublishBatchReplyBound: the most a publish_batch_reply can take.
#include "hurray/ipc/session_protocol.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "hurray/v1/descriptor.pb.h"
#include "hurray/v1/session.pb.h"

namespace hurray {
namespace {

TEST(SessionProtocolTest, BodyNameIsTheFieldSet) {
  v1::SessionMessage message;
  message.mutable_map_segment()->set_segment_id(1);
  EXPECT_EQ(SessionBodyName(message), "map_segment");
  message.mutable_hello();
  EXPECT_EQ(SessionBodyName(message), "hello");
}

TEST(SessionProtocolTest, MessageWithoutBodyHasNoBodyName) {
  EXPECT_EQ(SessionBodyName(v1::SessionMessage()), "no body");
  // A message type without a `body` oneof at all.
  EXPECT_EQ(SessionBodyName(v1::TensorDescriptor()), "no body");
}

// Every field at its longest (request_id, versions and the epoch of 2^64 - 1) still fits.
TEST(SessionProtocolTest, PublishBatchReplyBoundHoldsTheLongestReply) {
  constexpr std::uint64_t kLongest = ~std::uint64_t{0};
  for (const std::size_t name_length : {std::size_t{0}, std::size_t{1}, std::size_t{512}}) {
    v1::SessionMessage message;
    message.set_request_id(kLongest);
    v1::PublishBatchResponse& reply = *message.mutable_publish_batch_reply();
    reply.set_daemon_epoch(kLongest);
    constexpr std::size_t kItems = 300;
    for (std::size_t i = 0; i < kItems; ++i) {
      v1::PublishResponse& item = *reply.add_items();
      item.set_name(std::string(name_length, 'n'));
      item.set_version(kLongest);
    }
    const std::size_t bound = PublishBatchReplyBound(kItems, kItems * name_length);
    EXPECT_LE(message.ByteSizeLong(), bound) << name_length;
    // And not by much: under 11 bytes per item to spare (lengths counted at 5 bytes).
    EXPECT_LT(bound - message.ByteSizeLong(), kItems * 11) << name_length;
  }
}

}  // namespace
}  // namespace hurray
