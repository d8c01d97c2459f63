// The read-only rpcs, List, Describe, Stats and Watch, with the daemon's replies as they
// come: Client converts them into its own values (inspection_codec.h), and hurrayctl prints
// them as protobuf JSON. None of them needs a session. Private to the client module.
// Thread-safe: each call uses only the connection's thread-safe stub.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "connection.h"
#include "hurray/client.h"
#include "hurray/error.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::client_internal {

// The errors of these calls are the daemon's (Client's List, Describe, Stats and Watch say
// which), or UNAVAILABLE when no daemon answers.
[[nodiscard]] Result<v1::ListResponse> CallList(Connection& connection, std::string_view prefix,
                                                std::uint32_t page_size,
                                                std::string_view page_token);
[[nodiscard]] Result<v1::DescribeResponse> CallDescribe(Connection& connection,
                                                        std::string_view name,
                                                        std::uint64_t version);
[[nodiscard]] Result<v1::StatsResponse> CallStats(Connection& connection);

// Calls `on_event` (on a thread of the watch's own) for every event the stream delivers
// after the daemon's confirmation (KIND_WATCHING, which is not passed on), until the
// handle is destroyed; `on_end` runs once when the stream ends: OK when the handle stopped
// it, the daemon's error otherwise. Returns once the daemon confirmed the watch;
// UNAVAILABLE when the stream ended first. The handle keeps `connection` alive.
[[nodiscard]] Result<std::unique_ptr<WatchHandle>> StartWatch(
    std::shared_ptr<Connection> connection, std::string prefix,
    std::function<void(const v1::WatchEvent&)> on_event, std::function<void(const Status&)> on_end);

}  // namespace hurray::client_internal
