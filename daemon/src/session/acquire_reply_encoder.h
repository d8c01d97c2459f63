// Acquire replies on the session socket, encoded by hand from a version's stored bytes: the
// registry keeps each version's TensorInfo serialized (TensorVersion::info_without_name),
// and an acquire reply is those bytes with the name, the lease and the rest written around
// them, with nothing parsed and no message built.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hurray::daemon {

// What one acquire reply says. A plain value; borrows the strings.
struct AcquireReplyParts {
  std::uint64_t lease_id = 0;
  std::string_view name;
  // A v1::TensorInfo without its name (field 1), as SerializeToString wrote it.
  std::string_view info_without_name;
  // Event handoff: the fence was reached when the reply was built (SyncHandoff.ready).
  bool ready = false;
  std::uint64_t daemon_epoch = 0;
  // The fast path's version identity and directory entry; both 0: no fast path.
  std::uint64_t version_id = 0;
  std::uint64_t directory_entry = 0;
};

// Appends to `out` the wire bytes of the v1::AcquireResponse with lease_id, tensor (name,
// then the stored fields, with handoff.ready set when `ready`), daemon_epoch, version_id
// and directory_entry: byte for byte what SerializeToString writes for that message built
// field by field. The stored handoff (TensorInfo field 5) is found by walking the stored
// fields' tags only, and only when `ready`. Thread-safe (a pure function).
void AppendAcquireResponse(const AcquireReplyParts& parts, std::string& out);

// Writes to `out` (replacing what it held, its memory reused) the wire bytes of a
// v1::SessionMessage with `request_id` and body field `body_field` holding the already
// encoded message `body`: what SerializeToString writes for it. Thread-safe.
void EncodeSessionReply(std::uint64_t request_id, int body_field, std::string_view body,
                        std::vector<std::uint8_t>& out);

}  // namespace hurray::daemon
