#include "hurray/buffer_handle.h"

#include <fmt/format.h>

#include <array>
#include <bit>

namespace hurray {

Result<DeviceTag> DeviceTag::FromByte(std::uint8_t byte) {
  if (byte == 0xFF) {
    return InvalidArgumentError(fmt::format("device_tag 0x{:02X} is invalid", byte));
  }
  if (byte > 0x08 && byte < 0xF0) {
    return InvalidArgumentError(fmt::format("device_tag 0x{:02X} is reserved (0x09-0xEF)", byte));
  }
  return DeviceTag(byte);
}

std::string_view DeviceTag::Name() const {
  static constexpr std::array<std::string_view, 9> kNames = {
      "cpu", "cuda", "rocm", "metal", "vulkan", "opencl", "oneapi", "webgpu", "hexagon"};
  if (byte_ < kNames.size()) return kNames[byte_];
  return IsPrivate() ? "private" : "invalid";
}

Result<MemoryClass> MemoryClass::FromByte(std::uint8_t byte) {
  if (byte == 0xFF) {
    return InvalidArgumentError(fmt::format("memory_class 0x{:02X} is invalid", byte));
  }
  if (byte > 0x03 && byte < 0xF0) {
    return InvalidArgumentError(fmt::format("memory_class 0x{:02X} is reserved (0x04-0xEF)", byte));
  }
  return MemoryClass(byte);
}

std::string_view MemoryClass::Name() const {
  static constexpr std::array<std::string_view, 4> kNames = {"standard", "host_pinned", "unified",
                                                             "peer"};
  if (byte_ < kNames.size()) return kNames[byte_];
  return IsPrivate() ? "private" : "invalid";
}

Result<SyncMode> SyncModeFromByte(std::uint8_t byte) {
  if (byte > SyncModeToByte(SyncMode::kConsumerStream)) {
    return InvalidArgumentError(
        fmt::format("sync_mode 0x{:02X} is not one of 0x00 (producer_synced), 0x01 (event), "
                    "0x02 (consumer_stream)",
                    byte));
  }
  return static_cast<SyncMode>(byte);
}

std::string_view SyncModeName(SyncMode mode) {
  switch (mode) {
    case SyncMode::kProducerSynced:
      return "producer_synced";
    case SyncMode::kEvent:
      return "event";
    case SyncMode::kConsumerStream:
      return "consumer_stream";
  }
  return "invalid";
}

Result<BufferHandle> BufferHandle::Create(std::uint64_t byte_size, std::uint64_t alignment,
                                          DeviceTag device_tag, SyncMode sync_mode,
                                          MemoryClass memory_class) {
  if (auto mode = SyncModeFromByte(SyncModeToByte(sync_mode)); !mode) {
    return std::unexpected(mode.error());
  }
  if (!std::has_single_bit(alignment)) {
    return InvalidArgumentError(fmt::format("alignment {} is not a power of two", alignment));
  }
  if (byte_size != 0 && alignment < kMinBufferAlignment) {
    return InvalidArgumentError(
        fmt::format("alignment {} is below the minimum {} for a non-empty buffer", alignment,
                    kMinBufferAlignment));
  }
  return BufferHandle(byte_size, alignment, device_tag, sync_mode, memory_class);
}

BufferHandle BufferHandle::Empty(DeviceTag device_tag) {
  return {0, 1, device_tag, SyncMode::kProducerSynced, MemoryClass::Standard()};
}

std::string BufferHandle::ToString() const {
  return fmt::format("{} bytes, align {}, {}(0x{:02X})/{}, {}", byte_size_, alignment_,
                     device_tag_.Name(), device_tag_.ToByte(), memory_class_.Name(),
                     SyncModeName(sync_mode_));
}

Result<DeviceTag> ValidateColocation(std::span<const BufferHandle> buffers) {
  if (buffers.empty()) return DeviceTag::Cpu();
  const BufferHandle& first = buffers.front();
  for (std::size_t i = 1; i < buffers.size(); ++i) {
    if (buffers[i].device_tag() != first.device_tag()) {
      return InvalidArgumentError(
          fmt::format("buffer {}: device_tag 0x{:02X} differs from buffer 0's 0x{:02X} "
                      "(all buffers of a tensor share one device)",
                      i, buffers[i].device_tag().ToByte(), first.device_tag().ToByte()));
    }
    if (buffers[i].memory_class() != first.memory_class()) {
      return InvalidArgumentError(
          fmt::format("buffer {}: memory_class 0x{:02X} differs from buffer 0's 0x{:02X} "
                      "(all buffers of a tensor share one memory class)",
                      i, buffers[i].memory_class().ToByte(), first.memory_class().ToByte()));
    }
  }
  return first.device_tag();
}

}  // namespace hurray
