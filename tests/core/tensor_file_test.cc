// TensorFile: a .safetensors file, a sharded model through its index and a .hrry file, each
// opened, listed and read byte for byte; the index's consistency refusals; Read's checks of
// its destinations.
#include "hurray/tensor_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "hurray/file_writer.h"
#include "testing/safetensors_writer.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

using testing::PatternBytes;
using testing::SafetensorsTensorSpec;

SafetensorsTensorSpec Spec(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                           std::size_t bytes, std::uint32_t seed) {
  return {.name = std::move(name),
          .dtype = std::move(dtype),
          .shape = std::move(shape),
          .bytes = PatternBytes(bytes, seed)};
}

// Memory for every buffer of every tensor of `file`, and the spans Read takes.
struct Destinations {
  explicit Destinations(const TensorFile& file) {
    for (const TensorFile::Tensor& tensor : file.tensors()) {
      auto& tensor_memory = memory.emplace_back();
      auto& tensor_spans = spans.emplace_back();
      for (const BufferHandle& buffer : tensor.descriptor.buffers()) {
        tensor_memory.emplace_back(buffer.byte_size());
      }
      for (auto& bytes : tensor_memory) tensor_spans.emplace_back(bytes);
    }
  }
  std::vector<std::vector<std::vector<std::byte>>> memory;
  std::vector<std::vector<std::span<std::byte>>> spans;
};

class TensorFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = std::filesystem::temp_directory_path() / "tensor-file-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  [[nodiscard]] std::string Path(std::string_view name) const { return dir_ / name; }

  // A two-shard model: shard 1 holds a and b, shard 2 holds c; `index_json` is the index.
  void WriteShards() {
    ASSERT_OK(testing::WriteSafetensors(Path("model-1.safetensors"), shard1_));
    ASSERT_OK(testing::WriteSafetensors(Path("model-2.safetensors"), shard2_));
  }
  std::string Index(std::string_view weight_map) {
    const std::string path = Path("model.safetensors.index.json");
    EXPECT_OK(testing::WriteFileBytes(
        path, std::string(R"({"metadata": {"total_size": 0}, "weight_map": )") +
                  std::string(weight_map) + "}"));
    return path;
  }
  static constexpr std::string_view kGoodMap =
      R"({"a": "model-1.safetensors", "b": "model-1.safetensors", "c": "model-2.safetensors"})";

  std::filesystem::path dir_;
  std::vector<SafetensorsTensorSpec> shard1_ = {Spec("a", "F32", {4, 3}, 48, 1),
                                                Spec("b", "BF16", {10}, 20, 2)};
  std::vector<SafetensorsTensorSpec> shard2_ = {Spec("c", "I64", {2, 2}, 32, 3)};
};

TEST_F(TensorFileTest, SafetensorsFileListsItsTensorsAndReadsEveryByte) {
  const std::vector<SafetensorsTensorSpec> specs = {
      Spec("layer.0.weight", "F16", {8, 4}, 64, 7), Spec("layer.0.bias", "F32", {8}, 32, 8),
      Spec("mask", "BOOL", {5}, 5, 9), Spec("empty", "U8", {0}, 0, 10)};
  ASSERT_OK(testing::WriteSafetensors(Path("model.safetensors"), specs));
  ASSERT_OK_AND_ASSIGN(const TensorFile file, TensorFile::Open(Path("model.safetensors")));
  EXPECT_EQ(file.format(), TensorFile::Format::kSafetensors);
  ASSERT_EQ(file.tensors().size(), specs.size());
  EXPECT_EQ(file.total_bytes(), 64U + 32U + 5U);
  Destinations destinations(file);
  std::vector<std::uint64_t> progress;
  ASSERT_OK(file.Read(destinations.spans,
                      {.progress = [&](std::uint64_t done) { progress.push_back(done); }}));
  for (std::size_t i = 0; i < file.tensors().size(); ++i) {
    const auto spec =
        std::ranges::find(specs, file.tensors()[i].name, &SafetensorsTensorSpec::name);
    ASSERT_NE(spec, specs.end());
    EXPECT_EQ(destinations.memory[i][0], spec->bytes) << spec->name;
  }
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), file.total_bytes());
}

