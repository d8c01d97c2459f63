#include "hurray/descriptor_codec.h"

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

namespace hurray {
namespace {

constexpr std::uint32_t kMaxByte = 0xFF;

// A proto enum or uint32 field that must hold a valid element type.
Result<ElementType> ElementTypeField(int value, std::string_view field) {
  if (value == 0) return InvalidArgumentError(fmt::format("{} is unspecified", field));
  if (value < 0 || static_cast<std::uint32_t>(value) > kMaxByte) {
    return InvalidArgumentError(fmt::format("{} {} names no element type", field, value));
  }
  auto type = ElementTypeFromTag(static_cast<std::uint8_t>(value));
  if (!type) return InvalidArgumentError(fmt::format("{} {} names no element type", field, value));
  return *type;
}

// A uint32 field that carries a one-byte tag.
Result<std::uint8_t> ByteField(std::uint32_t value, std::size_t buffer, std::string_view name) {
  if (value > kMaxByte) {
    return InvalidArgumentError(
        fmt::format("buffers[{}].{} {} does not fit in one byte", buffer, name, value));
  }
  return static_cast<std::uint8_t>(value);
}

Result<BufferHandle> BufferFromProto(const v1::BufferHandle& message, std::size_t index) {
  // Built only for an error: this runs for every buffer of every descriptor decoded.
  const auto context = [index] { return fmt::format("buffers[{}]", index); };
  auto device_byte = ByteField(message.device_tag(), index, "device_tag");
  if (!device_byte) return std::unexpected(device_byte.error());
  auto memory_byte = ByteField(message.memory_class(), index, "memory_class");
  if (!memory_byte) return std::unexpected(memory_byte.error());
  auto sync_byte = ByteField(message.sync_mode(), index, "sync_mode");
  if (!sync_byte) return std::unexpected(sync_byte.error());
  auto device_tag = DeviceTag::FromByte(*device_byte);
  if (!device_tag) return std::unexpected(device_tag.error().WithContext(context()));
  auto memory_class = MemoryClass::FromByte(*memory_byte);
  if (!memory_class) return std::unexpected(memory_class.error().WithContext(context()));
  auto sync_mode = SyncModeFromByte(*sync_byte);
  if (!sync_mode) return std::unexpected(sync_mode.error().WithContext(context()));
  auto handle = BufferHandle::Create(message.byte_size(), message.alignment(), *device_tag,
                                     *sync_mode, *memory_class);
  if (!handle) return std::unexpected(handle.error().WithContext(context()));
  return *handle;
}

CompressedLayout CompressedFromProto(const v1::CompressedLayout& message, CompressedAxis axis) {
  return CompressedLayout{.axis = axis,
                          .values_buffer = message.values_buffer(),
                          .primary_index_buffer = message.primary_index_buffer(),
                          .secondary_index_buffer = message.secondary_index_buffer(),
                          .nnz = message.nnz()};
}

Layout LayoutFromProto(const v1::TensorDescriptor& message) {
  switch (message.layout_case()) {
    case v1::TensorDescriptor::kDense:
      return DenseLayout{
          .data_buffer = message.dense().data_buffer(),
          .strides = {message.dense().strides().begin(), message.dense().strides().end()}};
    case v1::TensorDescriptor::kCoo:
      return CooLayout{.values_buffer = message.coo().values_buffer(),
                       .indices_buffer = message.coo().indices_buffer(),
                       .nnz = message.coo().nnz()};
    case v1::TensorDescriptor::kCsr:
      return CompressedFromProto(message.csr(), CompressedAxis::kRows);
    case v1::TensorDescriptor::kCsc:
      return CompressedFromProto(message.csc(), CompressedAxis::kColumns);
    case v1::TensorDescriptor::kBlockPaged:
      return BlockPagedLayout{.data_buffer = message.block_paged().data_buffer(),
                              .page_table_buffer = message.block_paged().page_table_buffer(),
                              .block_size = message.block_paged().block_size(),
                              .num_pages = message.block_paged().num_pages()};
    case v1::TensorDescriptor::LAYOUT_NOT_SET:
      break;
  }
  return DenseLayout{};
}

Result<Quantization> QuantizationFromProto(const v1::TensorDescriptor& message) {
  switch (message.quantization_case()) {
    case v1::TensorDescriptor::kPerTensorAffine:
      return PerTensorAffine{.scale = message.per_tensor_affine().scale(),
                             .zero_point = message.per_tensor_affine().zero_point()};
    case v1::TensorDescriptor::kPerChannelAffine: {
      const auto& q = message.per_channel_affine();
      auto scale_type =
          ElementTypeField(q.scale_type(), "quantization.per_channel_affine.scale_type");
      if (!scale_type) return std::unexpected(scale_type.error());
      PerChannelAffine affine{.axis = q.axis(),
                              .scale_buffer = q.scale_buffer(),
                              .scale_type = *scale_type,
                              .zero_points = std::nullopt};
      if (q.has_zero_point_buffer()) {
        auto type = ElementTypeField(q.zero_point_type(),
                                     "quantization.per_channel_affine.zero_point_type");
        if (!type) return std::unexpected(type.error());
        affine.zero_points = ZeroPoints{.buffer = q.zero_point_buffer(), .type = *type};
      } else if (q.zero_point_type() != v1::ELEMENT_TYPE_UNSPECIFIED) {
        return InvalidArgumentError(
            fmt::format("quantization.per_channel_affine.zero_point_type {} is set but "
                        "zero_point_buffer is not",
                        static_cast<int>(q.zero_point_type())));
      }
      return affine;
    }
    case v1::TensorDescriptor::kNf4: {
      auto scale_type = ElementTypeField(message.nf4().scale_type(), "quantization.nf4.scale_type");
      if (!scale_type) return std::unexpected(scale_type.error());
      return Nf4Quantization{.block_size = message.nf4().block_size(),
                             .scale_buffer = message.nf4().scale_buffer(),
                             .scale_type = *scale_type};
    }
    case v1::TensorDescriptor::kMxfp:
      return MxfpQuantization{.block_size = message.mxfp().block_size(),
                              .scale_buffer = message.mxfp().scale_buffer()};
    case v1::TensorDescriptor::QUANTIZATION_NOT_SET:
      break;
  }
  return NoQuantization{};
}

void CompressedToProto(const CompressedLayout& layout, v1::CompressedLayout* message) {
  message->set_values_buffer(layout.values_buffer);
  message->set_primary_index_buffer(layout.primary_index_buffer);
  message->set_secondary_index_buffer(layout.secondary_index_buffer);
  message->set_nnz(layout.nnz);
}

v1::ElementType ElementTypeToProto(ElementType type) {
  return static_cast<v1::ElementType>(ElementTypeTag(type));
}

}  // namespace

Result<TensorDescriptor> DescriptorFromProto(const v1::TensorDescriptor& message) {
  TensorDescriptor::Parts parts;
  auto element_type = ElementTypeField(message.element_type(), "element_type");
  if (!element_type) return std::unexpected(element_type.error());
  parts.element_type = *element_type;
  if (static_cast<std::size_t>(message.shape_size()) > kMaxRank) {
    return InvalidArgumentError(
        fmt::format("shape has rank {}, above the limit {}", message.shape_size(), kMaxRank));
  }
  parts.shape.assign(message.shape().begin(), message.shape().end());
  parts.layout = LayoutFromProto(message);
  auto quantization = QuantizationFromProto(message);
  if (!quantization) return std::unexpected(quantization.error());
  parts.quantization = *quantization;
  parts.buffers.reserve(static_cast<std::size_t>(message.buffers_size()));
  for (int i = 0; i < message.buffers_size(); ++i) {
    auto buffer = BufferFromProto(message.buffers(i), static_cast<std::size_t>(i));
    if (!buffer) return std::unexpected(buffer.error());
    parts.buffers.push_back(*buffer);
  }
  if (static_cast<std::size_t>(message.metadata_size()) > kMaxMetadataEntries) {
    return InvalidArgumentError(fmt::format("metadata has {} entries, above the limit {}",
                                            message.metadata_size(), kMaxMetadataEntries));
  }
  for (const auto& [key, value] : message.metadata()) parts.metadata.emplace(key, value);
  return TensorDescriptor::Create(std::move(parts));
}

namespace {

// Writes a descriptor's layout into its message (std::visit over the layout variant).
struct LayoutWriter {
  v1::TensorDescriptor& message;
  void operator()(const DenseLayout& layout) const {
    auto* dense = message.mutable_dense();
    dense->set_data_buffer(layout.data_buffer);
    for (std::uint64_t stride : layout.strides) dense->add_strides(stride);
  }
  void operator()(const CooLayout& layout) const {
    auto* coo = message.mutable_coo();
    coo->set_values_buffer(layout.values_buffer);
    coo->set_indices_buffer(layout.indices_buffer);
    coo->set_nnz(layout.nnz);
  }
  void operator()(const CompressedLayout& layout) const {
    CompressedToProto(layout, layout.axis == CompressedAxis::kRows ? message.mutable_csr()
                                                                   : message.mutable_csc());
  }
  void operator()(const BlockPagedLayout& layout) const {
    auto* paged = message.mutable_block_paged();
    paged->set_data_buffer(layout.data_buffer);
    paged->set_page_table_buffer(layout.page_table_buffer);
    paged->set_block_size(layout.block_size);
    paged->set_num_pages(layout.num_pages);
  }
};

// Writes a descriptor's quantization into its message.
struct QuantizationWriter {
  v1::TensorDescriptor& message;
  void operator()(const NoQuantization&) const {}
  void operator()(const PerTensorAffine& q) const {
    message.mutable_per_tensor_affine()->set_scale(q.scale);
    message.mutable_per_tensor_affine()->set_zero_point(q.zero_point);
  }
  void operator()(const PerChannelAffine& q) const {
    auto* affine = message.mutable_per_channel_affine();
    affine->set_axis(q.axis);
    affine->set_scale_buffer(q.scale_buffer);
    affine->set_scale_type(ElementTypeToProto(q.scale_type));
    if (q.zero_points) {
      affine->set_zero_point_buffer(q.zero_points->buffer);
      affine->set_zero_point_type(ElementTypeToProto(q.zero_points->type));
    }
  }
  void operator()(const Nf4Quantization& q) const {
    message.mutable_nf4()->set_block_size(q.block_size);
    message.mutable_nf4()->set_scale_buffer(q.scale_buffer);
    message.mutable_nf4()->set_scale_type(ElementTypeToProto(q.scale_type));
  }
  void operator()(const MxfpQuantization& q) const {
    message.mutable_mxfp()->set_block_size(q.block_size);
    message.mutable_mxfp()->set_scale_buffer(q.scale_buffer);
  }
};

}  // namespace

v1::TensorDescriptor DescriptorToProto(const TensorDescriptor& descriptor) {
  v1::TensorDescriptor message;
  message.set_element_type(ElementTypeToProto(descriptor.element_type()));
  for (std::uint64_t dim : descriptor.shape()) message.add_shape(dim);

  std::visit(LayoutWriter{message}, descriptor.layout());
  std::visit(QuantizationWriter{message}, descriptor.quantization());
  for (const BufferHandle& buffer : descriptor.buffers()) {
    auto* entry = message.add_buffers();
    entry->set_byte_size(buffer.byte_size());
    entry->set_alignment(buffer.alignment());
    entry->set_device_tag(buffer.device_tag().ToByte());
    entry->set_memory_class(buffer.memory_class().ToByte());
    entry->set_sync_mode(SyncModeToByte(buffer.sync_mode()));
  }
  for (const auto& [key, value] : descriptor.metadata()) (*message.mutable_metadata())[key] = value;
  return message;
}

Result<TensorDescriptor> TensorDescriptor::Decode(std::span<const std::uint8_t> bytes) {
  if (bytes.size() > kMaxEncodedDescriptorBytes) {
    return InvalidArgumentError(fmt::format("descriptor of {} bytes is above the limit {}",
                                            bytes.size(), kMaxEncodedDescriptorBytes));
  }
  v1::TensorDescriptor message;
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgumentError(fmt::format(
        "descriptor: {} bytes do not parse as a hurray.v1.TensorDescriptor", bytes.size()));
  }
  return DescriptorFromProto(message);
}

std::string TensorDescriptor::Encode() const {
  const v1::TensorDescriptor message = DescriptorToProto(*this);
  // Deterministic, so equal descriptors always encode to equal bytes (map order included).
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

}  // namespace hurray
