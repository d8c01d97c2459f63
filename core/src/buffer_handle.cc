#include "hurray/buffer_handle.h"

#include <array>
#include <bit>

#include "str_cat.h"

namespace hurray {

using internal::HexByte;
using internal::StrCat;

Result<DeviceTag> DeviceTag::FromByte(std::uint8_t byte) {
  if (byte == 0xFF) {
    return InvalidArgumentError(StrCat("device_tag ", HexByte(byte), " is invalid"));
  }
  if (byte > 0x08 && byte < 0xF0) {
    return InvalidArgumentError(
        StrCat("device_tag ", HexByte(byte), " is reserved (0x09-0xEF)"));
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
    return InvalidArgumentError(StrCat("memory_class ", HexByte(byte), " is invalid"));
  }
  if (byte > 0x03 && byte < 0xF0) {
    return InvalidArgumentError(
        StrCat("memory_class ", HexByte(byte), " is reserved (0x04-0xEF)"));
  }
  return MemoryClass(byte);
}

std::string_view MemoryClass::Name() const {
  static constexpr std::array<std::string_view, 4> kNames = {"standard", "host_pinned",
                                                             "unified", "peer"};
  if (byte_ < kNames.size()) return kNames[byte_];
  return IsPrivate() ? "private" : "invalid";
}

Result<SyncMode> SyncModeFromByte(std::uint8_t byte) {
  if (byte > SyncModeToByte(SyncMode::kConsumerStream)) {
    return InvalidArgumentError(StrCat("sync_mode ", HexByte(byte),
                                       " is not one of 0x00 (producer_synced), 0x01 (event), "
                                       "0x02 (consumer_stream)"));
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
    return InvalidArgumentError(StrCat("alignment ", alignment, " is not a power of two"));
  }
  if (byte_size != 0 && alignment < kMinBufferAlignment) {
    return InvalidArgumentError(StrCat("alignment ", alignment, " is below the minimum ",
                                       kMinBufferAlignment, " for a non-empty buffer"));
  }
  return BufferHandle(byte_size, alignment, device_tag, sync_mode, memory_class);
}

BufferHandle BufferHandle::Empty(DeviceTag device_tag) {
  return BufferHandle(0, 1, device_tag, SyncMode::kProducerSynced, MemoryClass::Standard());
}

std::string BufferHandle::ToString() const {
  return StrCat(byte_size_, " bytes, align ", alignment_, ", ", device_tag_.Name(), "(",
                HexByte(device_tag_.ToByte()), ")/", memory_class_.Name(), ", ",
                SyncModeName(sync_mode_));
}

Result<DeviceTag> ValidateColocation(std::span<const BufferHandle> buffers) {
  if (buffers.empty()) return DeviceTag::Cpu();
  const BufferHandle& first = buffers.front();
  for (std::size_t i = 1; i < buffers.size(); ++i) {
    if (buffers[i].device_tag() != first.device_tag()) {
      return InvalidArgumentError(StrCat("buffer ", i, ": device_tag ",
                                         HexByte(buffers[i].device_tag().ToByte()),
                                         " differs from buffer 0's ",
                                         HexByte(first.device_tag().ToByte()),
                                         " (all buffers of a tensor share one device)"));
    }
    if (buffers[i].memory_class() != first.memory_class()) {
      return InvalidArgumentError(StrCat("buffer ", i, ": memory_class ",
                                         HexByte(buffers[i].memory_class().ToByte()),
                                         " differs from buffer 0's ",
                                         HexByte(first.memory_class().ToByte()),
                                         " (all buffers of a tensor share one memory class)"));
    }
  }
  return first.device_tag();
}

}  // namespace hurray
