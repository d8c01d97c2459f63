#include "hurray/tensor_descriptor.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "buffer_roles.h"
#include "hurray/checked_math.h"

namespace hurray {
namespace {

using internal::CheckedProduct;

std::string ShapeString(std::span<const std::uint64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Whether `text` is well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF).
bool IsValidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    std::uint32_t code_point = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code_point = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code_point = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code_point = lead & 0x07;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (next & 0x3F);
    }
    static constexpr std::uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code_point < kMinForLength[length] || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

Status CheckMetadata(const std::map<std::string, std::string>& metadata) {
  if (metadata.size() > kMaxMetadataEntries) {
    return InvalidArgumentError(fmt::format("metadata has {} entries, above the limit {}",
                                            metadata.size(), kMaxMetadataEntries));
  }
  std::size_t total = 0;
  for (const auto& [key, value] : metadata) {
    total += key.size() + value.size();
    if (key.empty() || key.size() > kMaxMetadataKeyBytes) {
      return InvalidArgumentError(fmt::format("metadata key of {} bytes is outside 1..{}",
                                              key.size(), kMaxMetadataKeyBytes));
    }
    if (value.size() > kMaxMetadataValueBytes) {
      return InvalidArgumentError(
          fmt::format("metadata[\"{}\"]: value of {} bytes is above the limit {}", key,
                      value.size(), kMaxMetadataValueBytes));
    }
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
      return InvalidArgumentError("metadata: keys and values must be valid UTF-8");
    }
  }
  if (total > kMaxMetadataTotalBytes) {
    return InvalidArgumentError(
        fmt::format("metadata holds {} bytes of keys and values, above the limit {}", total,
                    kMaxMetadataTotalBytes));
  }
  return {};
}

// Every role's buffer index resolves, no buffer plays two roles, every buffer plays one,
// and each buffer's size is the one its role requires.
Status CheckBufferTable(const std::vector<BufferPart>& roles,
                        const std::vector<BufferHandle>& buffers) {
  std::vector<const BufferPart*> role_of_buffer(buffers.size(), nullptr);
  for (const BufferPart& role : roles) {
    if (role.index >= buffers.size()) {
      return InvalidArgumentError(
          fmt::format("{} {} does not resolve: the buffer table has {} entries", role.field,
                      role.index, buffers.size()));
    }
    if (role_of_buffer[role.index] != nullptr) {
      return InvalidArgumentError(
          fmt::format("{} {} is already the {} buffer; each buffer has one role", role.field,
                      role.index, role_of_buffer[role.index]->name));
    }
    role_of_buffer[role.index] = &role;
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (role_of_buffer[i] == nullptr) {
      return InvalidArgumentError(
          fmt::format("buffers[{}] is not referenced by the layout or the quantization", i));
    }
    const BufferPart& role = *role_of_buffer[i];
    const std::uint64_t actual = buffers[i].byte_size();
    if (role.exact && actual != role.byte_size) {
      return InvalidArgumentError(fmt::format(
          "buffers[{}].byte_size {} ({}) differs from the {} bytes the descriptor implies", i,
          actual, role.name, role.byte_size));
    }
    if (!role.exact && actual < role.byte_size) {
      return InvalidArgumentError(
          fmt::format("buffers[{}].byte_size {} ({}) is below the {} bytes the strides address", i,
                      actual, role.name, role.byte_size));
    }
  }
  return {};
}

