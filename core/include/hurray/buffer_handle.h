// Layer 1 of the Hurray format: the buffer handle and the one-byte tags it carries.
//
// A buffer handle declares a buffer (size, alignment, device, memory class, sync mode); it
// holds no pointer. All types here are immutable values and thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "hurray/error.h"
#include "hurray/export.h"

namespace hurray {

// The alignment every non-empty buffer guarantees at least: 64 bytes (one SIMD line).
inline constexpr std::uint64_t kMinBufferAlignment = 64;
// The alignment recommended for GPU and IPC buffers: one page.
inline constexpr std::uint64_t kPageAlignment = 4096;

// Which memory space a buffer lives in. One byte on the wire: 0x00-0x08 named,
// 0x09-0xEF reserved (rejected), 0xF0-0xFE private, 0xFF invalid (rejected).
class HURRAY_CXX_EXPORT DeviceTag {
 public:
  static constexpr DeviceTag Cpu() { return DeviceTag(0x00); }
  static constexpr DeviceTag Cuda() { return DeviceTag(0x01); }
  static constexpr DeviceTag Rocm() { return DeviceTag(0x02); }
  static constexpr DeviceTag Metal() { return DeviceTag(0x03); }
  static constexpr DeviceTag Vulkan() { return DeviceTag(0x04); }
  static constexpr DeviceTag OpenCl() { return DeviceTag(0x05); }
  static constexpr DeviceTag OneApi() { return DeviceTag(0x06); }
  static constexpr DeviceTag WebGpu() { return DeviceTag(0x07); }
  static constexpr DeviceTag Hexagon() { return DeviceTag(0x08); }

  // The tag of a wire byte: INVALID_ARGUMENT for a reserved byte (0x09-0xEF) or 0xFF.
  [[nodiscard]] static Result<DeviceTag> FromByte(std::uint8_t byte);

  [[nodiscard]] constexpr std::uint8_t ToByte() const { return byte_; }
  [[nodiscard]] constexpr bool IsPrivate() const { return byte_ >= 0xF0 && byte_ <= 0xFE; }
  // "cpu", "cuda", ...; "private" for the private range.
  [[nodiscard]] std::string_view Name() const;

  friend constexpr bool operator==(DeviceTag, DeviceTag) = default;

 private:
  constexpr explicit DeviceTag(std::uint8_t byte) : byte_(byte) {}
  std::uint8_t byte_;
};

// How a buffer is accessible. One byte on the wire: 0x00 Standard, 0x01 HostPinned,
// 0x02 Unified, 0x03 Peer; 0x04-0xEF reserved, 0xF0-0xFE private, 0xFF invalid.
class HURRAY_CXX_EXPORT MemoryClass {
 public:
  static constexpr MemoryClass Standard() { return MemoryClass(0x00); }
  static constexpr MemoryClass HostPinned() { return MemoryClass(0x01); }
  static constexpr MemoryClass Unified() { return MemoryClass(0x02); }
  static constexpr MemoryClass Peer() { return MemoryClass(0x03); }

  // The class of a wire byte: INVALID_ARGUMENT for a reserved byte (0x04-0xEF) or 0xFF.
  [[nodiscard]] static Result<MemoryClass> FromByte(std::uint8_t byte);

  [[nodiscard]] constexpr std::uint8_t ToByte() const { return byte_; }
  [[nodiscard]] constexpr bool IsPrivate() const { return byte_ >= 0xF0 && byte_ <= 0xFE; }
  // "standard", "host_pinned", "unified", "peer"; "private" for the private range.
  [[nodiscard]] std::string_view Name() const;

  friend constexpr bool operator==(MemoryClass, MemoryClass) = default;

 private:
  constexpr explicit MemoryClass(std::uint8_t byte) : byte_(byte) {}
  std::uint8_t byte_;
};

// When a buffer may be read.
enum class SyncMode : std::uint8_t {
  kProducerSynced = 0x00,  // The producer finished writing before the handoff.
  kEvent = 0x01,           // Wait on the producer's device event first.
  kConsumerStream = 0x02,  // The producer orders its work onto the consumer's stream.
};

// The sync mode of a wire byte: INVALID_ARGUMENT for any other byte.
[[nodiscard]] HURRAY_CXX_EXPORT Result<SyncMode> SyncModeFromByte(std::uint8_t byte);
[[nodiscard]] constexpr std::uint8_t SyncModeToByte(SyncMode mode) {
  return static_cast<std::uint8_t>(mode);
}
// "producer_synced", "event", "consumer_stream".
[[nodiscard]] HURRAY_CXX_EXPORT std::string_view SyncModeName(SyncMode mode);

// The declaration of one buffer: size, alignment guarantee, device, memory class, sync mode.
class HURRAY_CXX_EXPORT BufferHandle {
 public:
  // A validated handle. INVALID_ARGUMENT when the alignment is not a power of two, or is
  // below kMinBufferAlignment for a non-empty buffer.
  [[nodiscard]] static Result<BufferHandle> Create(
      std::uint64_t byte_size, std::uint64_t alignment, DeviceTag device_tag, SyncMode sync_mode,
      MemoryClass memory_class = MemoryClass::Standard());

  // An empty (zero-byte) buffer with alignment 1, producer-synced, standard memory.
  [[nodiscard]] static BufferHandle Empty(DeviceTag device_tag);

  [[nodiscard]] std::uint64_t byte_size() const { return byte_size_; }
  [[nodiscard]] std::uint64_t alignment() const { return alignment_; }
  [[nodiscard]] DeviceTag device_tag() const { return device_tag_; }
  [[nodiscard]] MemoryClass memory_class() const { return memory_class_; }
  [[nodiscard]] SyncMode sync_mode() const { return sync_mode_; }
  [[nodiscard]] bool IsEmpty() const { return byte_size_ == 0; }

  // "4096 bytes, align 64, cpu/standard, producer_synced".
  [[nodiscard]] std::string ToString() const;

  friend bool operator==(const BufferHandle&, const BufferHandle&) = default;

 private:
  BufferHandle(std::uint64_t byte_size, std::uint64_t alignment, DeviceTag device_tag,
               SyncMode sync_mode, MemoryClass memory_class)
      : byte_size_(byte_size),
        alignment_(alignment),
        device_tag_(device_tag),
        memory_class_(memory_class),
        sync_mode_(sync_mode) {}

  std::uint64_t byte_size_;
  std::uint64_t alignment_;
  DeviceTag device_tag_;
  MemoryClass memory_class_;
  SyncMode sync_mode_;
};

// Checks that every buffer shares the first one's device tag and memory class, and returns
// that device tag (CPU for an empty list). INVALID_ARGUMENT naming the first buffer that
// differs, with the expected and found bytes.
[[nodiscard]] HURRAY_CXX_EXPORT Result<DeviceTag> ValidateColocation(
    std::span<const BufferHandle> buffers);

}  // namespace hurray
