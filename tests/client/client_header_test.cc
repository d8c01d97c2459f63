// A user's view of the C++ client: this file is compiled with the public include
// directories of client/ and core/ alone (tests/client/CMakeLists.txt), so it proves that
// hurray/client.h, hurray/health.h, hurray/inspection_json.h and what they include need none
// of the generated protobuf headers, and that List, Describe, Stats and Watch hand back the
// client's own values.
#include "hurray/client.h"
#include "hurray/health.h"
#include "hurray/inspection_json.h"

#if __has_include("hurray/v1/exchange.pb.h") || __has_include("hurray/v1/descriptor.pb.h")
#error "compile this test without the generated protobuf headers on the include path"
#endif

#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <utility>

namespace hurray {
namespace {

static_assert(std::is_same_v<decltype(std::declval<Client&>().List()), Result<TensorListPage>>);
static_assert(
    std::is_same_v<decltype(std::declval<Client&>().Describe("a/b")), Result<TensorDetails>>);
static_assert(std::is_same_v<decltype(std::declval<Client&>().Stats()), Result<DaemonStats>>);

// Everything a user reads from the inspection calls, in one line (never run without a
// daemon; compiling it is the point).
[[maybe_unused]] std::string Inspect(Client& client) {
  std::string text;
  if (auto page = client.List("model/", 10)) {
    for (const TensorSummary& tensor : page->tensors) {
      text += tensor.name + " " + std::to_string(tensor.latest_version) + " " +
              std::string(ElementTypeName(tensor.element_type)) + " " +
              std::to_string(tensor.byte_size) + " " +
              std::to_string(tensor.published_at.time_since_epoch().count()) + "; ";
    }
    text += page->next_page_token;
  }
  if (auto details = client.Describe("model/w")) {
    text += details->descriptor.ToString() + details->pool +
            std::string(SyncModeName(details->sync_mode));
    for (const BufferLocation& buffer : details->buffers) text += std::to_string(buffer.offset);
    for (const VersionSummary& version : details->versions) {
      text += version.superseded ? " superseded" : " current";
    }
  }
  if (auto stats = client.Stats()) {
    text += std::to_string(stats->uptime.count());
    for (const PoolStats& pool : stats->pools) text += pool.name + pool.huge_pages;
  }
  auto watch = client.Watch("model/", [&text](const WatchEvent& event) {
    text += event.kind == WatchEvent::Kind::kPublished ? "published " : "deleted ";
    text += event.name;
  });
  return text;
}

TEST(ClientHeaderTest, ConnectWithoutADaemonIsUnavailable) {
  auto client = Client::Connect(
      Client::Options{.socket_path = "/nonexistent-hurray-dir/grpc.sock", .client_name = "t"});
  ASSERT_FALSE(client.has_value());
  EXPECT_EQ(client.error().code(), StatusCode::kUnavailable) << client.error().ToString();
}

TEST(ClientHeaderTest, HealthWithoutADaemonIsUnavailable) {
  auto status = CheckHealth("/nonexistent-hurray-dir/grpc.sock", "", std::chrono::seconds(5));
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code(), StatusCode::kUnavailable) << status.error().ToString();
  EXPECT_EQ(ServingStatusName(ServingStatus::kNotServing), "NOT_SERVING");
}

TEST(ClientHeaderTest, InspectionValuesHaveTheirJson) {
  const auto json = ToJson(WatchEvent{.kind = WatchEvent::Kind::kDeleted, .name = "model/w"});
  ASSERT_TRUE(json.has_value()) << json.error().ToString();
  EXPECT_NE(json->find("\"kind\":\"KIND_DELETED\""), std::string::npos) << *json;
}

}  // namespace
}  // namespace hurray
