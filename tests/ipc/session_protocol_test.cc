// SessionBodyName: the name of a session message's body, for errors and logs.
#include "hurray/ipc/session_protocol.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hurray
