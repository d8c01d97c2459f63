// The conversion of List, Describe, Stats and Watch replies into the client's own values:
// every field of every reply arrives. Each test first checks, by reflection, that its reply
// sets every field of the message (so a field added to the .proto fails here until the
// conversion carries it), then compares the whole converted value, then converts it back
// and expects the reply again, and its JSON (hurray/inspection_json.h) to be the reply's.
#include "inspection_codec.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "hurray/descriptor_codec.h"
#include "hurray/inspection_json.h"
#include "testing/status_matchers.h"

namespace hurray::client_internal {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr std::int64_t kPublishedNanoseconds = 1'700'000'000'123'456'789;

DaemonTime Time(std::int64_t unix_nanos) {
  return DaemonTime(std::chrono::nanoseconds(unix_nanos));
}

// Adds a failure for every field of `message` (and of the messages in it: of the first
// element of a repeated one) left at its default, naming it by its path. tensor_descriptor
// is core's message, carried whole.
void ExpectEveryFieldSet(const Message& message, const std::string& path = "") {
  const Reflection& reflection = *message.GetReflection();
  const auto& descriptor = *message.GetDescriptor();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    const std::string name = path + field.name();
    if (field.is_repeated()) {
      const int size = reflection.FieldSize(message, &field);
      EXPECT_GT(size, 0) << name << " is empty";
      if (size > 0 && field.type() == FieldDescriptor::TYPE_MESSAGE) {
        ExpectEveryFieldSet(reflection.GetRepeatedMessage(message, &field, 0), name + "[0].");
      }
      continue;
    }
    EXPECT_TRUE(reflection.HasField(message, &field)) << name << " is not set";
    if (field.type() == FieldDescriptor::TYPE_MESSAGE && field.name() != "tensor_descriptor") {
      ExpectEveryFieldSet(reflection.GetMessage(message, &field), name + ".");
    }
  }
}

// Expects `back`, a value converted back, to be `reply`, field for field.
void ExpectSameReply(const Message& back, const Message& reply) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(back, reply)) << differences;
}

// Protobuf's JSON mapping of `reply` as inspection_json.h promises it: proto field names,
// every field printed.
std::string ReplyJson(const Message& reply) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(reply, &json, options).ok());
  return json;
}

// The value converted back is the reply, and its JSON the reply's.
template <typename Value>
void ExpectTheReplyBack(const Value& value, const Message& back, const Message& reply) {
  ExpectSameReply(back, reply);
  const Result<std::string> json = ToJson(value);
  ASSERT_OK(json);
  EXPECT_EQ(*json, ReplyJson(reply));
}

v1::TensorSummary SummaryReply(const std::string& name, std::uint64_t version) {
  v1::TensorSummary summary;
  summary.set_name(name);
  summary.set_latest_version(version);
  summary.set_version_count(2);
  summary.set_element_type(v1::ELEMENT_TYPE_INT16);
  summary.add_shape(3);
  summary.add_shape(4);
  summary.set_byte_size(24);
  summary.set_lease_count(5);
  summary.set_published_at_ns(kPublishedNanoseconds + static_cast<std::int64_t>(version));
  summary.set_owner_uid(1001);
  return summary;
}

TEST(InspectionCodecTest, ListPageCarriesEveryField) {
  v1::ListResponse reply;
  *reply.add_tensors() = SummaryReply("model/a", 7);
  *reply.add_tensors() = SummaryReply("model/b", 1);
  reply.set_next_page_token("model/b");
  reply.set_daemon_epoch(99);
  ExpectEveryFieldSet(reply);

  const auto page = TensorListPageFromProto(reply);
  ASSERT_OK(page);
  ExpectTheReplyBack(*page, TensorListPageToProto(*page), reply);
  const auto summary = [](std::string name, std::uint64_t version) {
    return TensorSummary{
        .name = std::move(name),
        .latest_version = version,
        .version_count = 2,
        .element_type = ElementType::kInt16,
        .shape = {3, 4},
        .byte_size = 24,
        .lease_count = 5,
        .published_at = Time(kPublishedNanoseconds + static_cast<std::int64_t>(version)),
        .owner_uid = 1001};
  };
  EXPECT_EQ(*page, (TensorListPage{.tensors = {summary("model/a", 7), summary("model/b", 1)},
                                   .next_page_token = "model/b",
                                   .daemon_epoch = 99}));
}

TEST(InspectionCodecTest, ListPageRefusesAnUnknownElementType) {
  v1::ListResponse reply;
  *reply.add_tensors() = SummaryReply("model/a", 1);
  reply.mutable_tensors(0)->set_element_type(static_cast<v1::ElementType>(200));
  EXPECT_ERROR(TensorListPageFromProto(reply), StatusCode::kInvalidArgument,
               {"daemon sent model/a", "200"});
  reply.mutable_tensors(0)->set_element_type(static_cast<v1::ElementType>(4096));
  EXPECT_ERROR(TensorListPageFromProto(reply), StatusCode::kInvalidArgument, {"4096"});
}

