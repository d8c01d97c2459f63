#include "hurray/tensor_descriptor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray {
namespace {

constexpr auto kInvalid = StatusCode::kInvalidArgument;

BufferHandle Cpu(std::uint64_t byte_size, std::uint64_t alignment = 64) {
  return BufferHandle::Create(byte_size, byte_size == 0 ? 1 : alignment, DeviceTag::Cpu(),
                              SyncMode::kProducerSynced)
      .value();
}

TensorDescriptor::Parts DenseParts(ElementType type, std::vector<std::uint64_t> shape,
                                   std::vector<BufferHandle> buffers) {
  TensorDescriptor::Parts parts;
  parts.element_type = type;
  parts.shape = std::move(shape);
  parts.buffers = std::move(buffers);
  return parts;
}

// ---- Dense ----

TEST(TensorDescriptorTest, DenseBufferMustHoldExactlyTheShape) {
  EXPECT_OK(TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {2, 3}, {Cpu(24)})));
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {2, 3}, {Cpu(20)})),
               kInvalid, {"buffers[0].byte_size 20", "(data)", "24 bytes"});
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {2, 3}, {Cpu(28)})),
               kInvalid, {"buffers[0].byte_size 28"});
}

TEST(TensorDescriptorTest, DenseFactoryComputesTheSize) {
  auto descriptor = TensorDescriptor::Dense(ElementType::kBfloat16, {4, 8});
  ASSERT_OK(descriptor);
  ASSERT_EQ(descriptor->buffers().size(), 1u);
  EXPECT_EQ(descriptor->buffers()[0].byte_size(), 64u);
  EXPECT_EQ(descriptor->ElementCount(), 32u);
  EXPECT_EQ(descriptor->rank(), 2u);
}

TEST(TensorDescriptorTest, ImpliedBuffersFollowTheLayoutAndQuantization) {
  TensorDescriptor::Parts parts = DenseParts(ElementType::kInt8, {4, 3}, {});
  parts.quantization = PerChannelAffine{
      .axis = 0, .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kInt16}};
  auto descriptor = TensorDescriptor::WithImpliedBuffers(parts, DeviceTag::Cpu(), 128);
  ASSERT_OK(descriptor);
  ASSERT_EQ(descriptor->buffers().size(), 3u);
  EXPECT_EQ(descriptor->buffers()[0], Cpu(12, 128));
  EXPECT_EQ(descriptor->buffers()[1], Cpu(16, 128));  // four float32 scales
  EXPECT_EQ(descriptor->buffers()[2], Cpu(8, 128));   // four int16 zero points

  TensorDescriptor::Parts empty = DenseParts(ElementType::kFloat32, {0}, {});
  auto empty_descriptor = TensorDescriptor::WithImpliedBuffers(empty);
  ASSERT_OK(empty_descriptor);
  EXPECT_TRUE(empty_descriptor->buffers()[0].IsEmpty());
}

TEST(TensorDescriptorTest, ImpliedBuffersReportWhatCreateReports) {
  TensorDescriptor::Parts gap = DenseParts(ElementType::kInt8, {4}, {});
  gap.quantization = PerChannelAffine{.scale_buffer = 5};
  EXPECT_ERROR(TensorDescriptor::WithImpliedBuffers(gap), kInvalid, {"scale_buffer 5"});
  TensorDescriptor::Parts axis = DenseParts(ElementType::kInt8, {4}, {});
  axis.quantization = PerChannelAffine{.axis = 1};
  EXPECT_ERROR(TensorDescriptor::WithImpliedBuffers(axis), kInvalid, {"axis 1"});
  EXPECT_ERROR(TensorDescriptor::WithImpliedBuffers(DenseParts(ElementType::kInt8, {4}, {}),
                                                    DeviceTag::Cpu(), 32),
               kInvalid, {"buffers[0]", "32"});
}

TEST(TensorDescriptorTest, ScalarHasOneElement) {
  auto scalar = TensorDescriptor::Dense(ElementType::kFloat64, {});
  ASSERT_OK(scalar);
  EXPECT_EQ(scalar->rank(), 0u);
  EXPECT_EQ(scalar->ElementCount(), 1u);
  EXPECT_EQ(scalar->buffers()[0].byte_size(), 8u);
}

