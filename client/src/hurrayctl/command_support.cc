#include "hurrayctl/command_support.h"

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

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
  return options.socket_path.empty() ? DefaultSocketPath() : options.socket_path;
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

Status PrintJson(const Result<std::string>& json) {
  if (!json) return std::unexpected(json.error());
  Print(*json);
  Print("\n");
  return {};
}

void JsonObject::Print() const {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [key, value] : fields_) {
    std::visit([&object, &key](const auto& held) { object[key] = held; }, value);
  }
  ::hurray::ctl::Print(object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                       "\n");
}

}  // namespace hurray::ctl
