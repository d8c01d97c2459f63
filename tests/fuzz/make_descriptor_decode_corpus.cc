// Writes the seed corpus of descriptor_decode_fuzzer into the directory given as its one
// argument: valid encodings of every layout, quantization, device and buffer-table shape the
// format has, built through TensorDescriptor::Create and Encode, and invalid variants made by
// editing the hurray.v1.TensorDescriptor message (or the bytes). Every seed is decoded before
// it is written; the run fails if a valid_ seed is refused or an invalid_ one accepted, and
// prints the error each invalid_ seed gets.
//
// Usage: make_descriptor_decode_corpus tests/fuzz/corpus/descriptor_decode
// Existing files of the same name are overwritten; others are left alone.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/descriptor_codec.h"
#include "hurray/tensor_descriptor.h"
#include "hurray/v1/descriptor.pb.h"

namespace hurray {
namespace {

using Parts = TensorDescriptor::Parts;

// A buffer declaration that must be valid: alignment 64 unless given, 1 when empty.
BufferHandle Buffer(std::uint64_t byte_size, std::uint64_t alignment = kMinBufferAlignment,
                    DeviceTag device_tag = DeviceTag::Cpu(),
                    SyncMode sync_mode = SyncMode::kProducerSynced,
                    MemoryClass memory_class = MemoryClass::Standard()) {
  auto buffer = BufferHandle::Create(byte_size, byte_size == 0 ? 1 : alignment, device_tag,
                                     sync_mode, memory_class);
  if (!buffer) {
    std::fprintf(stderr, "seed buffer: %s\n", buffer.error().ToString().c_str());
    std::exit(1);
  }
  return *buffer;
}

// Collects seeds, checks each against Decode and writes it. Not thread-safe.
class CorpusWriter {
 public:
  explicit CorpusWriter(std::filesystem::path directory) : directory_(std::move(directory)) {}

  // A descriptor that Create must accept; written as its encoding.
  void Valid(std::string_view name, Parts parts) {
    auto descriptor = TensorDescriptor::Create(std::move(parts));
    if (!descriptor) {
      Fail(name, "Create refused it: " + descriptor.error().ToString());
      return;
    }
    Write(name, descriptor->Encode(), /*expect_valid=*/true);
  }

  void Valid(std::string_view name, const Result<TensorDescriptor>& descriptor) {
    if (!descriptor) {
      Fail(name, "not built: " + descriptor.error().ToString());
      return;
    }
    Write(name, descriptor->Encode(), /*expect_valid=*/true);
  }

  void Invalid(std::string_view name, const v1::TensorDescriptor& message) {
    Write(name, message.SerializeAsString(), /*expect_valid=*/false);
  }

  void Invalid(std::string_view name, std::string bytes) {
    Write(name, std::move(bytes), /*expect_valid=*/false);
  }

  [[nodiscard]] int failures() const { return failures_; }
  [[nodiscard]] int written() const { return written_; }

 private:
  void Write(std::string_view name, std::string bytes, bool expect_valid) {
    auto decoded = TensorDescriptor::Decode(
        std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
    if (decoded.has_value() != expect_valid) {
      Fail(name,
           decoded ? "Decode accepted it" : "Decode refused it: " + decoded.error().ToString());
      return;
    }
    const std::filesystem::path path = directory_ / (std::string(name) + ".bin");
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!file) {
      Fail(name, "cannot write " + path.string());
      return;
    }
    ++written_;
    std::printf("%-48s %5zu bytes  %s\n", path.filename().c_str(), bytes.size(),
                decoded ? "ok" : decoded.error().message().c_str());
  }

  void Fail(std::string_view name, const std::string& why) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(name.size()), name.data(), why.c_str());
    ++failures_;
  }

  std::filesystem::path directory_;
  int failures_ = 0;
  int written_ = 0;
};

Parts Csr() {
  // [[1, 0, 2, 0], [0, 0, 3, 0], [4, 5, 0, 0]]: 5 stored values.
  Parts parts;
  parts.element_type = ElementType::kFloat32;
  parts.shape = {3, 4};
  parts.layout = CompressedLayout{.axis = CompressedAxis::kRows, .nnz = 5};
  parts.buffers = {Buffer(5 * 4), Buffer(4 * 8), Buffer(5 * 8)};
  return parts;
}

