#include "hurray/tensor_descriptor.h"

#include <cmath>
#include <optional>

#include "buffer_roles.h"
#include "checked_math.h"
#include "str_cat.h"

namespace hurray {
namespace {

using internal::BufferRole;
using internal::CheckedProduct;
using internal::StrCat;

std::string ShapeString(std::span<const std::uint64_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
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
    return InvalidArgumentError(StrCat("metadata has ", metadata.size(),
                                       " entries, above the limit ", kMaxMetadataEntries));
  }
  std::size_t total = 0;
  for (const auto& [key, value] : metadata) {
    total += key.size() + value.size();
    if (key.empty() || key.size() > kMaxMetadataKeyBytes) {
      return InvalidArgumentError(StrCat("metadata key of ", key.size(),
                                         " bytes is outside 1..", kMaxMetadataKeyBytes));
    }
    if (value.size() > kMaxMetadataValueBytes) {
      return InvalidArgumentError(StrCat("metadata[\"", key, "\"]: value of ", value.size(),
                                         " bytes is above the limit ", kMaxMetadataValueBytes));
    }
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
      return InvalidArgumentError("metadata: keys and values must be valid UTF-8");
    }
  }
  if (total > kMaxMetadataTotalBytes) {
    return InvalidArgumentError(StrCat("metadata holds ", total, " bytes of keys and values, ",
                                       "above the limit ", kMaxMetadataTotalBytes));
  }
  return {};
}

// Every role's buffer index resolves, no buffer plays two roles, every buffer plays one,
// and each buffer's size is the one its role requires.
Status CheckBufferTable(const std::vector<BufferRole>& roles,
                        const std::vector<BufferHandle>& buffers) {
  std::vector<const BufferRole*> role_of_buffer(buffers.size(), nullptr);
  for (const BufferRole& role : roles) {
    if (role.index >= buffers.size()) {
      return InvalidArgumentError(StrCat(role.field, " ", role.index,
                                         " does not resolve: the buffer table has ",
                                         buffers.size(), " entries"));
    }
    if (role_of_buffer[role.index] != nullptr) {
      return InvalidArgumentError(StrCat(role.field, " ", role.index, " is already the ",
                                         role_of_buffer[role.index]->name,
                                         " buffer; each buffer has one role"));
    }
    role_of_buffer[role.index] = &role;
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (role_of_buffer[i] == nullptr) {
      return InvalidArgumentError(
          StrCat("buffers[", i, "] is not referenced by the layout or the quantization"));
    }
    const BufferRole& role = *role_of_buffer[i];
    const std::uint64_t actual = buffers[i].byte_size();
    if (role.exact && actual != role.byte_size) {
      return InvalidArgumentError(StrCat("buffers[", i, "].byte_size ", actual, " (", role.name,
                                         ") differs from the ", role.byte_size,
                                         " bytes the descriptor implies"));
    }
    if (!role.exact && actual < role.byte_size) {
      return InvalidArgumentError(StrCat("buffers[", i, "].byte_size ", actual, " (", role.name,
                                         ") is below the ", role.byte_size,
                                         " bytes the strides address"));
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
        StrCat("shape has rank ", parts.shape.size(), ", above the limit ", kMaxRank));
  }
  if (!CheckedProduct(parts.shape)) {
    return InvalidArgumentError(StrCat("shape ", ShapeString(parts.shape),
                                       ": element count overflows 64 bits"));
  }
  auto roles = internal::BufferRoles(parts);
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
    return InvalidArgumentError(StrCat("shape ", ShapeString(shape), " of ",
                                       ElementTypeName(element_type),
                                       ": byte size overflows 64 bits"));
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
  return parts_.buffers.empty() ? MemoryClass::Standard()
                                : parts_.buffers.front().memory_class();
}

std::uint64_t TensorDescriptor::ElementCount() const {
  return CheckedProduct(parts_.shape).value_or(0);
}

Status TensorDescriptor::ValidateDeliveredBuffers(
    std::span<const BufferHandle> delivered) const {
  const auto& table = parts_.buffers;
  if (delivered.size() != table.size()) {
    return InvalidArgumentError(StrCat("buffer list has ", delivered.size(),
                                       " buffers but the descriptor's buffer table has ",
                                       table.size()));
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    const BufferHandle& got = delivered[i];
    const BufferHandle& want = table[i];
    if (got.byte_size() != want.byte_size()) {
      return InvalidArgumentError(StrCat("buffer ", i, ": byte_size ", got.byte_size(),
                                         " differs from the descriptor's ", want.byte_size()));
    }
    if (got.alignment() < want.alignment()) {
      return InvalidArgumentError(StrCat("buffer ", i, ": alignment ", got.alignment(),
                                         " is below the descriptor's ", want.alignment()));
    }
    if (got.device_tag() != want.device_tag() || got.memory_class() != want.memory_class()) {
      return InvalidArgumentError(StrCat("buffer ", i, ": ", got.device_tag().Name(), "/",
                                         got.memory_class().Name(), " differs from the ",
                                         "descriptor's ", want.device_tag().Name(), "/",
                                         want.memory_class().Name()));
    }
    if (got.sync_mode() != want.sync_mode()) {
      return InvalidArgumentError(StrCat("buffer ", i, ": sync_mode ",
                                         SyncModeName(got.sync_mode()), " differs from the ",
                                         "descriptor's ", SyncModeName(want.sync_mode())));
    }
  }
  return {};
}

std::string TensorDescriptor::ToString() const {
  std::string text = StrCat(ElementTypeName(parts_.element_type), ShapeString(parts_.shape),
                            " ", LayoutName(parts_.layout));
  if (const auto* dense = std::get_if<DenseLayout>(&parts_.layout);
      dense != nullptr && !dense->strides.empty()) {
    text += StrCat(" strides ", ShapeString(dense->strides));
  }
  text += StrCat(", ", parts_.buffers.size(),
                 parts_.buffers.size() == 1 ? " buffer\n" : " buffers\n");
  text += StrCat("  quantization: ", internal::DescribeQuantization(parts_.quantization), "\n");
  const auto roles = internal::BufferRoles(parts_);
  for (std::size_t i = 0; i < parts_.buffers.size(); ++i) {
    std::string_view role_name = "?";
    if (roles) {
      for (const BufferRole& role : *roles) {
        if (role.index == i) role_name = role.name;
      }
    }
    text += StrCat("  buffer ", i, " (", role_name, "): ", parts_.buffers[i].ToString(), "\n");
  }
  for (const auto& [key, value] : parts_.metadata) {
    text += StrCat("  metadata ", key, " = ", value, "\n");
  }
  return text;
}

}  // namespace hurray
