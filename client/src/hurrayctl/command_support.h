// What hurrayctl's commands share: connecting to the daemon (with the words a newcomer acts
// on when none answers) and printing to stdout, as text or as JSON.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

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

// `json` (one line, hurray/inspection_json.h's) and a newline, to stdout; or its error.
[[nodiscard]] Status PrintJson(const Result<std::string>& json);

// A small JSON object for put, get, rm, health and the transfers, its keys printed in sorted
// order so that every run prints the same text.
class JsonObject {
 public:
  JsonObject& Set(const std::string& key, std::string_view value) {
    fields_[key] = std::string(value);
    return *this;
  }
  JsonObject& Set(const std::string& key, std::uint64_t value) {
    fields_[key] = value;
    return *this;
  }
  JsonObject& Set(const std::string& key, double value) {
    fields_[key] = value;
    return *this;
  }
  // Prints the object on one line to stdout. Bytes of a string that are not UTF-8 print as
  // U+FFFD.
  void Print() const;

 private:
  std::map<std::string, std::variant<std::string, std::uint64_t, double>> fields_;  // By key.
};

}  // namespace hurray::ctl