TEST(TensorDescriptorTest, EmptyTensorHasAnEmptyBuffer) {
  auto empty = TensorDescriptor::Dense(ElementType::kFloat32, {5, 0, 10});
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->buffers()[0].IsEmpty());
  EXPECT_EQ(empty->buffers()[0].alignment(), 1u);
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {5, 0}, {Cpu(64)})),
               kInvalid, {"byte_size 64"});
}

TEST(TensorDescriptorTest, PackedFourBitTypesRoundUp) {
  EXPECT_OK(TensorDescriptor::Create(DenseParts(ElementType::kInt4, {3, 3}, {Cpu(5)})));
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kUint4, {3, 3}, {Cpu(9)})),
               kInvalid, {"5 bytes"});
}

TEST(TensorDescriptorTest, StridesMustCoverTheirSpan) {
  auto parts = DenseParts(ElementType::kFloat32, {2, 3}, {Cpu(28)});
  // Row stride 4, column stride 1: the last element is at 1*4 + 2*1 = 6, a span of 7.
  parts.layout = DenseLayout{.data_buffer = 0, .strides = {4, 1}};
  EXPECT_OK(TensorDescriptor::Create(parts));
  parts.buffers = {Cpu(27)};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"buffers[0].byte_size 27", "below the 28 bytes"});
  parts.buffers = {Cpu(4096)};
  EXPECT_OK(TensorDescriptor::Create(parts));
}

TEST(TensorDescriptorTest, StridesNeedOnePerDimension) {
  auto parts = DenseParts(ElementType::kFloat32, {2, 3}, {Cpu(24)});
  parts.layout = DenseLayout{.data_buffer = 0, .strides = {3}};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"layout.dense.strides has 1 entries", "rank 2"});
}

TEST(TensorDescriptorTest, PackedTypesCannotBeStrided) {
  auto parts = DenseParts(ElementType::kInt4, {4}, {Cpu(2)});
  parts.layout = DenseLayout{.data_buffer = 0, .strides = {1}};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"int4", "cannot be strided"});
}

TEST(TensorDescriptorTest, StrideOverflowIsRejected) {
  auto parts = DenseParts(ElementType::kFloat32, {3}, {Cpu(64)});
  parts.layout =
      DenseLayout{.data_buffer = 0, .strides = {std::numeric_limits<std::uint64_t>::max()}};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"strides[0]", "overflows"});
}

// ---- Shape limits and overflow ----

TEST(TensorDescriptorTest, ElementCountOverflowIsRejected) {
  const std::uint64_t huge = std::uint64_t{1} << 40;
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kUint8, {huge, huge}, {Cpu(64)})),
               kInvalid, {"element count overflows"});
}

TEST(TensorDescriptorTest, ByteSizeOverflowIsRejected) {
  const std::uint64_t count = std::uint64_t{1} << 62;
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {count}, {Cpu(64)})),
               kInvalid, {"dense data", "overflows"});
  EXPECT_ERROR(TensorDescriptor::Dense(ElementType::kFloat32, {count}), kInvalid, {"overflows"});
}

TEST(TensorDescriptorTest, RankAboveTheLimitIsRejected) {
  std::vector<std::uint64_t> shape(kMaxRank + 1, 1);
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kUint8, shape, {Cpu(1)})), kInvalid,
               {"rank 65"});
  shape.pop_back();
  EXPECT_OK(TensorDescriptor::Create(DenseParts(ElementType::kUint8, shape, {Cpu(1)})));
}

// ---- The buffer table ----

TEST(TensorDescriptorTest, LayoutIndexMustResolve) {
  auto parts = DenseParts(ElementType::kFloat32, {4}, {Cpu(16)});
  parts.layout = DenseLayout{.data_buffer = 1, .strides = {}};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"layout.dense.data_buffer 1 does not resolve", "1 entries"});
}

TEST(TensorDescriptorTest, MissingBufferIsRejected) {
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {4}, {})), kInvalid,
               {"data_buffer 0 does not resolve", "0 entries"});
}

TEST(TensorDescriptorTest, UnreferencedExtraBufferIsRejected) {
  EXPECT_ERROR(TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {4}, {Cpu(16), Cpu(16)})),
               kInvalid, {"buffers[1] is not referenced"});
}

TEST(TensorDescriptorTest, OneBufferCannotPlayTwoRoles) {
  auto parts = DenseParts(ElementType::kInt8, {4, 4}, {Cpu(16), Cpu(16)});
  parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 0};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"scale_buffer 0 is already the data buffer"});
}

