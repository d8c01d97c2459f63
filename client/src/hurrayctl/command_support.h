// What hurrayctl's commands share: connecting to the daemon (with the words a newcomer acts
// on when none answers) and printing to stdout, as text or as JSON.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/struct.pb.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "hurray/client.h"
#include "hurray/error.h"
#include "hurrayctl/hurrayctl_commands.h"

namespace hurray::ctl {

// The name hurrayctl's sessions give the daemon.
inline constexpr std::string_view kClientName = "hurrayctl";

// The socket a command connects to: --socket, else the client's default.
[[nodiscard]] std::string SocketPathOf(const GlobalOptions& options);

// A failure to connect, in words a newcomer acts on when no daemon answers (UNAVAILABLE: no
// socket, or nobody listening on it); other errors as they are.
[[nodiscard]] Error ExplainConnectError(const Error& error, const std::string& socket_path);

// A client of the daemon at SocketPathOf(options), named kClientName.
[[nodiscard]] Result<std::unique_ptr<Client>> ConnectClient(const GlobalOptions& options);

// Writes `text` to stdout; write errors surface when main flushes stdout.
void Print(std::string_view text);

// Protobuf's JSON mapping of `message` on one line: proto field names, in field number order,
// fields at their defaults included (so scripts always find them).
[[nodiscard]] Result<std::string> JsonText(const google::protobuf::Message& message);

// JsonText(message) and a newline, to stdout.
[[nodiscard]] Status PrintJson(const google::protobuf::Message& message);

// A small JSON object for put, get, rm and the transfers, its keys printed in sorted order so
// that every run prints the same text. Values are google.protobuf.Values, so that protobuf's
// printer does the escaping; numbers are doubles: exact below 2^53.
class JsonObject {
 public:
  JsonObject& Set(const std::string& key, std::string_view value) {
    fields_[key].set_string_value(std::string(value));
    return *this;
  }
  JsonObject& Set(const std::string& key, std::uint64_t value) {
    fields_[key].set_number_value(static_cast<double>(value));
    return *this;
  }
  JsonObject& Set(const std::string& key, double value) {
    fields_[key].set_number_value(value);
    return *this;
  }
  // Prints the object on one line to stdout.
  [[nodiscard]] Status Print() const;

 private:
  std::map<std::string, google::protobuf::Value> fields_;  // Sorted by key.
};

}  // namespace hurray::ctl
