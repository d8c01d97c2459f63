// Names and limits of the session protocol (proto/hurray/v1/session.proto) that hurrayd and
// the client library must agree on. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace hurray {

// The protocol version of proto/hurray/v1/session.proto that both ends speak
// (SessionHello.protocol_version).
inline constexpr std::uint32_t kSessionProtocolVersion = 1;
// Longest SessionHello.client_name the daemon accepts, in bytes (it only names the client
// in logs).
inline constexpr std::size_t kMaxSessionClientNameBytes = 256;
// The gRPC metadata key that carries a session's token (SessionWelcome.token) on the calls
// made for that session.
inline constexpr char kSessionMetadataKey[] = "x-hurray-session";

// The most bytes a SessionMessage answering a publish_batch of `item_count` items, whose
// names add up to `name_bytes`, can encode to (request_id and every version at their
// longest). The reply must fit one frame (kMaxSessionFrameBytes), and the batch is
// published before it is sent: a client sends a PublishBatch on the session socket only
// when this fits, and the daemon refuses one there, publishing nothing, when it does not.
[[nodiscard]] constexpr std::size_t PublishBatchReplyBound(std::size_t item_count,
                                                           std::size_t name_bytes) {
  // SessionMessage: request_id (tag, 10-byte varint), body (2-byte tag, 5-byte length).
  constexpr std::size_t kEnvelope = 1 + 10 + 2 + 5;
  // PublishBatchResponse.daemon_epoch: tag and a 10-byte varint.
  constexpr std::size_t kEpoch = 1 + 10;
  // Each item: tag and 5-byte length, then name (tag, 5-byte length) and version (tag,
  // 10-byte varint); the name's bytes are counted in name_bytes.
  constexpr std::size_t kPerItem = (1 + 5) + (1 + 5) + (1 + 10);
  return kEnvelope + kEpoch + (kPerItem * item_count) + name_bytes;
}

// The name of the field set in a SessionMessage's `body` oneof ("map_segment"), from the
// message's own descriptor; "no body" when none is set (or `message` has no such oneof).
// For errors and logs: it costs a reflection lookup.
[[nodiscard]] std::string SessionBodyName(const google::protobuf::Message& message);

}  // namespace hurray
