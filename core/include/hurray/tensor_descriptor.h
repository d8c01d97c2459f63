// The Hurray tensor descriptor: element type, shape, layout, quantization, buffer table and
// metadata, validated as a whole. Its one encoding is hurray.v1.TensorDescriptor
// (proto/hurray/v1/descriptor.proto); docs/descriptor.md lists every rule.
//
// A TensorDescriptor is an immutable value: once Create or Decode returns one, it satisfies
// every rule. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/buffer_handle.h"
#include "hurray/buffer_parts.h"
#include "hurray/element_type.h"
#include "hurray/error.h"
#include "hurray/export.h"
#include "hurray/layout.h"
#include "hurray/quantization.h"

namespace hurray {

// Largest encoded descriptor Decode accepts, in bytes.
inline constexpr std::size_t kMaxEncodedDescriptorBytes = 1 << 20;
// Most dimensions a tensor may have.
inline constexpr std::size_t kMaxRank = 64;
// Most metadata entries, longest key and longest value (bytes).
inline constexpr std::size_t kMaxMetadataEntries = 256;
inline constexpr std::size_t kMaxMetadataKeyBytes = 256;
inline constexpr std::size_t kMaxMetadataValueBytes = 65536;
// Most bytes of metadata keys and values together. With it, every valid descriptor encodes
// well below kMaxEncodedDescriptorBytes, so Decode(Encode()) always succeeds.
inline constexpr std::size_t kMaxMetadataTotalBytes = std::size_t{512} * 1024;

class HURRAY_CXX_EXPORT TensorDescriptor {
 public:
  // Everything a descriptor holds, unvalidated.
  struct Parts {
    ElementType element_type = ElementType::kFloat32;
    std::vector<std::uint64_t> shape;
    Layout layout = DenseLayout{};
    Quantization quantization = NoQuantization{};
    std::vector<BufferHandle> buffers;
    std::map<std::string, std::string> metadata;

    friend bool operator==(const Parts&, const Parts&) = default;
  };

  // Validates `parts` against every rule of docs/descriptor.md. INVALID_ARGUMENT naming the
  // field and value of the first rule broken.
  [[nodiscard]] static Result<TensorDescriptor> Create(Parts parts);

  // A dense, row-major, unquantized descriptor with one buffer of exactly the size the
  // shape needs, producer-synced. A scalar when `shape` is empty. An empty tensor (a zero
  // dimension) gets an empty buffer of alignment 1.
  [[nodiscard]] static Result<TensorDescriptor> Dense(
      ElementType element_type, std::vector<std::uint64_t> shape,
      DeviceTag device_tag = DeviceTag::Cpu(), std::uint64_t alignment = kMinBufferAlignment,
      MemoryClass memory_class = MemoryClass::Standard());

  // Create, with the buffer table made from what the layout and quantization of `parts`
  // imply: parts.buffers is replaced by one producer-synced buffer per buffer index they
  // refer to (table position = index), each of exactly the implied size (the minimum for
  // strided dense data), alignment 1 when empty. An index past the number of referenced
  // buffers is reported by Create as not resolving.
  [[nodiscard]] static Result<TensorDescriptor> WithImpliedBuffers(
      Parts parts, DeviceTag device_tag = DeviceTag::Cpu(),
      std::uint64_t alignment = kMinBufferAlignment,
      MemoryClass memory_class = MemoryClass::Standard());

  // Decodes the protobuf encoding and validates it. Never crashes, whatever the bytes:
  // INVALID_ARGUMENT for bytes that do not parse, exceed kMaxEncodedDescriptorBytes, or
  // break a rule.
  [[nodiscard]] static Result<TensorDescriptor> Decode(std::span<const std::uint8_t> bytes);

  // The protobuf encoding; Decode(Encode()) gives back an equal descriptor.
  [[nodiscard]] std::string Encode() const;

  [[nodiscard]] ElementType element_type() const { return parts_.element_type; }
  [[nodiscard]] const std::vector<std::uint64_t>& shape() const { return parts_.shape; }
  [[nodiscard]] std::size_t rank() const { return parts_.shape.size(); }
  [[nodiscard]] const Layout& layout() const { return parts_.layout; }
  [[nodiscard]] const Quantization& quantization() const { return parts_.quantization; }
  [[nodiscard]] const std::vector<BufferHandle>& buffers() const { return parts_.buffers; }
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const {
    return parts_.metadata;
  }
  [[nodiscard]] const Parts& parts() const { return parts_; }

  // The device tag and memory class every buffer shares (CPU/standard when there is none).
  [[nodiscard]] DeviceTag device_tag() const;
  [[nodiscard]] MemoryClass memory_class() const;

  // Product of the shape (1 for a scalar). Create guarantees it fits in 64 bits.
  [[nodiscard]] std::uint64_t ElementCount() const;

  // What each buffer of the table holds (hurray/buffer_parts.h): one entry per buffer, those
  // of the layout first, then those of the quantization.
  [[nodiscard]] std::vector<BufferPart> BufferParts() const;
  // The buffer part named `part` ("data", "scales", ...); nullopt when neither the layout nor
  // the quantization has one.
  [[nodiscard]] std::optional<BufferPart> FindBufferPart(std::string_view part) const;

  // The consumer's check on a delivered buffer list (docs/descriptor.md, "Checking delivered
  // buffers"): its length equals the buffer table's, and each delivered buffer declares the
  // table entry's size, device tag, memory class and sync mode, and at least its alignment.
  // INVALID_ARGUMENT naming the first difference.
  [[nodiscard]] Status ValidateDeliveredBuffers(std::span<const BufferHandle> delivered) const;

  // A multi-line human-readable rendering, for logs and tools.
  [[nodiscard]] std::string ToString() const;

  friend bool operator==(const TensorDescriptor&, const TensorDescriptor&) = default;

 private:
  explicit TensorDescriptor(Parts parts) : parts_(std::move(parts)) {}
  Parts parts_;
};

}  // namespace hurray