TEST(TensorDescriptorTest, BuffersMustBeColocated) {
  auto parts = DenseParts(ElementType::kInt8, {4, 4}, {Cpu(16)});
  parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 1};
  parts.buffers.push_back(
      *BufferHandle::Create(16, 64, DeviceTag::Cuda(), SyncMode::kProducerSynced));
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"buffer 1", "device_tag 0x01"});
  parts.buffers[1] = *BufferHandle::Create(16, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced,
                                           MemoryClass::HostPinned());
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"buffer 1", "memory_class 0x01"});
}

TEST(TensorDescriptorTest, SyncModesMayDifferBetweenBuffers) {
  auto parts = DenseParts(ElementType::kInt8, {4, 4}, {Cpu(16)});
  parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 1};
  parts.buffers.push_back(*BufferHandle::Create(16, 64, DeviceTag::Cpu(), SyncMode::kEvent));
  EXPECT_OK(TensorDescriptor::Create(parts));
}

// ---- Sparse and paged layouts ----

TEST(TensorDescriptorTest, CooNeedsValuesAndIndices) {
  auto parts = DenseParts(ElementType::kFloat32, {2, 2}, {Cpu(8), Cpu(32)});
  parts.layout = CooLayout{.values_buffer = 0, .indices_buffer = 1, .nnz = 2};
  EXPECT_OK(TensorDescriptor::Create(parts));
  parts.buffers[1] = Cpu(16);  // [nnz, rank] uint64 is 2 * 2 * 8 = 32 bytes.
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"buffers[1].byte_size 16", "COO indices", "32 bytes"});
  parts.buffers.pop_back();
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"layout.coo.indices_buffer 1 does not resolve"});
}

TEST(TensorDescriptorTest, CsrAndCscCompressDifferentDimensions) {
  // 3 x 5 with 4 stored values: CSR row offsets have 4 entries, CSC column offsets 6.
  auto parts = DenseParts(ElementType::kFloat64, {3, 5}, {Cpu(32), Cpu(32), Cpu(32)});
  parts.layout = CompressedLayout{.axis = CompressedAxis::kRows,
                                  .values_buffer = 0,
                                  .primary_index_buffer = 1,
                                  .secondary_index_buffer = 2,
                                  .nnz = 4};
  EXPECT_OK(TensorDescriptor::Create(parts));
  std::get<CompressedLayout>(parts.layout).axis = CompressedAxis::kColumns;
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"buffers[1].byte_size 32", "column offsets", "48 bytes"});
  parts.buffers[1] = Cpu(48);
  EXPECT_OK(TensorDescriptor::Create(parts));
}

TEST(TensorDescriptorTest, CompressedLayoutsNeedRankTwo) {
  auto parts = DenseParts(ElementType::kFloat32, {3, 5, 2}, {Cpu(4), Cpu(32), Cpu(8)});
  parts.layout = CompressedLayout{.axis = CompressedAxis::kRows,
                                  .values_buffer = 0,
                                  .primary_index_buffer = 1,
                                  .secondary_index_buffer = 2,
                                  .nnz = 1};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"layout.csr", "rank 3"});
}

TEST(TensorDescriptorTest, BlockPagedSizesFollowPagesAndBlocks) {
  // 10 rows of 8 float16 in blocks of 4 rows: 3 logical blocks, each page 4 * 8 * 2 = 64 B.
  auto parts = DenseParts(ElementType::kFloat16, {10, 8}, {Cpu(5 * 64), Cpu(3 * 8)});
  parts.layout =
      BlockPagedLayout{.data_buffer = 0, .page_table_buffer = 1, .block_size = 4, .num_pages = 5};
  EXPECT_OK(TensorDescriptor::Create(parts));
  parts.buffers[1] = Cpu(16);
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"page table", "24 bytes"});
}

TEST(TensorDescriptorTest, BlockPagedRejectsZeroBlockSizeAndNoPages) {
  auto parts = DenseParts(ElementType::kFloat16, {10, 8}, {Cpu(64), Cpu(24)});
  parts.layout =
      BlockPagedLayout{.data_buffer = 0, .page_table_buffer = 1, .block_size = 0, .num_pages = 1};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"block_size 0"});
  parts.layout =
      BlockPagedLayout{.data_buffer = 0, .page_table_buffer = 1, .block_size = 4, .num_pages = 0};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"num_pages 0", "3 blocks"});
}

