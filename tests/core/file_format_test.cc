// FileWriter and FileReader: .hrry round trips and a refusal for every check the reader makes
// (docs/file-format.md).
#include "file_format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "hurray/descriptor_codec.h"
#include "hurray/file_reader.h"
#include "hurray/file_writer.h"
#include "hurray/v1/file.pb.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

// A tensor to save: its descriptor and the bytes of each buffer.
struct Saved {
  std::string name;
  TensorDescriptor descriptor;
  std::vector<std::vector<std::byte>> buffers;
};

// Bytes 0, 1, 2, ... (mod 251) from `seed`, so buffers differ from one another.
std::vector<std::byte> Pattern(std::uint64_t size, unsigned seed) {
  std::vector<std::byte> bytes(size);
  for (std::uint64_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i + seed) % 251);
  return bytes;
}

Saved Make(std::string name, Result<TensorDescriptor> descriptor) {
  EXPECT_OK(descriptor);
  std::vector<std::vector<std::byte>> buffers;
  auto seed = static_cast<unsigned>(name.size());
  for (const BufferHandle& buffer : descriptor->buffers()) {
    buffers.push_back(Pattern(buffer.byte_size(), seed++));
  }
  return {std::move(name), *std::move(descriptor), std::move(buffers)};
}

Saved PerChannelQuantized() {
  TensorDescriptor::Parts parts{.element_type = ElementType::kInt8, .shape = {4, 8}};
  parts.quantization =
      PerChannelAffine{.axis = 0,
                       .scale_buffer = 1,
                       .scale_type = ElementType::kFloat32,
                       .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kInt8}};
  return Make("model/quantized", TensorDescriptor::WithImpliedBuffers(std::move(parts)));
}

Saved CooSparse() {
  TensorDescriptor::Parts parts{.element_type = ElementType::kFloat32, .shape = {100, 100}};
  parts.layout = CooLayout{.values_buffer = 0, .indices_buffer = 1, .nnz = 700};
  return Make("model/sparse", TensorDescriptor::WithImpliedBuffers(std::move(parts)));
}

Saved BlockPaged() {
  TensorDescriptor::Parts parts{.element_type = ElementType::kFloat16, .shape = {64, 128}};
  parts.layout =
      BlockPagedLayout{.data_buffer = 0, .page_table_buffer = 1, .block_size = 16, .num_pages = 5};
  return Make("model/paged", TensorDescriptor::WithImpliedBuffers(std::move(parts)));
}

Saved DenseWithMetadata() {
  TensorDescriptor::Parts parts{.element_type = ElementType::kFloat32, .shape = {3, 1000}};
  parts.metadata = {{"source", "unit test"}, {"layer", "7"}};
  return Make("model/dense", TensorDescriptor::WithImpliedBuffers(std::move(parts)));
}

Saved Empty() {
  return Make("model/empty", TensorDescriptor::Dense(ElementType::kFloat32, {0, 4}));
}

std::vector<std::span<const std::byte>> Spans(const Saved& tensor) {
  return {tensor.buffers.begin(), tensor.buffers.end()};
}

class FileFormatTest : public ::testing::Test {
 protected:
  // A directory of the test's own (core's tests build without the service test harness).
  void SetUp() override {
    std::string pattern = std::filesystem::temp_directory_path() / "hrry-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = dir_ / "model.hrry";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Save(const std::vector<Saved>& tensors) {
    ASSERT_OK_AND_ASSIGN(auto writer, FileWriter::Create(path_));
    for (const Saved& tensor : tensors) {
      ASSERT_OK(writer.WriteTensor(tensor.name, tensor.descriptor, Spans(tensor)));
    }
    ASSERT_OK(writer.Finish());
  }

