// Conversion of the daemon's List, Describe, Stats and Watch replies (hurray.v1 messages)
// into the client's own values (hurray/inspection.h), and back (for their JSON,
// hurray/inspection_json.h): a reply converted and converted back is the reply. Private to
// the client module. Pure functions; thread-safe.
#pragma once

#include <optional>

#include "hurray/error.h"
#include "hurray/inspection.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::client_internal {

// Errors are INVALID_ARGUMENT, with a message that starts "daemon sent", for a reply this
// client cannot represent: the replies of a daemon of another protocol version, or a bug.

// Every field of the reply. The error names the tensor whose element type is unknown.
[[nodiscard]] Result<TensorListPage> TensorListPageFromProto(const v1::ListResponse& reply);

// Every field of the reply; an error when its descriptor or sync mode is invalid.
[[nodiscard]] Result<TensorDetails> TensorDetailsFromProto(const v1::DescribeResponse& reply);

// Every field of the reply.
[[nodiscard]] DaemonStats DaemonStatsFromProto(const v1::StatsResponse& reply);

// Every field of a publish or delete event; nullopt for any other kind (the stream's
// confirmation, or a kind this client does not know).
[[nodiscard]] std::optional<WatchEvent> WatchEventFromProto(const v1::WatchEvent& event);

// The replies the values came from, every field set.
[[nodiscard]] v1::ListResponse TensorListPageToProto(const TensorListPage& page);
[[nodiscard]] v1::DescribeResponse TensorDetailsToProto(const TensorDetails& details);
[[nodiscard]] v1::StatsResponse DaemonStatsToProto(const DaemonStats& stats);
[[nodiscard]] v1::WatchEvent WatchEventToProto(const WatchEvent& event);

}  // namespace hurray::client_internal