// A descriptor whose buffer declares the event sync mode, as an event handoff needs.
TensorDescriptor EventSyncedDescriptor() {
  auto buffer = BufferHandle::Create(16, kMinBufferAlignment, DeviceTag::Cpu(), SyncMode::kEvent);
  EXPECT_TRUE(buffer.has_value());
  auto descriptor = TensorDescriptor::Create({.element_type = ElementType::kFloat32,
                                              .shape = {2, 2},
                                              .layout = DenseLayout{},
                                              .quantization = NoQuantization{},
                                              .buffers = {*buffer},
                                              .metadata = {{"origin", "test"}}});
  EXPECT_TRUE(descriptor.has_value()) << descriptor.error().ToString();
  return *descriptor;
}

v1::DescribeResponse DescribeReply(const TensorDescriptor& descriptor) {
  v1::DescribeResponse reply;
  v1::TensorInfo& tensor = *reply.mutable_tensor();
  tensor.set_name("model/w");
  tensor.set_version(3);
  *tensor.mutable_tensor_descriptor() = DescriptorToProto(descriptor);
  v1::BufferLocation& location = *tensor.add_buffers();
  location.set_segment_id(11);
  location.set_segment_size(1 << 20);
  location.set_offset(8192);
  location.set_byte_size(16);
  tensor.mutable_handoff()->set_sync_mode(1);
  v1::Fence& fence = *tensor.mutable_handoff()->mutable_fence();
  fence.set_segment_id((std::uint64_t{1} << 56) + 5);
  fence.set_segment_size(1 << 16);
  fence.set_offset(64);
  fence.set_value(9);
  tensor.mutable_handoff()->set_ready(true);
  tensor.set_pool("gpu0");
  tensor.set_published_at_ns(kPublishedNanoseconds);
  for (std::uint64_t version : {2, 3}) {
    v1::VersionInfo& info = *reply.add_versions();
    info.set_version(version);
    info.set_lease_count(version * 10);
    info.set_superseded(version == 2);
    info.set_byte_size(version * 100);
    info.set_published_at_ns(kPublishedNanoseconds - static_cast<std::int64_t>(version));
  }
  reply.set_daemon_epoch(42);
  reply.mutable_owner()->set_uid(1001);
  reply.mutable_owner()->set_user("alice");
  return reply;
}

TEST(InspectionCodecTest, DetailsCarryEveryField) {
  const TensorDescriptor descriptor = EventSyncedDescriptor();
  const v1::DescribeResponse reply = DescribeReply(descriptor);
  ExpectEveryFieldSet(reply);

  const auto details = TensorDetailsFromProto(reply);
  ASSERT_OK(details);
  ExpectTheReplyBack(*details, TensorDetailsToProto(*details), reply);
  const auto version = [](std::uint64_t number) {
    return VersionSummary{
        .version = number,
        .lease_count = number * 10,
        .superseded = number == 2,
        .byte_size = number * 100,
        .published_at = Time(kPublishedNanoseconds - static_cast<std::int64_t>(number))};
  };
  EXPECT_EQ(*details,
            (TensorDetails{
                .name = "model/w",
                .version = 3,
                .descriptor = descriptor,
                .buffers = {BufferLocation{
                    .segment_id = 11, .segment_size = 1 << 20, .offset = 8192, .byte_size = 16}},
                .sync_mode = SyncMode::kEvent,
                .fence = FenceLocation{.segment_id = (std::uint64_t{1} << 56) + 5,
                                       .segment_size = 1 << 16,
                                       .offset = 64,
                                       .value = 9},
                .ready = true,
                .pool = "gpu0",
                .published_at = Time(kPublishedNanoseconds),
                .versions = {version(2), version(3)},
                .daemon_epoch = 42,
                .owner_uid = 1001,
                .owner_user = "alice"}));
}

TEST(InspectionCodecTest, DetailsRefuseAnInvalidDescriptorOrSyncMode) {
  v1::DescribeResponse reply = DescribeReply(EventSyncedDescriptor());
  reply.mutable_tensor()->mutable_tensor_descriptor()->clear_element_type();
  EXPECT_ERROR(TensorDetailsFromProto(reply), StatusCode::kInvalidArgument,
               {"daemon sent an invalid descriptor"});

  reply = DescribeReply(EventSyncedDescriptor());
  reply.mutable_tensor()->mutable_handoff()->set_sync_mode(7);
  EXPECT_ERROR(TensorDetailsFromProto(reply), StatusCode::kInvalidArgument,
               {"daemon sent an invalid handoff"});
  reply.mutable_tensor()->mutable_handoff()->set_sync_mode(300);
  EXPECT_ERROR(TensorDetailsFromProto(reply), StatusCode::kInvalidArgument, {"300"});
}