  [[nodiscard]] std::vector<std::byte> FileBytes() const {
    std::ifstream file(path_, std::ios::binary);
    std::vector<char> chars{std::istreambuf_iterator<char>(file), {}};
    std::vector<std::byte> bytes(chars.size());
    std::ranges::transform(chars, bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
    return bytes;
  }

  void WriteBytes(std::span<const std::byte> bytes) const {
    std::ofstream file(path_, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }

  // Replaces the saved file's index with `encoded`, with a header that fits it.
  void ReplaceIndex(const std::string& encoded) {
    std::vector<std::byte> bytes = FileBytes();
    auto header = internal::DecodeFileHeader(std::span(bytes).first<internal::kFileHeaderBytes>(),
                                             bytes.size());
    ASSERT_OK(header);
    bytes.resize(header->index_offset);
    for (char c : encoded) bytes.push_back(static_cast<std::byte>(c));
    header->index_size = encoded.size();
    header->index_checksum = internal::FileChecksum(std::as_bytes(std::span(encoded)));
    std::ranges::copy(internal::EncodeFileHeader(*header), bytes.begin());
    WriteBytes(bytes);
  }

  // Saves a COO and a dense tensor, then rewrites the index through `edit`.
  void SaveWithIndex(const std::function<void(v1::FileIndex&)>& edit) {
    Save({CooSparse(), DenseWithMetadata()});
    ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(path_));
    v1::FileIndex index;
    for (const FileTensorEntry& entry : reader.tensors()) {
      v1::FileTensor* tensor = index.add_tensors();
      tensor->set_name(entry.name);
      *tensor->mutable_tensor_descriptor() = DescriptorToProto(entry.descriptor);
      for (const FileBufferEntry& buffer : entry.buffers) {
        v1::FileBuffer* message = tensor->add_buffers();
        message->set_offset(buffer.file_offset);
        message->set_byte_size(buffer.byte_size);
        message->set_xxh3_64(buffer.checksum);
      }
    }
    edit(index);
    ReplaceIndex(index.SerializeAsString());
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(FileFormatTest, MultiBufferTensorsRoundTripByteForByte) {
  const std::vector<Saved> saved = {PerChannelQuantized(), CooSparse(), BlockPaged(),
                                    DenseWithMetadata(), Empty()};
  Save(saved);
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(path_));
  ASSERT_EQ(reader.tensors().size(), saved.size());
  std::vector<std::vector<std::vector<std::byte>>> read(saved.size());
  std::vector<FileReader::BufferDestination> destinations;
  for (std::size_t t = 0; t < saved.size(); ++t) {
    const FileTensorEntry& entry = reader.tensors()[t];
    EXPECT_EQ(entry.name, saved[t].name);
    EXPECT_EQ(entry.descriptor, saved[t].descriptor);
    ASSERT_EQ(entry.buffers.size(), saved[t].buffers.size());
    for (const auto& buffer : entry.buffers) {
      EXPECT_EQ(buffer.file_offset % kFileBufferAlignment, 0U);
      read[t].emplace_back(buffer.byte_size);
    }
    for (std::size_t b = 0; b < entry.buffers.size(); ++b) {
      destinations.push_back({.tensor = t, .buffer = b, .destination = read[t][b]});
    }
  }
  ASSERT_OK(reader.ReadBuffers(destinations));
  for (std::size_t t = 0; t < saved.size(); ++t) EXPECT_EQ(read[t], saved[t].buffers) << t;
  EXPECT_EQ(saved[3].descriptor.metadata().at("layer"), "7");
}

TEST_F(FileFormatTest, FileWithoutTensorsOpensEmpty) {
  Save({});
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(path_));
  EXPECT_TRUE(reader.tensors().empty());
  EXPECT_EQ(reader.file_size(), internal::kFileHeaderBytes);
}

TEST_F(FileFormatTest, WriterCountsTensorsAndBytes) {
  const Saved coo = CooSparse();
  ASSERT_OK_AND_ASSIGN(auto writer, FileWriter::Create(path_));
  ASSERT_OK(writer.WriteTensor(coo.name, coo.descriptor, Spans(coo)));
  EXPECT_EQ(writer.tensor_count(), 1U);
  EXPECT_EQ(writer.data_bytes(), coo.buffers[0].size() + coo.buffers[1].size());
}

TEST_F(FileFormatTest, WriterRefusesBufferCountThatDisagreesWithDescriptor) {
  const Saved quantized = PerChannelQuantized();
  ASSERT_OK_AND_ASSIGN(auto writer, FileWriter::Create(path_));
  auto spans = Spans(quantized);
  spans.pop_back();
  EXPECT_ERROR(writer.WriteTensor(quantized.name, quantized.descriptor, spans),
               StatusCode::kInvalidArgument, {"2 buffers given", "buffer table has 3"});
  EXPECT_EQ(writer.tensor_count(), 0U);
}

TEST_F(FileFormatTest, WriterRefusesBufferOfWrongSize) {
  Saved coo = CooSparse();
  coo.buffers[1].pop_back();
  ASSERT_OK_AND_ASSIGN(auto writer, FileWriter::Create(path_));
  EXPECT_ERROR(writer.WriteTensor(coo.name, coo.descriptor, Spans(coo)),
               StatusCode::kInvalidArgument,
               {"buffers[1]", "holds 11199 bytes", "byte_size is 11200"});
}

TEST_F(FileFormatTest, WriterRefusesDuplicateAndEmptyNames) {
  const Saved coo = CooSparse();
  ASSERT_OK_AND_ASSIGN(auto writer, FileWriter::Create(path_));
  ASSERT_OK(writer.WriteTensor(coo.name, coo.descriptor, Spans(coo)));
  EXPECT_ERROR(writer.WriteTensor(coo.name, coo.descriptor, Spans(coo)), StatusCode::kAlreadyExists,
               {"model/sparse"});
  EXPECT_ERROR(writer.WriteTensor("", coo.descriptor, Spans(coo)), StatusCode::kInvalidArgument,
               {"name is empty"});
}

TEST_F(FileFormatTest, FinishedWriterRefusesMore) {
  const Saved coo = CooSparse();
  ASSERT_OK_AND_ASSIGN(auto writer, FileWriter::Create(path_));
  ASSERT_OK(writer.Finish());
  EXPECT_ERROR(writer.WriteTensor(coo.name, coo.descriptor, Spans(coo)),
               StatusCode::kFailedPrecondition);
  EXPECT_ERROR(writer.Finish(), StatusCode::kFailedPrecondition);
}

TEST_F(FileFormatTest, UnfinishedWriterLeavesNoFile) {
  {
    const Saved coo = CooSparse();
    ASSERT_OK_AND_ASSIGN(auto writer, FileWriter::Create(path_));
    ASSERT_OK(writer.WriteTensor(coo.name, coo.descriptor, Spans(coo)));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(FileFormatTest, OpenRefusesFileShorterThanHeader) {
  WriteBytes(std::vector<std::byte>(10));
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument, {"10 bytes", "header"});
}

TEST_F(FileFormatTest, OpenRefusesTruncatedFile) {
  Save({CooSparse()});
  std::vector<std::byte> bytes = FileBytes();
  bytes.pop_back();
  WriteBytes(bytes);
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"index_offset", "does not end at the end"});
}

