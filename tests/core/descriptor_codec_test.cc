#include "hurray/descriptor_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray {
namespace {

constexpr auto kInvalid = StatusCode::kInvalidArgument;

BufferHandle Cpu(std::uint64_t byte_size) {
  return BufferHandle::Create(byte_size, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced).value();
}

std::span<const std::uint8_t> AsBytes(const std::string& bytes) {
  return {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
}

Result<TensorDescriptor> DecodeMessage(const v1::TensorDescriptor& message) {
  const std::string bytes = message.SerializeAsString();
  return TensorDescriptor::Decode(AsBytes(bytes));
}

// A valid float32[4] dense message to break one field at a time.
v1::TensorDescriptor DenseMessage() {
  v1::TensorDescriptor message;
  message.set_element_type(v1::ELEMENT_TYPE_FLOAT32);
  message.add_shape(4);
  auto* buffer = message.add_buffers();
  buffer->set_byte_size(16);
  buffer->set_alignment(64);
  return message;
}

void ExpectRoundTrip(const TensorDescriptor::Parts& parts) {
  auto descriptor = TensorDescriptor::Create(parts);
  ASSERT_OK(descriptor);
  const std::string bytes = descriptor->Encode();
  auto decoded = TensorDescriptor::Decode(AsBytes(bytes));
  ASSERT_OK(decoded);
  EXPECT_EQ(*decoded, *descriptor) << descriptor->ToString();
  EXPECT_EQ(decoded->Encode(), bytes);
}

TEST(DescriptorCodecTest, EveryLayoutRoundTrips) {
  TensorDescriptor::Parts parts;
  parts.element_type = ElementType::kFloat32;
  parts.shape = {2, 3};
  parts.layout = DenseLayout{.data_buffer = 0, .strides = {3, 1}};
  parts.buffers = {Cpu(24)};
  ExpectRoundTrip(parts);

  parts.layout = CooLayout{.values_buffer = 1, .indices_buffer = 0, .nnz = 2};
  parts.buffers = {Cpu(32), Cpu(8)};
  ExpectRoundTrip(parts);

  parts.layout = CompressedLayout{.axis = CompressedAxis::kColumns,
                                  .values_buffer = 0,
                                  .primary_index_buffer = 1,
                                  .secondary_index_buffer = 2,
                                  .nnz = 2};
  parts.buffers = {Cpu(8), Cpu(32), Cpu(16)};
  ExpectRoundTrip(parts);
  std::get<CompressedLayout>(parts.layout).axis = CompressedAxis::kRows;
  parts.buffers = {Cpu(8), Cpu(24), Cpu(16)};
  ExpectRoundTrip(parts);

  parts.layout =
      BlockPagedLayout{.data_buffer = 0, .page_table_buffer = 1, .block_size = 1, .num_pages = 3};
  parts.buffers = {Cpu(36), Cpu(16)};
  ExpectRoundTrip(parts);
}

TEST(DescriptorCodecTest, EveryQuantizationRoundTrips) {
  TensorDescriptor::Parts parts;
  parts.element_type = ElementType::kInt8;
  parts.shape = {4, 8};
  parts.buffers = {Cpu(32)};
  parts.quantization = PerTensorAffine{.scale = 0.125, .zero_point = -3};
  ExpectRoundTrip(parts);

  parts.quantization =
      PerChannelAffine{.axis = 1,
                       .scale_buffer = 1,
                       .scale_type = ElementType::kBfloat16,
                       .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kInt32}};
  parts.buffers = {Cpu(32), Cpu(16), Cpu(32)};
  ExpectRoundTrip(parts);

  parts.element_type = ElementType::kNf4;
  parts.quantization =
      Nf4Quantization{.block_size = 16, .scale_buffer = 1, .scale_type = ElementType::kFloat16};
  parts.buffers = {Cpu(16), Cpu(4)};
  ExpectRoundTrip(parts);

  parts.element_type = ElementType::kMxfp4;
  parts.quantization = MxfpQuantization{.block_size = 4, .scale_buffer = 1};
  parts.buffers = {Cpu(16), Cpu(8)};
  ExpectRoundTrip(parts);
}

TEST(DescriptorCodecTest, TagsAndMetadataRoundTrip) {
  TensorDescriptor::Parts parts;
  parts.element_type = ElementType::kComplex64;
  parts.shape = {2};
  parts.buffers = {*BufferHandle::Create(16, 4096, *DeviceTag::FromByte(0xF3),
                                         SyncMode::kConsumerStream, *MemoryClass::FromByte(0xF1))};
  parts.metadata = {{"zeta", "last"}, {"alpha", "first"}, {"unicode", "\xE2\x9C\x93"}};
  ExpectRoundTrip(parts);
}

TEST(DescriptorCodecTest, EncodingIsDeterministic) {
  auto one = TensorDescriptor::Dense(ElementType::kUint8, {3});
  ASSERT_OK(one);
  TensorDescriptor::Parts parts = one->parts();
  for (int i = 0; i < 50; ++i) parts.metadata.emplace("key" + std::to_string(i), "value");
  auto many = TensorDescriptor::Create(parts);
  ASSERT_OK(many);
  const std::string first = many->Encode();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(many->Encode(), first);
  EXPECT_EQ(DescriptorToProto(*many).metadata_size(), 50);
}

TEST(DescriptorCodecTest, LargestValidDescriptorStillDecodes) {
  // Metadata at its total limit, every other field near its largest: what Create accepts,
  // Decode must accept again.
  TensorDescriptor::Parts parts;
  parts.element_type = ElementType::kUint8;
  parts.shape.assign(kMaxRank, 1);
  parts.layout =
      DenseLayout{.data_buffer = 0, .strides = std::vector<std::uint64_t>(kMaxRank, UINT32_MAX)};
  parts.buffers = {Cpu(1)};
  std::size_t total = 0;
  for (int i = 0; total + 70000 <= kMaxMetadataTotalBytes; ++i) {
    std::string key = "key-" + std::to_string(i) + std::string(200, 'k');
    total += key.size() + kMaxMetadataValueBytes;
    parts.metadata.emplace(std::move(key), std::string(kMaxMetadataValueBytes, 'v'));
  }
  auto descriptor = TensorDescriptor::Create(parts);
  ASSERT_OK(descriptor);
  const std::string bytes = descriptor->Encode();
  EXPECT_LT(bytes.size(), kMaxEncodedDescriptorBytes);
  ASSERT_OK(TensorDescriptor::Decode(AsBytes(bytes)));
}

TEST(DescriptorCodecTest, AbsentLayoutMeansDenseInBufferZero) {
  auto decoded = DecodeMessage(DenseMessage());
  ASSERT_OK(decoded);
  const auto* dense = std::get_if<DenseLayout>(&decoded->layout());
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->data_buffer, 0u);
  EXPECT_TRUE(dense->strides.empty());
  EXPECT_TRUE(std::holds_alternative<NoQuantization>(decoded->quantization()));
}