TEST_F(TensorFileTest, ShardedModelReadsEveryShardThroughItsIndex) {
  WriteShards();
  ASSERT_OK_AND_ASSIGN(const TensorFile file, TensorFile::Open(Index(kGoodMap)));
  EXPECT_EQ(file.format(), TensorFile::Format::kSafetensorsIndex);
  ASSERT_EQ(file.tensors().size(), 3U);
  EXPECT_EQ(file.total_bytes(), 48U + 20U + 32U);
  Destinations destinations(file);
  std::uint64_t last_progress = 0;
  ASSERT_OK(file.Read(destinations.spans,
                      {.progress = [&](std::uint64_t done) { last_progress = done; }}));
  EXPECT_EQ(last_progress, file.total_bytes());
  std::vector<SafetensorsTensorSpec> all = shard1_;
  all.insert(all.end(), shard2_.begin(), shard2_.end());
  for (std::size_t i = 0; i < file.tensors().size(); ++i) {
    const auto spec = std::ranges::find(all, file.tensors()[i].name, &SafetensorsTensorSpec::name);
    ASSERT_NE(spec, all.end());
    EXPECT_EQ(destinations.memory[i][0], spec->bytes) << spec->name;
  }
}

TEST_F(TensorFileTest, IndexEntryItsShardDoesNotHoldIsRefused) {
  WriteShards();
  EXPECT_ERROR(TensorFile::Open(Index(
                   R"({"a": "model-1.safetensors", "b": "model-1.safetensors",
                       "c": "model-2.safetensors", "d": "model-2.safetensors"})")),
               StatusCode::kInvalidArgument, {"weight_map entry \"d\"", "model-2.safetensors"});
}

TEST_F(TensorFileTest, ShardTensorMissingFromTheWeightMapIsRefused) {
  WriteShards();
  EXPECT_ERROR(
      TensorFile::Open(Index(R"({"a": "model-1.safetensors", "c": "model-2.safetensors"})")),
      StatusCode::kInvalidArgument, {"model-1.safetensors", "tensor \"b\"", "weight_map"});
}

TEST_F(TensorFileTest, TensorInAShardOtherThanTheWeightMapSaysIsRefused) {
  WriteShards();
  EXPECT_ERROR(TensorFile::Open(Index(R"({"a": "model-1.safetensors", "b": "model-2.safetensors",
                                          "c": "model-2.safetensors"})")),
               StatusCode::kInvalidArgument,
               {"tensor \"b\"", "puts it in \"model-2.safetensors\""});
}

TEST_F(TensorFileTest, TensorNameInTwoShardsIsRefused) {
  shard2_.push_back(Spec("a", "F32", {4, 3}, 48, 4));
  WriteShards();
  // The weight_map can name "a" once only, so the second shard's copy is misplaced.
  EXPECT_ERROR(TensorFile::Open(Index(kGoodMap)), StatusCode::kInvalidArgument,
               {"model-2.safetensors", "tensor \"a\""});
}

TEST_F(TensorFileTest, MissingShardIsNotFoundNamingIt) {
  ASSERT_OK(testing::WriteSafetensors(Path("model-1.safetensors"), shard1_));
  EXPECT_ERROR(TensorFile::Open(Index(kGoodMap)), StatusCode::kNotFound, {"model-2.safetensors"});
}

TEST_F(TensorFileTest, ShardNameWithADirectoryIsRefused) {
  WriteShards();
  EXPECT_ERROR(TensorFile::Open(Index(R"({"a": "../model-1.safetensors"})")),
               StatusCode::kInvalidArgument, {"model.safetensors.index.json"});
}

TEST_F(TensorFileTest, MissingFileIsNotFoundNamingIt) {
  EXPECT_ERROR(TensorFile::Open(Path("absent.safetensors")), StatusCode::kNotFound,
               {"absent.safetensors"});
}