TEST_F(FileFormatTest, OpenRefusesBadMagic) {
  Save({CooSparse()});
  std::vector<std::byte> bytes = FileBytes();
  bytes[0] = std::byte{'X'};
  WriteBytes(bytes);
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument, {"magic"});
}

TEST_F(FileFormatTest, OpenRefusesUnknownVersionFlagsAndReservedBytes) {
  Save({CooSparse()});
  const std::vector<std::byte> good = FileBytes();
  const std::pair<std::size_t, std::string_view> kEdits[] = {
      {8, "format version 2"}, {12, "flags"}, {63, "reserved"}};
  for (const auto& [offset, fragment] : kEdits) {
    std::vector<std::byte> bytes = good;
    bytes[offset] = std::byte{offset == 8 ? std::uint8_t{2} : std::uint8_t{1}};
    WriteBytes(bytes);
    EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument, {fragment});
  }
}

TEST_F(FileFormatTest, OpenRefusesIndexChecksumMismatchAsDataLoss) {
  Save({CooSparse()});
  std::vector<std::byte> bytes = FileBytes();
  bytes.back() ^= std::byte{0x01};
  WriteBytes(bytes);
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kDataLoss, {"index checksum"});
}

TEST_F(FileFormatTest, OpenRefusesOverlappingBuffers) {
  SaveWithIndex([](v1::FileIndex& index) {
    index.mutable_tensors(1)->mutable_buffers(0)->set_offset(index.tensors(0).buffers(1).offset());
  });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"tensors[", "overlaps", "model/sparse"});
}

TEST_F(FileFormatTest, OpenRefusesUnalignedBuffer) {
  SaveWithIndex([](v1::FileIndex& index) {
    auto* buffer = index.mutable_tensors(0)->mutable_buffers(0);
    buffer->set_offset(buffer->offset() + 64);
  });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"tensors[0] (model/sparse): buffers[0]: offset", "multiple of 4096"});
}

