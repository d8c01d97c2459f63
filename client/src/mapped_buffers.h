// A tensor's buffers mapped into this process, from the daemon's buffer locations: host
// segments (cached by the Connection) or CUDA slabs (its DeviceSlabCache). Private to the
// client module.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "connection.h"
#include "device/device_slab_cache.h"
#include "hurray/client.h"
#include "hurray/error.h"
#include "hurray/tensor_descriptor.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::client_internal {

// A buffer inside a mapped segment (host memory) or a mapped CUDA slab (device memory).
// Move-only (the slab reference); the memory stays mapped while it exists.
struct MappedBuffer {
  std::shared_ptr<Mapping> mapping;  // Host memory; null for an empty or device buffer.
  SlabReference slab;                // Device memory; empty otherwise.
  std::byte* data = nullptr;         // The address in this process: a host or a device address.
  std::uint64_t size = 0;
};

// A tensor's buffers, mapped, and where they live.
struct MappedTensor {
  std::vector<MappedBuffer> buffers;
  DeviceInfo device;
};

// Maps every location (of daemon epoch `epoch`, in pool `pool`) and checks that each lies
// inside its segment and has the descriptor's size. INTERNAL for locations that do not fit
// the descriptor or their segments; FAILED_PRECONDITION for a device this client cannot
// map; the error of mapping a segment or slab. Nothing stays mapped for the tensor on error.
[[nodiscard]] Result<MappedTensor> MapBuffers(
    Connection& connection, const google::protobuf::RepeatedPtrField<v1::BufferLocation>& buffers,
    const TensorDescriptor& descriptor, bool writable, std::string_view pool, std::uint64_t epoch);

// Unmaps the buffers that live in a sealed pool's memfds (no cache holds them): the daemon
// seals a memfd at publish only when no writable mapping of it remains.
void UnmapSealedBuffers(std::vector<MappedBuffer>& buffers);

}  // namespace hurray::client_internal
