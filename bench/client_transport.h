// The path a measuring client's acquires and releases take, chosen through the public
// Client::Options: the fast path (no system call, the client's default), the session socket
// (release one-way), or gRPC (two calls a pair). Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hurray/client.h"
#include "hurray/error.h"

namespace hurray::bench {

enum class ClientPath : std::uint8_t {
  kDefault,   // Client::Options as they come.
  kSlowPath,  // Options::fast_path = false: every acquire and release on the session socket.
  kGrpc,      // Options::hot_path = kGrpc and fast_path = false: every call over gRPC.
};

// "default", "slow", "grpc": a worker's PATH argument.
[[nodiscard]] std::string_view ClientPathName(ClientPath path);
// The path named `name`; INVALID_ARGUMENT for another name.
[[nodiscard]] Result<ClientPath> ParseClientPath(std::string_view name);

// `options` set for `path`.
[[nodiscard]] Client::Options WithClientPath(Client::Options options, ClientPath path);

// What the client does by default, from Client::Options{}: "fast path, then session
// socket (...)".
[[nodiscard]] std::string DescribeDefaultClientPath();

}  // namespace hurray::bench