TEST(TensorDescriptorTest, BlockPagedPagesMustEndOnAByte) {
  auto parts = DenseParts(ElementType::kInt4, {3}, {Cpu(1), Cpu(24)});
  parts.layout =
      BlockPagedLayout{.data_buffer = 0, .page_table_buffer = 1, .block_size = 1, .num_pages = 1};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"does not end on a byte"});
}

// ---- Quantization ----

TEST(TensorDescriptorTest, PerTensorAffineKeepsOneBuffer) {
  auto parts = DenseParts(ElementType::kUint8, {16}, {Cpu(16)});
  parts.quantization = PerTensorAffine{.scale = 0.05, .zero_point = 128};
  EXPECT_OK(TensorDescriptor::Create(parts));
  parts.buffers.push_back(Cpu(4));
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"buffers[1] is not referenced"});
}

TEST(TensorDescriptorTest, PerTensorAffineScaleMustBeFiniteAndNonZero) {
  auto parts = DenseParts(ElementType::kInt8, {16}, {Cpu(16)});
  for (double scale : {0.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    parts.quantization = PerTensorAffine{.scale = scale, .zero_point = 0};
    EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
                 {"per_tensor_affine.scale", "finite and non-zero"});
  }
}

TEST(TensorDescriptorTest, AffineQuantizationNeedsIntegerOrFloat8Storage) {
  auto parts = DenseParts(ElementType::kFloat32, {4}, {Cpu(16)});
  parts.quantization = PerTensorAffine{.scale = 1.0, .zero_point = 0};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"per_tensor_affine", "not float32"});
  parts = DenseParts(ElementType::kFloat8E4m3fn, {4}, {Cpu(4)});
  parts.quantization = PerTensorAffine{.scale = 1.0, .zero_point = 0};
  EXPECT_OK(TensorDescriptor::Create(parts));
}

TEST(TensorDescriptorTest, PerChannelScalesFollowTheAxis) {
  auto parts = DenseParts(ElementType::kInt8, {8, 4}, {Cpu(32), Cpu(32)});
  parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 1};
  EXPECT_OK(TensorDescriptor::Create(parts));  // 8 float32 scales.
  std::get<PerChannelAffine>(parts.quantization).axis = 1;
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"buffers[1].byte_size 32", "(scales)", "16 bytes"});
  std::get<PerChannelAffine>(parts.quantization).axis = 2;
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"axis 2 is out of range"});
}

TEST(TensorDescriptorTest, PerChannelScaleTypeMustBeAWideFloat) {
  auto parts = DenseParts(ElementType::kInt8, {8, 4}, {Cpu(32), Cpu(8)});
  parts.quantization =
      PerChannelAffine{.axis = 0, .scale_buffer = 1, .scale_type = ElementType::kInt8};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"scale_type int8"});
}

TEST(TensorDescriptorTest, PerChannelZeroPointsHaveTheirOwnBuffer) {
  auto parts = DenseParts(ElementType::kUint8, {8, 4}, {Cpu(32), Cpu(16), Cpu(8)});
  parts.quantization =
      PerChannelAffine{.axis = 0,
                       .scale_buffer = 1,
                       .scale_type = ElementType::kFloat16,
                       .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kUint8}};
  EXPECT_OK(TensorDescriptor::Create(parts));
  std::get<PerChannelAffine>(parts.quantization).zero_points->buffer = 3;
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"zero_point_buffer 3 does not resolve"});
  std::get<PerChannelAffine>(parts.quantization).zero_points =
      ZeroPoints{.buffer = 2, .type = ElementType::kInt4};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"zero_point_type int4"});
}

TEST(TensorDescriptorTest, PerChannelWorksOnSparseValues) {
  auto parts = DenseParts(ElementType::kInt8, {3, 5}, {Cpu(4), Cpu(32), Cpu(32), Cpu(12)});
  parts.layout = CompressedLayout{.axis = CompressedAxis::kRows,
                                  .values_buffer = 0,
                                  .primary_index_buffer = 1,
                                  .secondary_index_buffer = 2,
                                  .nnz = 4};
  parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 3};
  EXPECT_OK(TensorDescriptor::Create(parts));
}

