// What the daemon reports (hurray/inspection.h) as JSON, the text `hurrayctl --json` prints:
// protobuf's JSON mapping of the hurray.v1 reply the value came from (ListResponse,
// DescribeResponse, StatsResponse, WatchEvent), on one line, with the proto field names
// ("daemon_epoch") and every field present, those at their defaults too, so that a script
// always finds its keys. As that mapping says, 64-bit integers are strings ("4096"), enums
// their names ("ELEMENT_TYPE_FLOAT32", "KIND_PUBLISHED") and times nanoseconds since the Unix
// epoch ("published_at_ns"). Pure functions; thread-safe.
#pragma once

#include <string>

#include "hurray/error.h"
#include "hurray/export.h"
#include "hurray/inspection.h"

namespace hurray {

// Each fails only with INTERNAL, naming what protobuf's printer refused (a string that is not
// UTF-8, say).
[[nodiscard]] HURRAY_CXX_EXPORT Result<std::string> ToJson(const TensorListPage& page);
[[nodiscard]] HURRAY_CXX_EXPORT Result<std::string> ToJson(const TensorDetails& details);
[[nodiscard]] HURRAY_CXX_EXPORT Result<std::string> ToJson(const DaemonStats& stats);
[[nodiscard]] HURRAY_CXX_EXPORT Result<std::string> ToJson(const WatchEvent& event);

}  // namespace hurray