// Enumerators built in C++ may hold any value of their underlying type; Decode never
// produces such values, but Create must not trust a caller either.
Status CheckEnumerators(const TensorDescriptor::Parts& parts) {
  auto check_type = [](ElementType type, std::string_view field) -> Status {
    if (auto valid = ElementTypeFromTag(ElementTypeTag(type)); !valid) {
      return std::unexpected(valid.error().WithContext(field));
    }
    return {};
  };
  if (auto valid = check_type(parts.element_type, "element_type"); !valid) return valid;
  if (const auto* affine = std::get_if<PerChannelAffine>(&parts.quantization)) {
    if (auto valid = check_type(affine->scale_type, "quantization.per_channel_affine.scale_type");
        !valid) {
      return valid;
    }
    if (affine->zero_points) {
      if (auto valid = check_type(affine->zero_points->type,
                                  "quantization.per_channel_affine.zero_point_type");
          !valid) {
        return valid;
      }
    }
  }
  if (const auto* nf4 = std::get_if<Nf4Quantization>(&parts.quantization)) {
    if (auto valid = check_type(nf4->scale_type, "quantization.nf4.scale_type"); !valid) {
      return valid;
    }
  }
  if (const auto* compressed = std::get_if<CompressedLayout>(&parts.layout);
      compressed != nullptr && compressed->axis != CompressedAxis::kRows &&
      compressed->axis != CompressedAxis::kColumns) {
    return InvalidArgumentError("layout: compressed axis is neither rows nor columns");
  }
  return {};
}

}  // namespace

Result<TensorDescriptor> TensorDescriptor::Create(Parts parts) {
  if (auto valid = CheckEnumerators(parts); !valid) return std::unexpected(valid.error());
  if (parts.shape.size() > kMaxRank) {
    return InvalidArgumentError(
        fmt::format("shape has rank {}, above the limit {}", parts.shape.size(), kMaxRank));
  }
  if (!CheckedProduct(parts.shape)) {
    return InvalidArgumentError(
        fmt::format("shape {}: element count overflows 64 bits", ShapeString(parts.shape)));
  }
  auto roles = internal::BufferPartsOf(parts);
  if (!roles) return std::unexpected(roles.error());
  if (auto status = CheckBufferTable(*roles, parts.buffers); !status) {
    return std::unexpected(status.error());
  }
  if (auto colocated = ValidateColocation(parts.buffers); !colocated) {
    return std::unexpected(colocated.error());
  }
  if (auto status = CheckMetadata(parts.metadata); !status) {
    return std::unexpected(status.error());
  }
  return TensorDescriptor(std::move(parts));
}

Result<TensorDescriptor> TensorDescriptor::Dense(ElementType element_type,
                                                 std::vector<std::uint64_t> shape,
                                                 DeviceTag device_tag, std::uint64_t alignment,
                                                 MemoryClass memory_class) {
  const auto count = CheckedProduct(shape);
  const auto byte_size = count ? ByteSizeOf(element_type, *count) : std::nullopt;
  if (!byte_size) {
    return InvalidArgumentError(fmt::format("shape {} of {}: byte size overflows 64 bits",
                                            ShapeString(shape), ElementTypeName(element_type)));
  }
  auto buffer = BufferHandle::Create(*byte_size, *byte_size == 0 ? 1 : alignment, device_tag,
                                     SyncMode::kProducerSynced, memory_class);
  if (!buffer) return std::unexpected(buffer.error().WithContext("buffers[0]"));
  Parts parts;
  parts.element_type = element_type;
  parts.shape = std::move(shape);
  parts.buffers.push_back(*buffer);
  return Create(std::move(parts));
}

DeviceTag TensorDescriptor::device_tag() const {
  return parts_.buffers.empty() ? DeviceTag::Cpu() : parts_.buffers.front().device_tag();
}

MemoryClass TensorDescriptor::memory_class() const {
  return parts_.buffers.empty() ? MemoryClass::Standard() : parts_.buffers.front().memory_class();
}

std::uint64_t TensorDescriptor::ElementCount() const {
  return CheckedProduct(parts_.shape).value_or(0);
}

