// Acquire replies encoded by hand from a version's stored bytes are byte for byte the
// replies the message API builds (the registry's FillAcquireResponse: the stored TensorInfo
// parsed under the name, handoff.ready set for a reached fence, the fast path's fields).
#include "session/acquire_reply_encoder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hurray/v1/exchange.pb.h"
#include "hurray/v1/session.pb.h"

namespace hurray::daemon {
namespace {

// A stored TensorInfo (no name), as the registry keeps it: `buffers` locations, an Event
// handoff with a fence when `fenced`.
v1::TensorInfo StoredInfo(int buffers, bool fenced, std::uint64_t version) {
  v1::TensorInfo info;
  info.set_version(version);
  info.mutable_tensor_descriptor()->set_element_type(v1::ELEMENT_TYPE_FLOAT32);
  info.mutable_tensor_descriptor()->add_shape(16);
  info.mutable_tensor_descriptor()->add_shape(std::uint64_t{1} << 33);
  for (int i = 0; i < buffers; ++i) {
    v1::BufferLocation& location = *info.add_buffers();
    location.set_segment_id(static_cast<std::uint64_t>(i) + 1);
    location.set_offset(static_cast<std::uint64_t>(i) << 21);
    location.set_byte_size(4096);
  }
  v1::SyncHandoff& handoff = *info.mutable_handoff();
  handoff.set_sync_mode(fenced ? 1 : 0);
  if (fenced) {
    handoff.mutable_fence()->set_segment_id(0xF000000000ULL);
    handoff.mutable_fence()->set_offset(64);
  }
  info.set_pool(fenced ? "cuda:0" : "cpu");
  info.set_published_at_ns(1'700'000'000'000'000'000);
  return info;
}

// The reply as the message API builds it.
std::string MessagePath(const AcquireReplyParts& parts) {
  v1::AcquireResponse response;
  response.set_lease_id(parts.lease_id);
  v1::TensorInfo& info = *response.mutable_tensor();
  info.set_name(std::string(parts.name));
  EXPECT_TRUE(info.MergeFromString(std::string(parts.info_without_name)));
  if (info.handoff().has_fence()) info.mutable_handoff()->set_ready(parts.ready);
  response.set_daemon_epoch(parts.daemon_epoch);
  response.set_version_id(parts.version_id);
  response.set_directory_entry(parts.directory_entry);
  return response.SerializeAsString();
}

std::string HandBuilt(const AcquireReplyParts& parts) {
  std::string out = "kept";  // Appended to, not replaced.
  AppendAcquireResponse(parts, out);
  EXPECT_EQ(out.substr(0, 4), "kept");
  return out.substr(4);
}

TEST(AcquireReplyEncoderTest, CpuTensorsMatchTheMessagePathByteForByte) {
  for (const int buffers : {0, 1, 3, 200}) {
    const std::string stored = StoredInfo(buffers, /*fenced=*/false, 7).SerializeAsString();
    for (const std::string& name : {std::string("a/b"), std::string(300, 'n')}) {
      const AcquireReplyParts parts{.lease_id = 123456789,
                                    .name = name,
                                    .info_without_name = stored,
                                    .daemon_epoch = 0xABCDEF0123456789,
                                    .version_id = 77,
                                    .directory_entry = 3};
      EXPECT_EQ(HandBuilt(parts), MessagePath(parts)) << buffers << " buffers, " << name;
    }
  }
}

TEST(AcquireReplyEncoderTest, ZeroFieldsAreLeftOutAsTheMessagePathLeavesThem) {
  const std::string stored = StoredInfo(1, /*fenced=*/false, 1).SerializeAsString();
  // No fast path (both 0), and the first directory entry (0) of a version that has one.
  for (const std::uint64_t version_id : {0, 5}) {
    const AcquireReplyParts parts{.lease_id = 1,
                                  .name = "x/y",
                                  .info_without_name = stored,
                                  .daemon_epoch = 9,
                                  .version_id = version_id,
                                  .directory_entry = 0};
    EXPECT_EQ(HandBuilt(parts), MessagePath(parts));
  }
}

TEST(AcquireReplyEncoderTest, EventHandoffGetsReadyInsideTheStoredHandoff) {
  for (const int buffers : {1, 4}) {
    const std::string stored = StoredInfo(buffers, /*fenced=*/true, 12).SerializeAsString();
    for (const bool ready : {false, true}) {
      const AcquireReplyParts parts{.lease_id = 99,
                                    .name = "kv/block",
                                    .info_without_name = stored,
                                    .ready = ready,
                                    .daemon_epoch = 4};
      EXPECT_EQ(HandBuilt(parts), MessagePath(parts)) << "ready " << ready;
      v1::AcquireResponse parsed;
      ASSERT_TRUE(parsed.ParseFromString(HandBuilt(parts)));
      EXPECT_EQ(parsed.tensor().handoff().ready(), ready);
      EXPECT_EQ(parsed.tensor().handoff().fence().offset(), 64u);
      EXPECT_EQ(parsed.tensor().pool(), "cuda:0");
    }
  }
}

TEST(AcquireReplyEncoderTest, SessionReplyEnvelopeMatchesTheMessagePath) {
  const std::string stored = StoredInfo(2, /*fenced=*/false, 2).SerializeAsString();
  const AcquireReplyParts parts{
      .lease_id = 8, .name = "e/n", .info_without_name = stored, .daemon_epoch = 2};
  const std::string body = HandBuilt(parts);
  for (const std::uint64_t request_id : {std::uint64_t{0}, std::uint64_t{1}, ~std::uint64_t{0}}) {
    std::vector<std::uint8_t> encoded(3, 0xFF);  // Replaced, not appended to.
    EncodeSessionReply(request_id, v1::SessionMessage::kAcquireReply, body, encoded);
    v1::SessionMessage message;
    message.set_request_id(request_id);
    ASSERT_TRUE(message.mutable_acquire_reply()->ParseFromString(body));
    EXPECT_EQ(std::string(encoded.begin(), encoded.end()), message.SerializeAsString());
  }
}

}  // namespace
}  // namespace hurray::daemon