TEST(DescriptorCodecTest, ElementTypeMustBeKnown) {
  auto message = DenseMessage();
  message.set_element_type(v1::ELEMENT_TYPE_UNSPECIFIED);
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"element_type is unspecified"});
  message.set_element_type(static_cast<v1::ElementType>(23));
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"element_type 23 names no element type"});
  message.set_element_type(static_cast<v1::ElementType>(300));
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"element_type 300"});
  message.set_element_type(static_cast<v1::ElementType>(-1));
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"element_type -1"});
}

TEST(DescriptorCodecTest, BufferTagsAreCheckedAsBytes) {
  auto message = DenseMessage();
  message.mutable_buffers(0)->set_device_tag(0x101);
  EXPECT_ERROR(DecodeMessage(message), kInvalid,
               {"buffers[0].device_tag 257 does not fit in one byte"});
  message = DenseMessage();
  message.mutable_buffers(0)->set_device_tag(0x09);
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"buffers[0]: device_tag 0x09 is reserved"});
  message = DenseMessage();
  message.mutable_buffers(0)->set_memory_class(0xFF);
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"buffers[0]: memory_class 0xFF is invalid"});
  message = DenseMessage();
  message.mutable_buffers(0)->set_memory_class(0x1FF);
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"memory_class 511 does not fit"});
  message = DenseMessage();
  message.mutable_buffers(0)->set_sync_mode(7);
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"buffers[0]: sync_mode 0x07"});
  message = DenseMessage();
  message.mutable_buffers(0)->set_alignment(32);
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"buffers[0]: alignment 32", "minimum 64"});
}

TEST(DescriptorCodecTest, ZeroPointTypeAndBufferGoTogether) {
  v1::TensorDescriptor message;
  message.set_element_type(v1::ELEMENT_TYPE_INT8);
  message.add_shape(4);
  for (std::uint64_t size : {4, 16, 4}) {
    auto* buffer = message.add_buffers();
    buffer->set_byte_size(size);
    buffer->set_alignment(64);
  }
  auto* affine = message.mutable_per_channel_affine();
  affine->set_axis(0);
  affine->set_scale_buffer(1);
  affine->set_scale_type(v1::ELEMENT_TYPE_FLOAT32);
  affine->set_zero_point_buffer(2);
  affine->set_zero_point_type(v1::ELEMENT_TYPE_INT8);
  EXPECT_OK(DecodeMessage(message));

  affine->clear_zero_point_type();
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"zero_point_type is unspecified"});
  affine->clear_zero_point_buffer();
  affine->set_zero_point_type(v1::ELEMENT_TYPE_INT8);
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"zero_point_type 2 is set"});
  affine->clear_zero_point_type();
  affine->clear_scale_type();
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"scale_type is unspecified"});
}

TEST(DescriptorCodecTest, GarbageAndOversizedBytesAreRejected) {
  const std::string garbage = "\xFF\xFF\xFF\xFF\xFF\xFF\xFF";
  EXPECT_ERROR(TensorDescriptor::Decode(AsBytes(garbage)), kInvalid,
               {"do not parse as a hurray.v1.TensorDescriptor"});
  EXPECT_ERROR(TensorDescriptor::Decode({}), kInvalid, {"element_type is unspecified"});
  const std::string huge(kMaxEncodedDescriptorBytes + 1, '\0');
  EXPECT_ERROR(TensorDescriptor::Decode(AsBytes(huge)), kInvalid, {"above the limit"});
}

TEST(DescriptorCodecTest, TruncatedEncodingIsRejected) {
  auto descriptor = TensorDescriptor::Dense(ElementType::kFloat32, {128, 128});
  ASSERT_OK(descriptor);
  const std::string bytes = descriptor->Encode();
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    auto decoded = TensorDescriptor::Decode(AsBytes(bytes).first(length));
    EXPECT_FALSE(decoded.has_value()) << "prefix of " << length << " bytes decoded";
  }
}

TEST(DescriptorCodecTest, RankLimitIsCheckedBeforeCopying) {
  auto message = DenseMessage();
  for (std::size_t i = 0; i < kMaxRank; ++i) message.add_shape(1);
  EXPECT_ERROR(DecodeMessage(message), kInvalid, {"rank 65"});
}

}  // namespace
}  // namespace hurray