TEST(InspectionCodecTest, StatsCarryEveryField) {
  v1::StatsResponse reply;
  for (const std::string name : {"cpu", "gpu0"}) {
    v1::PoolStats& pool = *reply.add_pools();
    pool.set_name(name);
    pool.set_kind(name == "cpu" ? "cpu" : "cuda");
    pool.set_capacity_bytes(1 << 30);
    pool.set_used_bytes(1 << 20);
    pool.set_largest_free_bytes(1 << 29);
    pool.set_fragmentation(0.25);
    pool.set_segment_count(3);
    pool.set_allocation_count(17);
    pool.set_page_size(2 << 20);
    pool.set_huge_pages(name == "cpu" ? "transparent" : "explicit");
    pool.set_device_uuid("GPU-6f3e2b1a-0c4d-4e5f-8a9b-0123456789ab");
    pool.set_device_name("NVIDIA H200");
    pool.set_device_ordinal(1);
    pool.set_mechanism("vmm");
    pool.set_slab_bytes(1 << 30);
    pool.set_gpu_direct_rdma(true);
    pool.set_slab_mappings(12);
    pool.set_read_only_slab_mappings(10);
    pool.set_fences_in_use(3);
    pool.set_fences_retired(2);
    pool.set_quarantined_bytes(1 << 21);
    pool.set_quarantined_ranges(4);
    pool.set_reserved_bytes(1 << 29);
    pool.add_namespaces("team-a/**");
  }
  reply.set_session_count(4);
  reply.set_lease_count(5);
  reply.set_tensor_count(6);
  reply.set_version_count(7);
  reply.set_pending_allocation_count(8);
  reply.set_daemon_epoch(9);
  reply.set_uptime_seconds(3600);
  reply.set_published_bytes_total(10);
  reply.set_reclaimed_bytes_total(11);
  reply.set_closed_session_count(12);
  reply.set_closed_session_lease_count(13);
  reply.set_closed_session_allocation_count(14);
  reply.set_closed_session_allocation_bytes(15);
  reply.set_evicted_tensor_count(16);
  reply.set_evicted_bytes_total(17);
  v1::UidUsage& usage = *reply.add_uids();
  usage.set_uid(1001);
  usage.set_pending_bytes(18);
  usage.set_published_bytes(19);
  usage.set_leases(20);
  usage.set_sessions(2);
  reply.set_refused_connection_count(21);
  reply.set_lost_tensor_count(22);
  reply.set_adopted_tensor_count(23);
  reply.set_fast_path_directory_entries_used(24);
  reply.set_fast_path_directory_entries(25);
  reply.set_fast_path_lease_pages(26);
  reply.set_fast_path_lease_slots(27);
  reply.set_fast_path_pinned_versions(28);
  reply.set_fast_path_pinned_bytes(29);
  reply.set_fast_path_scans(30);
  reply.set_fast_path_refused_names(31);
  reply.set_earlier_epoch_held_versions(32);
  reply.set_earlier_epoch_held_bytes(33);
  reply.set_quarantined_sessions(34);
  ExpectEveryFieldSet(reply);
  const DaemonStats stats = DaemonStatsFromProto(reply);
  ExpectTheReplyBack(stats, DaemonStatsToProto(stats), reply);

  const auto pool = [](std::string name, std::string kind, std::string huge_pages) {
    return PoolStats{.name = std::move(name),
                     .kind = std::move(kind),
                     .capacity_bytes = 1 << 30,
                     .used_bytes = 1 << 20,
                     .largest_free_bytes = 1 << 29,
                     .fragmentation = 0.25,
                     .segment_count = 3,
                     .allocation_count = 17,
                     .page_size_bytes = 2 << 20,
                     .huge_pages = std::move(huge_pages),
                     .device_uuid = "GPU-6f3e2b1a-0c4d-4e5f-8a9b-0123456789ab",
                     .device_name = "NVIDIA H200",
                     .device_ordinal = 1,
                     .mechanism = "vmm",
                     .slab_bytes = 1 << 30,
                     .gpu_direct_rdma = true,
                     .slab_mappings = 12,
                     .read_only_slab_mappings = 10,
                     .fences_in_use = 3,
                     .fences_retired = 2,
                     .quarantined_bytes = 1 << 21,
                     .quarantined_ranges = 4,
                     .reserved_bytes = 1 << 29,
                     .namespaces = {"team-a/**"}};
  };
  EXPECT_EQ(
      DaemonStatsFromProto(reply),
      (DaemonStats{.pools = {pool("cpu", "cpu", "transparent"), pool("gpu0", "cuda", "explicit")},
                   .session_count = 4,
                   .lease_count = 5,
                   .tensor_count = 6,
                   .version_count = 7,
                   .pending_allocation_count = 8,
                   .daemon_epoch = 9,
                   .uptime = std::chrono::hours(1),
                   .published_bytes_total = 10,
                   .reclaimed_bytes_total = 11,
                   .closed_session_count = 12,
                   .closed_session_lease_count = 13,
                   .closed_session_allocation_count = 14,
                   .closed_session_allocation_bytes = 15,
                   .evicted_tensor_count = 16,
                   .evicted_bytes_total = 17,
                   .uids = {UidUsage{.uid = 1001,
                                     .pending_bytes = 18,
                                     .published_bytes = 19,
                                     .leases = 20,
                                     .sessions = 2}},
                   .refused_connection_count = 21,
                   .lost_tensor_count = 22,
                   .adopted_tensor_count = 23,
                   .fast_path = {.directory_entries_used = 24,
                                 .directory_entries = 25,
                                 .lease_pages = 26,
                                 .lease_slots = 27,
                                 .pinned_versions = 28,
                                 .pinned_bytes = 29,
                                 .scans = 30,
                                 .refused_names = 31},
                   .earlier_epoch_held_versions = 32,
                   .earlier_epoch_held_bytes = 33,
                   .quarantined_sessions = 34}));
}

