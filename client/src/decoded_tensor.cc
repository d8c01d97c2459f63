#include "decoded_tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "hurray/descriptor_codec.h"

namespace hurray::client_internal {
namespace {

// The sync mode of a handoff; INTERNAL for an Event handoff without a fence.
Result<SyncMode> HandoffSyncMode(const v1::SyncHandoff& handoff) {
  if (handoff.sync_mode() > 0xff) {
    return InvalidArgumentError(
        fmt::format("daemon sent an invalid handoff: sync mode {}", handoff.sync_mode()));
  }
  auto mode = SyncModeFromByte(static_cast<std::uint8_t>(handoff.sync_mode()));
  if (!mode) return std::unexpected(mode.error().WithContext("daemon sent an invalid handoff"));
  if (*mode == SyncMode::kEvent && !handoff.has_fence()) {
    return InternalError("daemon sent an Event handoff without a fence");
  }
  return *mode;
}

}  // namespace

bool DecodedTensor::cacheable() const {
  return version_id != 0 && device.device_tag == DeviceTag::Cpu() &&
         std::ranges::none_of(buffers, [](const MappedBuffer& buffer) {
           return buffer.mapping && buffer.mapping->sealed();
         });
}

Result<std::shared_ptr<const DecodedTensor>> DecodeTensor(Connection& connection,
                                                          const v1::AcquireResponse& reply,
                                                          std::uint64_t epoch) {
  const v1::TensorInfo& info = reply.tensor();
  auto descriptor = DescriptorFromProto(info.tensor_descriptor());
  if (!descriptor) {
    return std::unexpected(descriptor.error().WithContext("daemon sent an invalid descriptor"));
  }
  HURRAY_ASSIGN_OR_RETURN(const SyncMode sync_mode, HandoffSyncMode(info.handoff()));
  HURRAY_ASSIGN_OR_RETURN(MappedTensor mapped, MapBuffers(connection, info.buffers(), *descriptor,
                                                          /*writable=*/false, info.pool(), epoch));
  return std::make_shared<const DecodedTensor>(
      DecodedTensor{.name = info.name(),
                    .version = info.version(),
                    .daemon_epoch = epoch,
                    .version_id = reply.version_id(),
                    .directory_entry = reply.directory_entry(),
                    .descriptor = std::move(*descriptor),
                    .buffers = std::move(mapped.buffers),
                    .device = std::move(mapped.device),
                    .sync_mode = sync_mode,
                    .fence = info.handoff().fence()});
}

}  // namespace hurray::client_internal