void WriteValidSeeds(CorpusWriter& corpus) {
  // Dense, every shape kind.
  corpus.Valid("valid_dense_float32", TensorDescriptor::Dense(ElementType::kFloat32, {4, 8}));
  corpus.Valid("valid_scalar_float64", TensorDescriptor::Dense(ElementType::kFloat64, {}));
  corpus.Valid("valid_empty_float32", TensorDescriptor::Dense(ElementType::kFloat32, {5, 0, 10}));
  corpus.Valid("valid_dense_int4_odd_count", TensorDescriptor::Dense(ElementType::kInt4, {3, 5}));
  corpus.Valid("valid_dense_rank64_uint8",
               TensorDescriptor::Dense(ElementType::kUint8, std::vector<std::uint64_t>(64, 1)));
  {
    Parts parts;  // Column-major [4, 8]: exactly the 32 elements.
    parts.shape = {4, 8};
    parts.layout = DenseLayout{.strides = {1, 4}};
    parts.buffers = {Buffer(32 * 4)};
    corpus.Valid("valid_dense_strided_float32", std::move(parts));
  }
  {
    Parts parts;  // A [3, 4] broadcast of one row of 4: 16 bytes needed, 64 declared.
    parts.element_type = ElementType::kInt32;
    parts.shape = {3, 4};
    parts.layout = DenseLayout{.strides = {0, 1}};
    parts.buffers = {Buffer(64)};
    corpus.Valid("valid_dense_strided_broadcast_int32", std::move(parts));
  }

  // Devices, memory classes and sync modes.
  {
    Parts parts;
    parts.element_type = ElementType::kFloat16;
    parts.shape = {128, 64};
    parts.buffers = {Buffer(128 * 64 * 2, kPageAlignment, DeviceTag::Cuda(), SyncMode::kEvent)};
    corpus.Valid("valid_cuda_float16_event", std::move(parts));
  }
  {
    Parts parts;
    parts.element_type = ElementType::kBfloat16;
    parts.shape = {1024};
    parts.buffers = {Buffer(2048, kPageAlignment, DeviceTag::Cuda(), SyncMode::kConsumerStream,
                            MemoryClass::Unified())};
    corpus.Valid("valid_cuda_unified_bfloat16_consumer_stream", std::move(parts));
  }
  {
    auto device = DeviceTag::FromByte(0xF2);
    auto memory_class = MemoryClass::FromByte(0xF1);
    Parts parts;
    parts.shape = {512};
    parts.buffers = {
        Buffer(2048, kMinBufferAlignment, *device, SyncMode::kProducerSynced, *memory_class)};
    corpus.Valid("valid_private_device_tag_float32", std::move(parts));
  }

  // Sparse layouts.
  {
    Parts parts;  // [[5, 0], [0, 7]]
    parts.shape = {2, 2};
    parts.layout = CooLayout{.nnz = 2};
    parts.buffers = {Buffer(2 * 4), Buffer(2 * 2 * 8)};
    corpus.Valid("valid_coo_float32", std::move(parts));
  }
  {
    Parts parts;
    parts.element_type = ElementType::kInt64;
    parts.shape = {1000, 1000, 3};
    parts.layout = CooLayout{.nnz = 0};
    parts.buffers = {Buffer(0), Buffer(0)};
    corpus.Valid("valid_coo_no_values_int64", std::move(parts));
  }
  corpus.Valid("valid_csr_float32", Csr());
  {
    Parts parts;  // The same matrix by columns, in float64.
    parts.element_type = ElementType::kFloat64;
    parts.shape = {3, 4};
    parts.layout = CompressedLayout{.axis = CompressedAxis::kColumns, .nnz = 5};
    parts.buffers = {Buffer(5 * 8), Buffer(5 * 8), Buffer(5 * 8)};
    corpus.Valid("valid_csc_float64", std::move(parts));
  }
  {
    Parts parts = Csr();  // Positional rule: buffers in the order secondary, values, primary.
    parts.layout = CompressedLayout{.axis = CompressedAxis::kRows,
                                    .values_buffer = 1,
                                    .primary_index_buffer = 2,
                                    .secondary_index_buffer = 0,
                                    .nnz = 5};
    parts.buffers = {Buffer(5 * 8), Buffer(5 * 4), Buffer(4 * 8)};
    corpus.Valid("valid_csr_buffers_permuted", std::move(parts));
  }
  {
    Parts parts;  // A KV cache: 10 rows in blocks of 4 (3 blocks) over 4 pages of 4x4x8.
    parts.element_type = ElementType::kFloat16;
    parts.shape = {10, 4, 8};
    parts.layout = BlockPagedLayout{.block_size = 4, .num_pages = 4};
    parts.buffers = {Buffer(4 * (4 * 4 * 8 * 2)), Buffer(3 * 8)};
    corpus.Valid("valid_block_paged_float16", std::move(parts));
  }
  {
    Parts parts;
    parts.element_type = ElementType::kFloat16;
    parts.shape = {0, 8};
    parts.layout = BlockPagedLayout{.block_size = 16, .num_pages = 0};
    parts.buffers = {Buffer(0), Buffer(0)};
    corpus.Valid("valid_block_paged_empty", std::move(parts));
  }

  // Quantizations.
  {
    Parts parts;
    parts.element_type = ElementType::kInt8;
    parts.shape = {64};
    parts.quantization = PerTensorAffine{.scale = 0.05, .zero_point = -3};
    parts.buffers = {Buffer(64)};
    corpus.Valid("valid_per_tensor_affine_int8", std::move(parts));
  }
  {
    Parts parts;
    parts.element_type = ElementType::kInt8;
    parts.shape = {16, 32};
    parts.quantization = PerChannelAffine{.axis = 1, .scale_type = ElementType::kFloat32};
    parts.buffers = {Buffer(16 * 32), Buffer(32 * 4)};
    corpus.Valid("valid_per_channel_affine_int8", std::move(parts));
  }
  {
    Parts parts;
    parts.element_type = ElementType::kUint8;
    parts.shape = {16, 32};
    parts.quantization =
        PerChannelAffine{.axis = 0,
                         .scale_buffer = 1,
                         .scale_type = ElementType::kFloat16,
                         .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kUint8}};
    parts.buffers = {Buffer(16 * 32), Buffer(16 * 2), Buffer(16)};
    corpus.Valid("valid_per_channel_affine_uint8_zero_points", std::move(parts));
  }
  {
    Parts parts;  // Four buffers: COO values and indices, then scales and zero points.
    parts.element_type = ElementType::kFloat8E4m3fn;
    parts.shape = {8, 6};
    parts.layout = CooLayout{.nnz = 3};
    parts.quantization =
        PerChannelAffine{.axis = 1,
                         .scale_buffer = 2,
                         .scale_type = ElementType::kBfloat16,
                         .zero_points = ZeroPoints{.buffer = 3, .type = ElementType::kFloat32}};
    parts.buffers = {Buffer(3), Buffer(3 * 2 * 8), Buffer(6 * 2), Buffer(6 * 4)};
    corpus.Valid("valid_per_channel_affine_float8_coo", std::move(parts));
  }
  {
    Parts parts;
    parts.element_type = ElementType::kNf4;
    parts.shape = {128, 64};
    parts.quantization = Nf4Quantization{.block_size = 64, .scale_type = ElementType::kFloat32};
    parts.buffers = {Buffer(128 * 64 / 2), Buffer(128 * 4)};
    corpus.Valid("valid_nf4_float32_scales", std::move(parts));
  }
  {
    Parts parts;  // 101 codes in 51 bytes; blocks of 64 leave a ragged second block.
    parts.element_type = ElementType::kNf4;
    parts.shape = {101};
    parts.quantization = Nf4Quantization{.block_size = 64, .scale_type = ElementType::kBfloat16};
    parts.buffers = {Buffer(51), Buffer(2 * 2)};
    corpus.Valid("valid_nf4_ragged_bfloat16_scales", std::move(parts));
  }
  {
    Parts parts;
    parts.element_type = ElementType::kMxfp4;
    parts.shape = {4, 64};
    parts.quantization = MxfpQuantization{.block_size = 32};
    parts.buffers = {Buffer(4 * 64 / 2), Buffer(4 * 2)};
    corpus.Valid("valid_mxfp4", std::move(parts));
  }
  {
    Parts parts;  // Rows of 40 in blocks of 32: two scales per row, 6 rows.
    parts.element_type = ElementType::kFloat8E5m2;
    parts.shape = {2, 3, 40};
    parts.quantization = MxfpQuantization{.block_size = 32};
    parts.buffers = {Buffer(2 * 3 * 40), Buffer(6 * 2)};
    corpus.Valid("valid_mxfp_float8_e5m2_ragged", std::move(parts));
  }

  {
    Parts parts;
    parts.shape = {4};
    parts.buffers = {Buffer(16)};
    parts.metadata = {{"producer", "make_descriptor_corpus"},
                      {"step", "12000"},
                      {"name", "layers.0.attn.q_proj.weight"},
                      {"note", "caf\xC3\xA9 \xE2\x9C\x93 \xF0\x9F\x93\xA6"},
                      {"empty", ""}};
    corpus.Valid("valid_metadata_float32", std::move(parts));
  }
}

