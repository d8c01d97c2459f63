#include "hurrayctl/command_support.h"

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <utility>

#include "hurray/ipc/socket_path.h"

namespace hurray::ctl {
namespace {

// What hurrayctl says when no daemon answers at `socket_path`; `cause` is the connect error.
std::string UnreachableDaemonMessage(std::string_view socket_path, std::string_view cause) {
  return fmt::format(
      "no hurrayd answers at {} ({}). Is it running? Start it with `hurrayd` (or `systemctl "
      "start hurrayd`), or point at another socket with --socket PATH or $HURRAY_SOCKET.",
      socket_path, cause);
}

}  // namespace

std::string SocketPathOf(const GlobalOptions& options) {
  return options.socket_path.empty() ? DefaultClientSocketPath() : options.socket_path;
}

Error ExplainConnectError(const Error& error, const std::string& socket_path) {
  if (error.code() != StatusCode::kUnavailable) return error;
  return {StatusCode::kUnavailable, UnreachableDaemonMessage(socket_path, error.message())};
}

Result<std::unique_ptr<Client>> ConnectClient(const GlobalOptions& options) {
  const std::string socket_path = SocketPathOf(options);
  auto client = Client::Connect(
      Client::Options{.socket_path = socket_path, .client_name = std::string(kClientName)});
  if (!client) return std::unexpected(ExplainConnectError(client.error(), socket_path));
  return client;
}

void Print(std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); }

Result<std::string> JsonText(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions json_options;
  json_options.preserve_proto_field_names = true;
  json_options.always_print_primitive_fields = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, json_options);
  if (!status.ok()) {
    return InternalError(fmt::format("MessageToJsonString: {}", std::string(status.message())));
  }
  return json;
}

Status PrintJson(const google::protobuf::Message& message) {
  HURRAY_ASSIGN_OR_RETURN(std::string json, JsonText(message));
  json += '\n';
  Print(json);
  return {};
}

Status JsonObject::Print() const {
  std::string json = "{";
  for (const auto& [key, value] : fields_) {
    google::protobuf::Value key_value;
    key_value.set_string_value(key);
    HURRAY_ASSIGN_OR_RETURN(const std::string key_json, JsonText(key_value));
    HURRAY_ASSIGN_OR_RETURN(const std::string value_json, JsonText(value));
    if (json.size() > 1) json += ',';
    json += key_json;
    json += ':';
    json += value_json;
  }
  json += "}\n";
  ::hurray::ctl::Print(json);
  return {};
}

}  // namespace hurray::ctl
