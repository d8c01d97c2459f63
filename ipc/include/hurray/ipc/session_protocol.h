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

// The name of the field set in a SessionMessage's `body` oneof ("map_segment"), from the
// message's own descriptor; "no body" when none is set (or `message` has no such oneof).
// For errors and logs: it costs a reflection lookup.
[[nodiscard]] std::string SessionBodyName(const google::protobuf::Message& message);

}  // namespace hurray
