// hurray_access_agent: one client doing a list of operations and saying how each ended, for
// the access-policy tests, which run it as other uids.
//
//   hurray_access_agent SOCKET session|grpc OP:NAME...
//
// OP is publish (a 64-byte tensor), acquire, delete, describe or list (NAME is the prefix).
// Prints one line per operation: "OP NAME OK" (list: then the names it saw, comma-separated;
// describe: then "owner UID"), or "OP NAME CODE MESSAGE". Exits 0 once every operation ran,
// 2 for bad arguments, 3 when it cannot connect.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/client.h"
#include "test_tensors.h"

namespace {

using ::hurray::Client;

std::string Outcome(const ::hurray::Error& error) {
  return std::string(::hurray::StatusCodeName(error.code())) + " " + error.message();
}

std::string Run(Client& client, std::string_view op, const std::string& name) {
  if (op == "publish") {
    auto tensor = client.Allocate(::hurray::integration::MakeByteTensor(64));
    if (!tensor) return Outcome(tensor.error());
    auto published = tensor->Publish(name);
    return published ? "OK" : Outcome(published.error());
  }
  if (op == "acquire") {
    auto view = client.Acquire(name);
    return view ? "OK" : Outcome(view.error());
  }
  if (op == "delete") {
    auto deleted = client.Delete(name);
    return deleted ? "OK" : Outcome(deleted.error());
  }
  if (op == "describe") {
    auto details = client.Describe(name);
    return details ? "OK owner " + std::to_string(details->owner_uid) : Outcome(details.error());
  }
  if (op == "list") {
    auto page = client.List(name);
    if (!page) return Outcome(page.error());
    std::string names;
    for (const auto& tensor : page->tensors) names += (names.empty() ? "" : ",") + tensor.name;
    return "OK " + names;
  }
  return "UNKNOWN_OP";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: hurray_access_agent SOCKET session|grpc OP:NAME...\n");
    return 2;
  }
  Client::Options options{.socket_path = argv[1], .client_name = "access-agent"};
  options.hot_path = std::string_view(argv[2]) == "grpc" ? Client::Options::HotPath::kGrpc
                                                         : Client::Options::HotPath::kSessionSocket;
  auto client = Client::Connect(options);
  if (!client) {
    std::fprintf(stderr, "hurray_access_agent: %s\n", client.error().ToString().c_str());
    return 3;
  }
  for (int i = 3; i < argc; ++i) {
    const std::string_view argument(argv[i]);
    const std::size_t colon = argument.find(':');
    if (colon == std::string_view::npos) return 2;
    const std::string_view op = argument.substr(0, colon);
    const std::string name(argument.substr(colon + 1));
    std::printf("%.*s %s %s\n", static_cast<int>(op.size()), op.data(), name.c_str(),
                Run(**client, op, name).c_str());
    std::fflush(stdout);
  }
  return 0;
}
