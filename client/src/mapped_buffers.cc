#include "mapped_buffers.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace hurray::client_internal {
namespace {

// The memory of one non-empty buffer: a host segment (cached by the connection) or a CUDA
// slab (the connection's DeviceSlabCache), as the buffer's device tag says, of daemon epoch
// `epoch`; `size` is the mapped segment's or slab's.
Result<MappedBuffer> MapOne(Connection& connection, const v1::BufferLocation& location,
                            DeviceTag device_tag, bool writable, std::string_view pool,
                            std::uint64_t epoch, std::uint64_t& size) {
  if (device_tag == DeviceTag::Cpu()) {
    HURRAY_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> mapping,
                            connection.MapSegment(location.segment_id(), writable, epoch));
    size = mapping->size();
    std::byte* data = mapping->base() + std::min(location.offset(), size);
    return MappedBuffer{.mapping = std::move(mapping), .slab = {}, .data = data, .size = 0};
  }
  if (device_tag != DeviceTag::Cuda()) {
    return FailedPreconditionError(fmt::format(
        "pool {}: this client maps CPU and CUDA memory, not {}", pool, device_tag.Name()));
  }
  HURRAY_ASSIGN_OR_RETURN(DeviceSlabCache * slabs, connection.DeviceSlabs(epoch));
  HURRAY_ASSIGN_OR_RETURN(SlabReference slab,
                          slabs->Acquire(location.segment_id(), writable, pool));
  size = slab.slab().size;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a device address is an integer.
  auto* data = reinterpret_cast<std::byte*>(slab.address() + std::min(location.offset(), size));
  return MappedBuffer{.mapping = nullptr, .slab = std::move(slab), .data = data, .size = 0};
}

}  // namespace

Result<MappedTensor> MapBuffers(
    Connection& connection, const google::protobuf::RepeatedPtrField<v1::BufferLocation>& buffers,
    const TensorDescriptor& descriptor, bool writable, std::string_view pool, std::uint64_t epoch) {
  if (static_cast<std::size_t>(buffers.size()) != descriptor.buffers().size()) {
    return InternalError(fmt::format("daemon sent {} buffer locations for a buffer table of {}",
                                     buffers.size(), descriptor.buffers().size()));
  }
  MappedTensor mapped{.buffers = {}, .device = DeviceInfo{.device_tag = descriptor.device_tag()}};
  mapped.buffers.reserve(descriptor.buffers().size());
  for (int i = 0; i < buffers.size(); ++i) {
    const v1::BufferLocation& location = buffers.Get(i);
    const BufferHandle& declared = descriptor.buffers()[static_cast<std::size_t>(i)];
    if (location.byte_size() != declared.byte_size()) {
      return InternalError(fmt::format("daemon sent buffer {} of {} bytes; the descriptor says {}",
                                       i, location.byte_size(), declared.byte_size()));
    }
    if (location.byte_size() == 0) {
      mapped.buffers.push_back(MappedBuffer{});
      continue;
    }
    std::uint64_t size = 0;
    HURRAY_ASSIGN_OR_RETURN(MappedBuffer buffer, MapOne(connection, location, declared.device_tag(),
                                                        writable, pool, epoch, size));
    if (location.offset() > size || location.byte_size() > size - location.offset()) {
      return InternalError(
          fmt::format("daemon sent buffer {} at offset {} beyond segment {} of {} bytes", i,
                      location.offset(), location.segment_id(), size));
    }
    if (buffer.slab) {
      mapped.device.device_ordinal = buffer.slab.slab().device_ordinal;
      mapped.device.device_uuid = buffer.slab.slab().device_uuid;
    }
    buffer.size = location.byte_size();
    mapped.buffers.push_back(std::move(buffer));
  }
  return mapped;
}

void UnmapSealedBuffers(std::vector<MappedBuffer>& buffers) {
  for (MappedBuffer& buffer : buffers) {
    if (buffer.mapping && buffer.mapping->sealed()) buffer = MappedBuffer{};
  }
}

}  // namespace hurray::client_internal