TEST(TensorDescriptorTest, Nf4NeedsNf4ElementsAndScales) {
  // 256 codes in blocks of 64: 4 float32 scales.
  auto parts = DenseParts(ElementType::kNf4, {16, 16}, {Cpu(128), Cpu(16)});
  parts.quantization = Nf4Quantization{.block_size = 64, .scale_buffer = 1};
  EXPECT_OK(TensorDescriptor::Create(parts));
  std::get<Nf4Quantization>(parts.quantization).block_size = 100;  // ceil(256/100) = 3.
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"12 bytes"});
  std::get<Nf4Quantization>(parts.quantization).block_size = 0;
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"nf4.block_size 0"});
  parts.quantization = NoQuantization{};
  parts.buffers.pop_back();
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"nf4", "needs nf4 quantization"});
}

TEST(TensorDescriptorTest, Nf4RejectsOtherElementTypesAndScaleTypes) {
  auto parts = DenseParts(ElementType::kInt4, {16}, {Cpu(8), Cpu(4)});
  parts.quantization = Nf4Quantization{.block_size = 16, .scale_buffer = 1};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"needs element_type nf4", "int4"});
  parts.element_type = ElementType::kNf4;
  std::get<Nf4Quantization>(parts.quantization).scale_type = ElementType::kFloat64;
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"scale_type float64"});
}

TEST(TensorDescriptorTest, MxfpHasOneScalePerBlockOfEachRow) {
  // 4 rows of 40 mxfp4: ceil(40 / 32) = 2 scales per row, 8 one-byte scales.
  auto parts = DenseParts(ElementType::kMxfp4, {4, 40}, {Cpu(80), Cpu(8)});
  parts.quantization = MxfpQuantization{.block_size = 32, .scale_buffer = 1};
  EXPECT_OK(TensorDescriptor::Create(parts));
  parts.buffers[1] = Cpu(5);
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"8 bytes"});
  parts.element_type = ElementType::kInt8;
  parts.buffers = {Cpu(160), Cpu(8)};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"quantization.mxfp", "not int8"});
}

TEST(TensorDescriptorTest, BlockQuantizationNeedsDenseLayout) {
  auto parts = DenseParts(ElementType::kFloat8E4m3fn, {2, 32}, {Cpu(2), Cpu(32), Cpu(2)});
  parts.layout = CooLayout{.values_buffer = 0, .indices_buffer = 1, .nnz = 2};
  parts.quantization = MxfpQuantization{.block_size = 32, .scale_buffer = 2};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"needs the dense layout, not coo"});
}

TEST(TensorDescriptorTest, AZeroAnywhereMakesAnEmptyTensor) {
  const std::uint64_t big = std::uint64_t{1} << 32;
  auto first = TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {0, big, big}, {Cpu(0)}));
  auto last = TensorDescriptor::Create(DenseParts(ElementType::kFloat32, {big, big, 0}, {Cpu(0)}));
  EXPECT_OK(first);
  EXPECT_OK(last);
}

TEST(TensorDescriptorTest, OutOfRangeEnumeratorsAreRejected) {
  auto parts = DenseParts(static_cast<ElementType>(0), {4}, {Cpu(16)});
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"element_type", "tag 0"});
  parts = DenseParts(ElementType::kInt8, {4}, {Cpu(4), Cpu(16)});
  parts.quantization =
      PerChannelAffine{.axis = 0, .scale_buffer = 1, .scale_type = static_cast<ElementType>(200)};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"scale_type", "tag 200"});
  EXPECT_ERROR(BufferHandle::Create(64, 64, DeviceTag::Cpu(), static_cast<SyncMode>(9)), kInvalid,
               {"sync_mode 0x09"});
}

// ---- Metadata ----

TEST(TensorDescriptorTest, MetadataLimits) {
  auto parts = DenseParts(ElementType::kUint8, {1}, {Cpu(1)});
  parts.metadata = {{"step", "1200"}};
  EXPECT_OK(TensorDescriptor::Create(parts));
  parts.metadata = {{"", "x"}};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"metadata key of 0 bytes"});
  parts.metadata = {{std::string(kMaxMetadataKeyBytes + 1, 'k'), "x"}};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"257 bytes"});
  parts.metadata = {{"big", std::string(kMaxMetadataValueBytes + 1, 'v')}};
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"metadata[\"big\"]", "65537"});
  parts.metadata.clear();
  for (int i = 0; i < 9; ++i) {
    parts.metadata.emplace("k" + std::to_string(i), std::string(kMaxMetadataValueBytes, 'v'));
  }
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid,
               {"metadata holds", "above the limit 524288"});
  parts.metadata.clear();
  for (std::size_t i = 0; i <= kMaxMetadataEntries; ++i) {
    parts.metadata.emplace(std::to_string(i), "");
  }
  EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"257 entries"});
}