TEST_F(FileFormatTest, OpenRefusesBufferOutsideTheData) {
  SaveWithIndex([](v1::FileIndex& index) {
    index.mutable_tensors(1)->mutable_buffers(0)->set_offset(std::uint64_t{1} << 40);
  });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"tensors[1] (model/dense): buffers[0]", "runs past the data"});
}

TEST_F(FileFormatTest, OpenRefusesBufferCountThatDisagreesWithDescriptor) {
  SaveWithIndex(
      [](v1::FileIndex& index) { index.mutable_tensors(0)->mutable_buffers()->RemoveLast(); });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"model/sparse", "1 buffers saved", "buffer table has 2"});
}

TEST_F(FileFormatTest, OpenRefusesBufferSizeThatDisagreesWithDescriptor) {
  SaveWithIndex(
      [](v1::FileIndex& index) { index.mutable_tensors(0)->mutable_buffers(1)->set_byte_size(8); });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"buffers[1]: byte_size 8 differs"});
}

TEST_F(FileFormatTest, OpenRefusesDuplicateNames) {
  SaveWithIndex([](v1::FileIndex& index) { index.mutable_tensors(1)->set_name("model/sparse"); });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"tensors[1] (model/sparse)", "already used"});
}

TEST_F(FileFormatTest, OpenRefusesNameWithNul) {
  SaveWithIndex(
      [](v1::FileIndex& index) { index.mutable_tensors(0)->set_name(std::string("a\0b", 3)); });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument, {"NUL"});
}

TEST_F(FileFormatTest, OpenRefusesMissingOrInvalidDescriptor) {
  SaveWithIndex([](v1::FileIndex& index) { index.mutable_tensors(0)->clear_tensor_descriptor(); });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument, {"descriptor is missing"});
  SaveWithIndex([](v1::FileIndex& index) {
    index.mutable_tensors(0)->mutable_tensor_descriptor()->mutable_buffers(0)->set_alignment(3);
  });
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"tensors[0] (model/sparse): descriptor:"});
}

TEST_F(FileFormatTest, OpenRefusesIndexThatDoesNotParse) {
  Save({CooSparse()});
  // Field 1 (tensors) claims a length far past the index's end.
  ReplaceIndex("\x0a\xff\xff\xff\xff\x0f");
  EXPECT_ERROR(FileReader::Open(path_), StatusCode::kInvalidArgument,
               {"not a hurray.v1.FileIndex"});
}

TEST_F(FileFormatTest, ReadBuffersReportsChecksumMismatchAsDataLoss) {
  Save({CooSparse()});
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(path_));
  const std::uint64_t offset = reader.tensors()[0].buffers[1].file_offset;
  std::vector<std::byte> bytes = FileBytes();
  bytes[offset + 5] ^= std::byte{0x40};
  WriteBytes(bytes);
  std::vector<std::byte> values(reader.tensors()[0].buffers[0].byte_size);
  std::vector<std::byte> indices(reader.tensors()[0].buffers[1].byte_size);
  const FileReader::BufferDestination destinations[] = {{0, 0, values}, {0, 1, indices}};
  EXPECT_ERROR(reader.ReadBuffers(destinations), StatusCode::kDataLoss,
               {"tensors[0] (model/sparse): buffers[1]: checksum"});
}

TEST_F(FileFormatTest, ReadBuffersRefusesBadIndicesAndSizesBeforeReading) {
  Save({CooSparse()});
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(path_));
  std::vector<std::byte> memory(reader.tensors()[0].buffers[0].byte_size);
  const FileReader::BufferDestination past_tensors[] = {{1, 0, memory}};
  EXPECT_ERROR(reader.ReadBuffers(past_tensors), StatusCode::kOutOfRange, {"tensor 1"});
  const FileReader::BufferDestination past_buffers[] = {{0, 2, memory}};
  EXPECT_ERROR(reader.ReadBuffers(past_buffers), StatusCode::kOutOfRange, {"buffer 2"});
  const FileReader::BufferDestination wrong_size[] = {{0, 1, memory}};
  EXPECT_ERROR(reader.ReadBuffers(wrong_size), StatusCode::kInvalidArgument, {"destination of"});
}

}  // namespace
}  // namespace hurray
