#include "hurray/inspection_json.h"

#include <fmt/format.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include "inspection_codec.h"

namespace hurray {
namespace {

Result<std::string> JsonOf(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
      !status.ok()) {
    return InternalError(
        fmt::format("the JSON of {}: {}", message.GetTypeName(), std::string(status.message())));
  }
  return json;
}

}  // namespace

Result<std::string> ToJson(const TensorListPage& page) {
  return JsonOf(client_internal::TensorListPageToProto(page));
}

Result<std::string> ToJson(const TensorDetails& details) {
  return JsonOf(client_internal::TensorDetailsToProto(details));
}

Result<std::string> ToJson(const DaemonStats& stats) {
  return JsonOf(client_internal::DaemonStatsToProto(stats));
}

Result<std::string> ToJson(const WatchEvent& event) {
  return JsonOf(client_internal::WatchEventToProto(event));
}

}  // namespace hurray