TEST(TensorDescriptorTest, MetadataMustBeUtf8) {
  auto parts = DenseParts(ElementType::kUint8, {1}, {Cpu(1)});
  parts.metadata = {{"name", "gr\xC3\xBC\xC3\x9F"}};  // Valid two-byte sequences.
  EXPECT_OK(TensorDescriptor::Create(parts));
  for (const char* bad : {"\xFF", "\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) {
    parts.metadata = {{"name", bad}};
    EXPECT_ERROR(TensorDescriptor::Create(parts), kInvalid, {"UTF-8"}) << "value " << bad;
  }
}

// ---- The consumer's check of delivered buffers ----

TEST(TensorDescriptorTest, DeliveredBuffersMustMatchTheTable) {
  auto parts = DenseParts(ElementType::kInt8, {8, 4}, {Cpu(32, 4096), Cpu(32)});
  parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 1};
  auto descriptor = TensorDescriptor::Create(parts);
  ASSERT_OK(descriptor);

  EXPECT_OK(descriptor->ValidateDeliveredBuffers(descriptor->buffers()));
  std::vector<BufferHandle> delivered = {Cpu(32, 4096)};
  EXPECT_ERROR(descriptor->ValidateDeliveredBuffers(delivered), kInvalid,
               {"has 1 buffers", "table has 2"});
  delivered = {Cpu(32, 4096), Cpu(16)};
  EXPECT_ERROR(descriptor->ValidateDeliveredBuffers(delivered), kInvalid,
               {"buffer 1: byte_size 16"});
  delivered = {Cpu(32, 64), Cpu(32)};
  EXPECT_ERROR(descriptor->ValidateDeliveredBuffers(delivered), kInvalid,
               {"buffer 0: alignment 64", "4096"});
  delivered = {Cpu(32, 8192), Cpu(32)};  // A stronger alignment is fine.
  EXPECT_OK(descriptor->ValidateDeliveredBuffers(delivered));
  delivered = {Cpu(32, 4096), *BufferHandle::Create(32, 64, DeviceTag::Cpu(), SyncMode::kEvent)};
  EXPECT_ERROR(descriptor->ValidateDeliveredBuffers(delivered), kInvalid,
               {"buffer 1: sync_mode event"});
}

// ---- The table of buffer parts ----

// The parts of the descriptor `parts` makes with its implied buffers, as (part, index, type,
// shape) tuples, and each part's byte size checked against its buffer's.
struct PartRow {
  std::string part;
  std::uint32_t index;
  ElementType type;
  std::vector<std::uint64_t> shape;
  friend bool operator==(const PartRow&, const PartRow&) = default;
  friend std::ostream& operator<<(std::ostream& out, const PartRow& row) {
    out << row.part << "@" << row.index << " " << ElementTypeName(row.type) << "[";
    for (const std::uint64_t dim : row.shape) out << dim << ",";
    return out << "]";
  }
};

std::vector<PartRow> PartRows(TensorDescriptor::Parts parts) {
  const TensorDescriptor descriptor =
      TensorDescriptor::WithImpliedBuffers(std::move(parts)).value();
  std::vector<PartRow> rows;
  for (const BufferPart& part : descriptor.BufferParts()) {
    EXPECT_EQ(part.byte_size, descriptor.buffers().at(part.index).byte_size()) << part.field;
    rows.push_back({std::string(part.part), part.index, part.element_type, part.shape});
  }
  EXPECT_EQ(rows.size(), descriptor.buffers().size());
  return rows;
}

