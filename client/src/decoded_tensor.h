// DecodedTensor: one acquired version as this process uses it — its descriptor decoded and
// its buffers mapped — shared by every view of that version (TensorCache keeps the latest
// of each name between acquires). Private to the client module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "connection.h"
#include "hurray/client.h"
#include "hurray/error.h"
#include "hurray/tensor_descriptor.h"
#include "hurray/v1/exchange.pb.h"
#include "mapped_buffers.h"

namespace hurray::client_internal {

// Immutable once made; thread-safe. Its mappings stay while any holder of it exists.
struct DecodedTensor {
  std::string name;
  std::uint64_t version = 0;
  // The daemon epoch of the acquire it was decoded from.
  std::uint64_t daemon_epoch = 0;
  // The fast path's (AcquireResponse fields 4 and 5): the version's identity, never reused
  // within the epoch, and its name's directory entry; version_id 0: no fast path.
  std::uint64_t version_id = 0;
  std::uint64_t directory_entry = 0;
  TensorDescriptor descriptor;
  std::vector<MappedBuffer> buffers;
  DeviceInfo device;
  SyncMode sync_mode = SyncMode::kProducerSynced;
  // SyncMode::kEvent: the fence the producer signals.
  v1::Fence fence;

  // Whether the tensor may outlive its views in a cache: it has an identity (version_id)
  // and lives in host memory of a pool that is not sealed, whose mappings the connection
  // caches for the epoch anyway. A sealed pool's mapping must end with the last view, and
  // a CUDA slab's references count against the mapped-slab cap.
  [[nodiscard]] bool cacheable() const;
};

// Decodes the tensor of an acquire reply of daemon epoch `epoch` and maps its buffers
// read-only. INVALID_ARGUMENT ("daemon sent an invalid descriptor" or handoff) or INTERNAL
// (an Event handoff without a fence, or buffer locations that do not fit), or MapBuffers'
// errors. Nothing stays mapped for it on error.
[[nodiscard]] Result<std::shared_ptr<const DecodedTensor>> DecodeTensor(
    Connection& connection, const v1::AcquireResponse& reply, std::uint64_t epoch);

}  // namespace hurray::client_internal