TEST(InspectionCodecTest, WatchEventsCarryEveryField) {
  v1::WatchEvent reply;
  reply.set_kind(v1::WatchEvent::KIND_PUBLISHED);
  reply.set_name("model/w");
  reply.set_version(12);
  reply.set_daemon_epoch(34);
  ExpectEveryFieldSet(reply);
  for (const auto kind : {v1::WatchEvent::KIND_PUBLISHED, v1::WatchEvent::KIND_DELETED,
                          v1::WatchEvent::KIND_EVICTED}) {
    reply.set_kind(kind);
    const auto event = WatchEventFromProto(reply);
    ASSERT_TRUE(event.has_value());
    ExpectTheReplyBack(*event, WatchEventToProto(*event), reply);
  }
  reply.set_kind(v1::WatchEvent::KIND_PUBLISHED);
  EXPECT_EQ(WatchEventFromProto(reply), (WatchEvent{.kind = WatchEvent::Kind::kPublished,
                                                    .name = "model/w",
                                                    .version = 12,
                                                    .daemon_epoch = 34}));
  reply.set_kind(v1::WatchEvent::KIND_DELETED);
  EXPECT_EQ(WatchEventFromProto(reply), (WatchEvent{.kind = WatchEvent::Kind::kDeleted,
                                                    .name = "model/w",
                                                    .version = 12,
                                                    .daemon_epoch = 34}));
  reply.set_kind(v1::WatchEvent::KIND_EVICTED);
  EXPECT_EQ(WatchEventFromProto(reply), (WatchEvent{.kind = WatchEvent::Kind::kEvicted,
                                                    .name = "model/w",
                                                    .version = 12,
                                                    .daemon_epoch = 34}));
}

TEST(InspectionCodecTest, WatchSkipsTheConfirmationAndUnknownKinds) {
  v1::WatchEvent reply;
  reply.set_name("model/w");
  reply.set_kind(v1::WatchEvent::KIND_WATCHING);
  EXPECT_EQ(WatchEventFromProto(reply), std::nullopt);
  reply.set_kind(v1::WatchEvent::KIND_UNSPECIFIED);
  EXPECT_EQ(WatchEventFromProto(reply), std::nullopt);
  reply.set_kind(static_cast<v1::WatchEvent::Kind>(77));
  EXPECT_EQ(WatchEventFromProto(reply), std::nullopt);
}

TEST(InspectionJsonTest, UsesProtoFieldNamesAndPrintsFieldsAtTheirDefaults) {
  const Result<std::string> json = ToJson(DaemonStats{});
  ASSERT_OK(json);
  EXPECT_NE(json->find("\"session_count\":0"), std::string::npos) << *json;
  EXPECT_NE(json->find("\"daemon_epoch\":\"0\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"pools\":[]"), std::string::npos) << *json;
}

TEST(InspectionJsonTest, ADescribedTensorWithoutAFenceHasNone) {
  TensorDetails details{.descriptor = EventSyncedDescriptor(), .sync_mode = SyncMode::kEvent};
  const Result<std::string> json = ToJson(details);
  ASSERT_OK(json);
  EXPECT_EQ(json->find("\"fence\""), std::string::npos) << *json;
  details.fence = FenceLocation{.segment_id = 5, .segment_size = 4096, .offset = 8, .value = 1};
  EXPECT_NE(ToJson(details).value().find("\"fence\":{\"segment_id\":\"5\""), std::string::npos);
}

}  // namespace
}  // namespace hurray::client_internal
