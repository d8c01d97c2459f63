#include "session/acquire_reply_encoder.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstring>

namespace hurray::daemon {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedOutputStream;

// Field numbers of hurray.v1 messages (exchange.proto).
constexpr int kResponseLeaseId = 1;
constexpr int kResponseTensor = 2;
constexpr int kResponseDaemonEpoch = 3;
constexpr int kResponseVersionId = 4;
constexpr int kResponseDirectoryEntry = 5;
constexpr int kInfoName = 1;
constexpr int kInfoHandoff = 5;
constexpr int kHandoffReady = 4;
constexpr int kSessionMessageRequestId = 1;

// The most bytes a 64-bit varint takes.
constexpr std::size_t kMaxVarintBytes = 10;
// SyncHandoff's `ready = true`: its tag and the value 1.
constexpr std::size_t kReadyFieldBytes = 2;

std::uint32_t Tag(int field, WireFormatLite::WireType type) {
  return WireFormatLite::MakeTag(field, type);
}

void AppendVarint(std::uint64_t value, std::string& out) {
  std::uint8_t bytes[kMaxVarintBytes];
  const std::uint8_t* end = CodedOutputStream::WriteVarint64ToArray(value, bytes);
  out.append(reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(end - bytes));
}

// A varint field; proto3 writes none for 0.
void AppendUint64Field(int field, std::uint64_t value, std::string& out) {
  if (value == 0) return;
  AppendVarint(Tag(field, WireFormatLite::WIRETYPE_VARINT), out);
  AppendVarint(value, out);
}

void AppendLengthPrefix(int field, std::size_t length, std::string& out) {
  AppendVarint(Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), out);
  AppendVarint(length, out);
}

std::size_t LengthDelimitedBytes(int field, std::size_t length) {
  return CodedOutputStream::VarintSize32(Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) +
         CodedOutputStream::VarintSize64(length) + length;
}

// Where the stored TensorInfo's handoff is: [begin, end) of the whole field (tag and length
// included) and its content's length. A TensorInfo without one (never stored with a fence)
// gets an empty handoff where it would go: begin == end, content 0.
struct HandoffField {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t content_bytes = 0;
};

HandoffField FindHandoff(std::string_view info) {
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const std::uint8_t*>(info.data()),
                                               static_cast<int>(info.size()));
  while (true) {
    const auto at = static_cast<std::size_t>(input.CurrentPosition());
    const std::uint32_t tag = input.ReadTag();
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if (tag == 0 || field > kInfoHandoff) return {.begin = at, .end = at, .content_bytes = 0};
    if (field == kInfoHandoff &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::uint32_t length = 0;
      if (!input.ReadVarint32(&length)) return {.begin = at, .end = at, .content_bytes = 0};
      const auto content = static_cast<std::size_t>(input.CurrentPosition());
      return {.begin = at, .end = content + length, .content_bytes = length};
    }
    if (!WireFormatLite::SkipField(&input, tag)) {
      return {.begin = info.size(), .end = info.size(), .content_bytes = 0};
    }
  }
}

// The TensorInfo field of the reply: the name, then the stored fields, with ready = true
// appended to the handoff's content when `ready` (ready is SyncHandoff's last field).
void AppendTensorInfo(const AcquireReplyParts& parts, std::string& out) {
  const std::string_view info = parts.info_without_name;
  const std::size_t name_bytes =
      parts.name.empty() ? 0 : LengthDelimitedBytes(kInfoName, parts.name.size());
  HandoffField handoff;
  std::size_t info_bytes = info.size();
  if (parts.ready) {
    handoff = FindHandoff(info);
    info_bytes += LengthDelimitedBytes(kInfoHandoff, handoff.content_bytes + kReadyFieldBytes) -
                  (handoff.end - handoff.begin);
  }
  AppendLengthPrefix(kResponseTensor, name_bytes + info_bytes, out);
  if (!parts.name.empty()) {
    AppendLengthPrefix(kInfoName, parts.name.size(), out);
    out.append(parts.name);
  }
  if (!parts.ready) {
    out.append(info);
    return;
  }
  out.append(info.substr(0, handoff.begin));
  AppendLengthPrefix(kInfoHandoff, handoff.content_bytes + kReadyFieldBytes, out);
  out.append(info.substr(handoff.end - handoff.content_bytes, handoff.content_bytes));
  AppendVarint(Tag(kHandoffReady, WireFormatLite::WIRETYPE_VARINT), out);
  AppendVarint(1, out);
  out.append(info.substr(handoff.end));
}

}  // namespace

void AppendAcquireResponse(const AcquireReplyParts& parts, std::string& out) {
  AppendUint64Field(kResponseLeaseId, parts.lease_id, out);
  AppendTensorInfo(parts, out);
  AppendUint64Field(kResponseDaemonEpoch, parts.daemon_epoch, out);
  AppendUint64Field(kResponseVersionId, parts.version_id, out);
  AppendUint64Field(kResponseDirectoryEntry, parts.directory_entry, out);
}

void EncodeSessionReply(std::uint64_t request_id, int body_field, std::string_view body,
                        std::vector<std::uint8_t>& out) {
  std::string head;
  AppendUint64Field(kSessionMessageRequestId, request_id, head);
  AppendLengthPrefix(body_field, body.size(), head);
  out.resize(head.size() + body.size());
  std::memcpy(out.data(), head.data(), head.size());
  std::memcpy(out.data() + head.size(), body.data(), body.size());
}

}  // namespace hurray::daemon