TEST(TensorDescriptorTest, BufferPartsNameEachBufferWithItsArray) {
  constexpr ElementType kF32 = ElementType::kFloat32;
  constexpr ElementType kU64 = ElementType::kUint64;
  EXPECT_EQ(PartRows(DenseParts(kF32, {2, 3}, {})),
            (std::vector<PartRow>{{"data", 0, kF32, {2, 3}}}));

  TensorDescriptor::Parts coo = DenseParts(kF32, {4, 5, 6}, {});
  coo.layout = CooLayout{.values_buffer = 1, .indices_buffer = 0, .nnz = 7};
  EXPECT_EQ(PartRows(coo),
            (std::vector<PartRow>{{"values", 1, kF32, {7}}, {"indices", 0, kU64, {7, 3}}}));

  TensorDescriptor::Parts csc = DenseParts(ElementType::kInt32, {4, 6}, {});
  csc.layout = CompressedLayout{.axis = CompressedAxis::kColumns, .nnz = 5};
  EXPECT_EQ(PartRows(csc), (std::vector<PartRow>{{"values", 0, ElementType::kInt32, {5}},
                                                 {"indptr", 1, kU64, {7}},
                                                 {"indices", 2, kU64, {5}}}));

  TensorDescriptor::Parts paged = DenseParts(ElementType::kFloat16, {10, 2, 3}, {});
  paged.layout = BlockPagedLayout{.block_size = 4, .num_pages = 5};
  EXPECT_EQ(PartRows(paged), (std::vector<PartRow>{{"data", 0, ElementType::kFloat16, {5, 4, 2, 3}},
                                                   {"page_table", 1, kU64, {3}}}));

  TensorDescriptor::Parts channel = DenseParts(ElementType::kInt8, {3, 5}, {});
  channel.quantization =
      PerChannelAffine{.axis = 1,
                       .scale_type = ElementType::kBfloat16,
                       .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kInt16}};
  EXPECT_EQ(PartRows(channel),
            (std::vector<PartRow>{{"data", 0, ElementType::kInt8, {3, 5}},
                                  {"scales", 1, ElementType::kBfloat16, {5}},
                                  {"zero_points", 2, ElementType::kInt16, {5}}}));

  TensorDescriptor::Parts nf4 = DenseParts(ElementType::kNf4, {100}, {});
  nf4.quantization = Nf4Quantization{.block_size = 64, .scale_type = ElementType::kFloat16};
  EXPECT_EQ(PartRows(nf4), (std::vector<PartRow>{{"data", 0, ElementType::kNf4, {100}},
                                                 {"scales", 1, ElementType::kFloat16, {2}}}));

  TensorDescriptor::Parts mxfp = DenseParts(ElementType::kMxfp4, {4, 70}, {});
  mxfp.quantization = MxfpQuantization{.block_size = 32};
  EXPECT_EQ(PartRows(mxfp),
            (std::vector<PartRow>{{"data", 0, ElementType::kMxfp4, {4, 70}},
                                  {"scales", 1, ElementType::kFloat8E8m0, {4, 3}}}));
}

TEST(TensorDescriptorTest, BufferPartsCarryStridesAndFindByName) {
  TensorDescriptor::Parts strided = DenseParts(ElementType::kFloat32, {2, 3}, {});
  strided.layout = DenseLayout{.strides = {1, 2}};
  const TensorDescriptor descriptor = TensorDescriptor::WithImpliedBuffers(strided).value();
  const std::optional<BufferPart> data = descriptor.FindBufferPart("data");
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->element_strides, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_FALSE(data->exact);
  EXPECT_EQ(data->byte_size, 24u);  // The span the strides address: 1 + 1 + 2 * 2 elements.
  EXPECT_EQ(data->field, "layout.dense.data_buffer");
  EXPECT_FALSE(descriptor.FindBufferPart("scales").has_value());
  EXPECT_FALSE(descriptor.FindBufferPart("").has_value());
}

TEST(TensorDescriptorTest, ToStringNamesEveryBufferRole) {
  auto parts = DenseParts(ElementType::kFloat32, {2, 2}, {Cpu(8), Cpu(32)});
  parts.layout = CooLayout{.values_buffer = 0, .indices_buffer = 1, .nnz = 2};
  parts.metadata = {{"source", "unit test"}};
  auto descriptor = TensorDescriptor::Create(parts);
  ASSERT_OK(descriptor);
  const std::string text = descriptor->ToString();
  EXPECT_NE(text.find("float32[2, 2] coo"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer 1 (COO indices): 32 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("metadata source = unit test"), std::string::npos) << text;
}

}  // namespace
}  // namespace hurray