Result<TensorDescriptor> TensorDescriptor::WithImpliedBuffers(Parts parts, DeviceTag device_tag,
                                                              std::uint64_t alignment,
                                                              MemoryClass memory_class) {
  auto roles = internal::BufferPartsOf(parts);
  if (!roles) return std::unexpected(roles.error());
  parts.buffers.assign(roles->size(), BufferHandle::Empty(device_tag));
  for (const BufferPart& role : *roles) {
    if (role.index >= parts.buffers.size()) continue;  // Create names the unresolved index.
    auto buffer = BufferHandle::Create(role.byte_size, role.byte_size == 0 ? 1 : alignment,
                                       device_tag, SyncMode::kProducerSynced, memory_class);
    if (!buffer) {
      return std::unexpected(buffer.error().WithContext(fmt::format("buffers[{}]", role.index)));
    }
    parts.buffers[role.index] = *buffer;
  }
  return Create(std::move(parts));
}

Status TensorDescriptor::ValidateDeliveredBuffers(std::span<const BufferHandle> delivered) const {
  const auto& table = parts_.buffers;
  if (delivered.size() != table.size()) {
    return InvalidArgumentError(
        fmt::format("buffer list has {} buffers but the descriptor's buffer table has {}",
                    delivered.size(), table.size()));
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    const BufferHandle& got = delivered[i];
    const BufferHandle& want = table[i];
    if (got.byte_size() != want.byte_size()) {
      return InvalidArgumentError(
          fmt::format("buffer {}: byte_size {} differs from the descriptor's {}", i,
                      got.byte_size(), want.byte_size()));
    }
    if (got.alignment() < want.alignment()) {
      return InvalidArgumentError(
          fmt::format("buffer {}: alignment {} is below the descriptor's {}", i, got.alignment(),
                      want.alignment()));
    }
    if (got.device_tag() != want.device_tag() || got.memory_class() != want.memory_class()) {
      return InvalidArgumentError(fmt::format(
          "buffer {}: {}/{} differs from the descriptor's {}/{}", i, got.device_tag().Name(),
          got.memory_class().Name(), want.device_tag().Name(), want.memory_class().Name()));
    }
    if (got.sync_mode() != want.sync_mode()) {
      return InvalidArgumentError(
          fmt::format("buffer {}: sync_mode {} differs from the descriptor's {}", i,
                      SyncModeName(got.sync_mode()), SyncModeName(want.sync_mode())));
    }
  }
  return {};
}

std::vector<BufferPart> TensorDescriptor::BufferParts() const {
  // Create checked every rule BufferPartsOf checks: it cannot fail on a descriptor.
  Result<std::vector<BufferPart>> parts = internal::BufferPartsOf(parts_);
  return parts ? std::move(*parts) : std::vector<BufferPart>();
}

std::optional<BufferPart> TensorDescriptor::FindBufferPart(std::string_view part) const {
  for (BufferPart& found : BufferParts()) {
    if (found.part == part) return std::move(found);
  }
  return std::nullopt;
}

std::string TensorDescriptor::ToString() const {
  std::string text = fmt::format("{}{} {}", ElementTypeName(parts_.element_type),
                                 ShapeString(parts_.shape), LayoutName(parts_.layout));
  if (const auto* dense = std::get_if<DenseLayout>(&parts_.layout);
      dense != nullptr && !dense->strides.empty()) {
    text += fmt::format(" strides {}", ShapeString(dense->strides));
  }
  text += fmt::format(", {} {}\n", parts_.buffers.size(),
                      parts_.buffers.size() == 1 ? "buffer" : "buffers");
  text += fmt::format("  quantization: {}\n", internal::DescribeQuantization(parts_.quantization));
  const std::vector<BufferPart> roles = BufferParts();
  for (std::size_t i = 0; i < parts_.buffers.size(); ++i) {
    std::string_view role_name = "?";
    for (const BufferPart& role : roles) {
      if (role.index == i) role_name = role.name;
    }
    text += fmt::format("  buffer {} ({}): {}\n", i, role_name, parts_.buffers[i].ToString());
  }
  for (const auto& [key, value] : parts_.metadata) {
    text += fmt::format("  metadata {} = {}\n", key, value);
  }
  return text;
}

}  // namespace hurray