TEST_F(TensorFileTest, BrokenFixturesAreRefusedNamingTheFile) {
  for (const char* name : {"byte_length_mismatch", "header_length_past_file", "invalid_json",
                           "offsets_outside_data", "overlapping_offsets", "unknown_dtype"}) {
    const std::string path = std::string(HURRAY_SAFETENSORS_FIXTURES) + "/" + name + ".safetensors";
    EXPECT_ERROR(TensorFile::Open(path), StatusCode::kInvalidArgument, {name}) << name;
  }
}

TEST_F(TensorFileTest, HrryFileReadsEveryBufferOfAMultiBufferTensor) {
  TensorDescriptor::Parts parts{.element_type = ElementType::kInt8, .shape = {4, 8}};
  parts.quantization =
      PerChannelAffine{.axis = 0,
                       .scale_buffer = 1,
                       .scale_type = ElementType::kFloat32,
                       .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kInt8}};
  ASSERT_OK_AND_ASSIGN(const TensorDescriptor descriptor,
                       TensorDescriptor::WithImpliedBuffers(std::move(parts)));
  std::vector<std::vector<std::byte>> buffers;
  for (const BufferHandle& buffer : descriptor.buffers()) {
    buffers.push_back(PatternBytes(buffer.byte_size(), static_cast<std::uint32_t>(buffers.size())));
  }
  {
    ASSERT_OK_AND_ASSIGN(auto writer, FileWriter::Create(Path("model.hrry")));
    const std::vector<std::span<const std::byte>> spans(buffers.begin(), buffers.end());
    ASSERT_OK(writer.WriteTensor("model/quantized", descriptor, spans));
    ASSERT_OK(writer.Finish());
  }
  ASSERT_OK_AND_ASSIGN(const TensorFile file, TensorFile::Open(Path("model.hrry")));
  EXPECT_EQ(file.format(), TensorFile::Format::kHrry);
  ASSERT_EQ(file.tensors().size(), 1U);
  EXPECT_EQ(file.tensors()[0].name, "model/quantized");
  EXPECT_EQ(file.tensors()[0].descriptor, descriptor);
  Destinations destinations(file);
  ASSERT_OK(file.Read(destinations.spans));
  EXPECT_EQ(destinations.memory[0], buffers);
}

class TensorFileReadChecks : public TensorFileTest {
 protected:
  void SetUp() override {
    TensorFileTest::SetUp();
    ASSERT_OK(testing::WriteSafetensors(Path("model.safetensors"), shard1_));
  }
};

TEST_F(TensorFileReadChecks, DestinationsForTooFewTensorsAreRefused) {
  ASSERT_OK_AND_ASSIGN(const TensorFile file, TensorFile::Open(Path("model.safetensors")));
  Destinations destinations(file);
  destinations.spans.pop_back();
  EXPECT_ERROR(file.Read(destinations.spans), StatusCode::kInvalidArgument,
               {"1 entries for the file's 2 tensors"});
}

TEST_F(TensorFileReadChecks, DestinationWithTooManyBuffersIsRefused) {
  ASSERT_OK_AND_ASSIGN(const TensorFile file, TensorFile::Open(Path("model.safetensors")));
  Destinations destinations(file);
  destinations.spans[1].push_back(destinations.spans[1][0]);
  EXPECT_ERROR(file.Read(destinations.spans), StatusCode::kInvalidArgument,
               {"destinations[1]", "2 buffers for the descriptor's 1"});
}

TEST_F(TensorFileReadChecks, DestinationOfTheWrongSizeIsRefusedBeforeAnythingIsRead) {
  ASSERT_OK_AND_ASSIGN(const TensorFile file, TensorFile::Open(Path("model.safetensors")));
  Destinations destinations(file);
  destinations.spans[1][0] = destinations.spans[1][0].first(3);
  EXPECT_ERROR(file.Read(destinations.spans), StatusCode::kInvalidArgument,
               {"destinations[1]", "buffer 0: 3 bytes"});
  for (const auto& memory : destinations.memory) {
    EXPECT_EQ(memory[0], std::vector<std::byte>(memory[0].size())) << "read before refusing";
  }
}

}  // namespace
}  // namespace hurray