void WriteInvalidSeeds(CorpusWriter& corpus) {
  auto dense = TensorDescriptor::Dense(ElementType::kFloat32, {4, 8});
  auto csr = TensorDescriptor::Create(Csr());
  if (!dense || !csr) {
    std::fprintf(stderr, "base descriptors not built\n");
    std::exit(1);
  }
  const v1::TensorDescriptor dense_message = DescriptorToProto(*dense);
  const v1::TensorDescriptor csr_message = DescriptorToProto(*csr);

  const std::string csr_bytes = csr->Encode();
  corpus.Invalid("invalid_truncated", csr_bytes.substr(0, csr_bytes.size() / 2));
  corpus.Invalid("invalid_empty_input", std::string());

  v1::TensorDescriptor message = csr_message;
  message.mutable_buffers()->RemoveLast();
  corpus.Invalid("invalid_buffer_count_missing", message);

  message = dense_message;
  *message.add_buffers() = message.buffers(0);
  corpus.Invalid("invalid_buffer_count_extra", message);

  message = csr_message;
  message.mutable_csr()->set_secondary_index_buffer(0);
  corpus.Invalid("invalid_buffer_referenced_twice", message);

  message = dense_message;
  message.mutable_buffers(0)->set_alignment(32);
  corpus.Invalid("invalid_alignment_32", message);

  message = csr_message;
  message.mutable_buffers(1)->set_byte_size(3 * 8);
  corpus.Invalid("invalid_byte_size_mismatch", message);

  message = dense_message;
  message.mutable_buffers(0)->set_device_tag(0x09);
  corpus.Invalid("invalid_reserved_device_tag_09", message);

  message = dense_message;
  message.mutable_buffers(0)->set_memory_class(0x04);
  corpus.Invalid("invalid_reserved_memory_class_04", message);

  message = dense_message;
  message.mutable_buffers(0)->set_sync_mode(0x03);
  corpus.Invalid("invalid_sync_mode_03", message);

  message = csr_message;
  message.mutable_buffers(2)->set_device_tag(0x01);
  corpus.Invalid("invalid_colocation_cuda_cpu", message);

  message = dense_message;
  message.clear_shape();
  for (int i = 0; i < 65; ++i) message.add_shape(1);
  corpus.Invalid("invalid_rank_65", message);

  message = dense_message;
  message.clear_shape();
  message.add_shape(std::uint64_t{1} << 32);
  message.add_shape(std::uint64_t{1} << 32);
  corpus.Invalid("invalid_shape_overflow", message);

  message = dense_message;
  message.set_element_type(v1::ELEMENT_TYPE_INT8);
  message.mutable_buffers(0)->set_byte_size(32);
  message.mutable_per_tensor_affine()->set_scale(0.0);
  corpus.Invalid("invalid_per_tensor_affine_scale_zero", message);

  message = dense_message;
  message.set_element_type(v1::ELEMENT_TYPE_NF4);
  message.mutable_buffers(0)->set_byte_size(16);
  corpus.Invalid("invalid_nf4_without_quantization", message);

  message = dense_message;
  (*message.mutable_metadata())[""] = "value";
  corpus.Invalid("invalid_metadata_empty_key", message);
}

}  // namespace
}  // namespace hurray

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
    return 2;
  }
  std::error_code error;
  std::filesystem::create_directories(argv[1], error);
  if (error) {
    std::fprintf(stderr, "%s: %s\n", argv[1], error.message().c_str());
    return 1;
  }
  hurray::CorpusWriter corpus(argv[1]);
  hurray::WriteValidSeeds(corpus);
  hurray::WriteInvalidSeeds(corpus);
  std::printf("%d seeds written, %d failures\n", corpus.written(), corpus.failures());
  return corpus.failures() == 0 ? 0 : 1;
}
