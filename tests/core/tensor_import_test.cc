// TensorImport over a recording sink, with real files in a temporary directory: a
// .safetensors file, a sharded model and a multi-buffer .hrry file arrive byte for byte under
// the prefix and are published once; damaged files (cut short, offsets out of range, sizes
// and lengths that overflow, a .hrry checksum that differs, a file cut short after Open) are
// refused naming the file (and the tensor where one is at fault) and publish nothing; the
// sink's own refusals, buffers that do not match the descriptor, a stop and a refused
// publication end the import the same way.
#include "hurray/tensor_import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "hurray/file_writer.h"
#include "testing/safetensors_writer.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray {
namespace {

using testing::PatternBytes;
using testing::SafetensorsTensorSpec;
using testing::TempDir;

using Bytes = std::vector<std::byte>;

SafetensorsTensorSpec Spec(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                           std::size_t bytes, std::uint32_t seed) {
  return {.name = std::move(name),
          .dtype = std::move(dtype),
          .shape = std::move(shape),
          .bytes = PatternBytes(bytes, seed)};
}

// A sink over plain memory that records every call. PublishAll copies what was read into
// `published` and frees the memory, as a sink that unmaps before publishing would (a read
// into it afterwards is a use after free that the sanitizers report).
class RecordingSink final : public TensorImport::Sink {
 public:
  struct Allocation {
    std::string name;
    TensorDescriptor descriptor;
    std::vector<Bytes> buffers;
  };

  Result<std::vector<std::span<std::byte>>> Allocate(const std::string& name,
                                                     const TensorDescriptor& descriptor) override {
    if (refuse_allocation == allocations.size()) {
      allocations_refused.push_back(name);
      return ResourceExhaustedError("pool cpu has no room");
    }
    Allocation& allocation = allocations.emplace_back(Allocation{name, descriptor, {}});
    for (const BufferHandle& buffer : descriptor.buffers()) {
      allocation.buffers.emplace_back(buffer.byte_size());
    }
    std::vector<std::span<std::byte>> spans(allocation.buffers.begin(), allocation.buffers.end());
    if (drop_a_buffer) spans.pop_back();
    if (short_buffer && !spans.empty()) spans.back() = spans.back().first(spans.back().size() / 2);
    return spans;
  }

  Status PublishAll() override {
    ++publish_calls;
    if (refuse_publish) return AlreadyExistsError("items[0] (m/a): name is published by uid 7");
    for (Allocation& allocation : allocations) {
      published[allocation.name] = allocation.buffers;
      allocation.buffers.clear();
      allocation.buffers.shrink_to_fit();
    }
    return {};
  }

  // What to refuse or get wrong.
  std::optional<std::size_t> refuse_allocation;  // Allocate's index.
  bool drop_a_buffer = false;
  bool short_buffer = false;
  bool refuse_publish = false;

  std::vector<Allocation> allocations;
  std::vector<std::string> allocations_refused;
  int publish_calls = 0;
  std::map<std::string, std::vector<Bytes>> published;
};

std::string ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

class TensorImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("tensor-import-test");
    ASSERT_OK(dir);
    dir_.emplace(*std::move(dir));
    ASSERT_OK(testing::WriteSafetensors(Path("model.safetensors"), specs_));
  }

  [[nodiscard]] std::string Path(std::string_view name) const { return dir_->Path(name); }

  // A .safetensors file of `header_json` and `data`, with the length field as given.
  [[nodiscard]] std::string RawFile(std::string_view name, std::string_view header_json,
                                    std::string_view data,
                                    std::optional<std::uint64_t> header_length = {}) const {
    const std::string path = Path(name);
    EXPECT_OK(testing::WriteFileBytes(
        path, testing::RawSafetensorsBytes(header_json, data, header_length)));
    return path;
  }

  // A .hrry file of one tensor of three buffers (int8 values, float32 scales, int8 zero
  // points), and those buffers' bytes.
  [[nodiscard]] std::pair<std::string, std::vector<Bytes>> WriteHrry() const {
    TensorDescriptor::Parts parts{.element_type = ElementType::kInt8, .shape = {4, 8}};
    parts.quantization =
        PerChannelAffine{.axis = 0,
                         .scale_buffer = 1,
                         .scale_type = ElementType::kFloat32,
                         .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kInt8}};
    auto descriptor = TensorDescriptor::WithImpliedBuffers(std::move(parts));
    EXPECT_OK(descriptor);
    std::vector<Bytes> buffers;
    for (const BufferHandle& buffer : descriptor->buffers()) {
      buffers.push_back(
          PatternBytes(buffer.byte_size(), static_cast<std::uint32_t>(40 + buffers.size())));
    }
    const std::string path = Path("model.hrry");
    auto writer = FileWriter::Create(path);
    EXPECT_OK(writer);
    const std::vector<std::span<const std::byte>> spans(buffers.begin(), buffers.end());
    EXPECT_OK(writer->WriteTensor("quantized", *descriptor, spans));
    EXPECT_OK(writer->Finish());
    return {path, buffers};
  }

  // Nothing was published, nor asked to be.
  static void ExpectNothingPublished(const RecordingSink& sink) {
    EXPECT_EQ(sink.publish_calls, 0);
    EXPECT_TRUE(sink.published.empty());
  }

  std::optional<TempDir> dir_;
  // In offset order, as TensorFile lists them; one is empty.
  std::vector<SafetensorsTensorSpec> specs_ = {
      Spec("embed.weight", "F16", {8, 4}, 64, 1), Spec("layers.0.bias", "F32", {8}, 32, 2),
      Spec("layers.0.mask", "BOOL", {5}, 5, 3), Spec("layers.0.empty", "U8", {0}, 0, 4)};
};

TEST_F(TensorImportTest, SafetensorsFileArrivesByteForByteUnderThePrefixAndIsPublishedOnce) {
  ASSERT_OK_AND_ASSIGN(const TensorImport import,
                       TensorImport::Open(Path("model.safetensors"), {.prefix = "m/"}));
  EXPECT_EQ(import.path(), Path("model.safetensors"));
  ASSERT_EQ(import.names().size(), specs_.size());
  EXPECT_EQ(import.file().total_bytes(), 64U + 32U + 5U);
  RecordingSink sink;
  std::vector<std::uint64_t> progress;
  ASSERT_OK(import.Run(sink, {.progress = [&](std::uint64_t done) { progress.push_back(done); }}));

  ASSERT_EQ(sink.allocations.size(), specs_.size());
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    EXPECT_EQ(import.names()[i], "m/" + import.file().tensors()[i].name);
    EXPECT_EQ(sink.allocations[i].name, import.names()[i]);
    EXPECT_EQ(sink.allocations[i].descriptor, import.file().tensors()[i].descriptor);
  }
  EXPECT_EQ(sink.publish_calls, 1);
  ASSERT_EQ(sink.published.size(), specs_.size());
  for (const SafetensorsTensorSpec& spec : specs_) {
    ASSERT_EQ(sink.published.count("m/" + spec.name), 1U) << spec.name;
    EXPECT_EQ(sink.published["m/" + spec.name], std::vector<Bytes>{spec.bytes}) << spec.name;
  }
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), import.file().total_bytes());
}

TEST_F(TensorImportTest, ShardedModelArrivesThroughItsIndex) {
  const std::vector<SafetensorsTensorSpec> shard1 = {Spec("a", "F32", {4, 3}, 48, 11),
                                                     Spec("b", "BF16", {10}, 20, 12)};
  const std::vector<SafetensorsTensorSpec> shard2 = {Spec("c", "I64", {2, 2}, 32, 13)};
  ASSERT_OK(testing::WriteSafetensors(Path("model-1.safetensors"), shard1));
  ASSERT_OK(testing::WriteSafetensors(Path("model-2.safetensors"), shard2));
  const std::string index = Path("model.safetensors.index.json");
  ASSERT_OK(testing::WriteFileBytes(
      index, R"({"weight_map": {"a": "model-1.safetensors", "b": "model-1.safetensors",
                                 "c": "model-2.safetensors"}})"));
  ASSERT_OK_AND_ASSIGN(const TensorImport import, TensorImport::Open(index, {.prefix = "s/"}));
  RecordingSink sink;
  ASSERT_OK(import.Run(sink));
  ASSERT_EQ(sink.published.size(), 3U);
  for (const auto* shard : {&shard1, &shard2}) {
    for (const SafetensorsTensorSpec& spec : *shard) {
      EXPECT_EQ(sink.published["s/" + spec.name], std::vector<Bytes>{spec.bytes}) << spec.name;
    }
  }
}

TEST_F(TensorImportTest, HrryFileFillsEveryBufferOfAMultiBufferTensor) {
  const auto [path, buffers] = WriteHrry();
  ASSERT_OK_AND_ASSIGN(const TensorImport import, TensorImport::Open(path, {.prefix = "q/"}));
  RecordingSink sink;
  ASSERT_OK(import.Run(sink, {.parallelism = 2}));
  ASSERT_EQ(sink.allocations.size(), 1U);
  EXPECT_EQ(sink.published["q/quantized"], buffers);
}

TEST_F(TensorImportTest, AFileOfNoTensorsIsRefusedNamingIt) {
  const std::string empty = RawFile("empty.safetensors", "{}", "");
  EXPECT_ERROR(TensorImport::Open(empty, {.prefix = "m/"}), StatusCode::kInvalidArgument,
               {empty, "the file has no tensors"});
}

TEST_F(TensorImportTest, MoreTensorsThanTheLimitAreRefusedBeforeAnythingIsAllocated) {
  EXPECT_ERROR(TensorImport::Open(Path("model.safetensors"), {.prefix = "m/", .max_tensors = 3}),
               StatusCode::kInvalidArgument, {Path("model.safetensors"), "4 tensors, above the 3"});
  EXPECT_OK(TensorImport::Open(Path("model.safetensors"), {.prefix = "m/", .max_tensors = 4}));
}

TEST_F(TensorImportTest, APrefixThatMakesNoTensorNameIsRefusedNamingFileTensorAndPrefix) {
  EXPECT_ERROR(TensorImport::Open(Path("model.safetensors"), {.prefix = "nonamespace"}),
               StatusCode::kInvalidArgument,
               {Path("model.safetensors"), "tensor \"embed.weight\"", "prefix \"nonamespace\"",
                "no namespace"});
}

TEST_F(TensorImportTest, AMissingFileIsNotFoundNamingIt) {
  EXPECT_ERROR(TensorImport::Open(Path("absent.safetensors"), {.prefix = "m/"}),
               StatusCode::kNotFound, {Path("absent.safetensors")});
}

// Damaged .safetensors files: each is refused by Open, naming the file and (where one
// tensor is at fault) the tensor, before any sink could allocate.
TEST_F(TensorImportTest, DamagedFilesAreRefusedNamingFileAndTensor) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  struct Damage {
    std::string name;
    std::string header_json;
    std::string data;
    std::optional<std::uint64_t> header_length;
    std::vector<std::string> fragments;
  };
  const std::vector<Damage> damages = {
      {"truncated_data",
       R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       std::string(9, '\0'),
       {},
       {"\"t\"", "data_offsets [0, 16] lie outside the data of 9 bytes"}},
      {"offsets_past_data",
       R"({"t":{"dtype":"U8","shape":[8],"data_offsets":[16,24]}})",
       std::string(16, '\0'),
       {},
       {"\"t\"", "data_offsets [16, 24]"}},
      {"reversed_offsets",
       R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})",
       std::string(8, '\0'),
       {},
       {"\"t\"", "reversed"}},
      {"end_offset_at_2_64",
       R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,)" + std::to_string(kMax) + "]}}",
       std::string(4, '\0'),
       {},
       {"\"t\"", "data_offsets"}},
      {"offset_above_2_64",
       R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,18446744073709551616]}})",
       std::string(4, '\0'),
       {},
       {"\"t\"", "data_offsets[1]"}},
      {"element_count_overflows",
       R"({"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
       std::string(4, '\0'),
       {},
       {"\"t\""}},
      {"byte_size_overflows",
       R"({"t":{"dtype":"F64","shape":[4294967296,1073741824],"data_offsets":[0,4]}})",
       std::string(4, '\0'),
       {},
       {"\"t\""}},
      {"header_length_past_file", R"({})", "", std::uint64_t{1} << 20, {"runs past the end"}},
      {"header_length_at_2_64", R"({})", "", kMax, {"header length", "above the maximum"}},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.name);
    const std::string path = RawFile(damage.name + ".safetensors", damage.header_json, damage.data,
                                     damage.header_length);
    const auto opened = TensorImport::Open(path, {.prefix = "m/"});
    ASSERT_FALSE(opened.has_value());
    EXPECT_EQ(opened.error().code(), StatusCode::kInvalidArgument) << opened.error().ToString();
    EXPECT_NE(opened.error().message().find(path), std::string::npos) << opened.error().ToString();
    for (const std::string& fragment : damage.fragments) {
      EXPECT_NE(opened.error().message().find(fragment), std::string::npos)
          << fragment << " in " << opened.error().ToString();
    }
  }
}

TEST_F(TensorImportTest, ATruncatedHrryFileIsRefusedNamingIt) {
  const auto [path, buffers] = WriteHrry();
  std::filesystem::resize_file(path, 100);
  const auto opened = TensorImport::Open(path, {.prefix = "q/"});
  ASSERT_FALSE(opened.has_value());
  EXPECT_NE(opened.error().message().find(path), std::string::npos) << opened.error().ToString();
}

TEST_F(TensorImportTest, AFileCutShortAfterOpenIsDataLossAndPublishesNothing) {
  const std::string path = Path("model.safetensors");
  ASSERT_OK_AND_ASSIGN(const TensorImport import, TensorImport::Open(path, {.prefix = "m/"}));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  RecordingSink sink;
  EXPECT_ERROR(import.Run(sink), StatusCode::kDataLoss, {path, "unexpected end of file"});
  EXPECT_EQ(sink.allocations.size(), specs_.size());
  ExpectNothingPublished(sink);
}

TEST_F(TensorImportTest, AHrryBufferThatDiffersFromItsChecksumIsDataLossNamingTheTensor) {
  const auto [path, buffers] = WriteHrry();
  std::string bytes = ReadWholeFile(path);
  const std::string first(reinterpret_cast<const char*>(buffers[0].data()), buffers[0].size());
  const std::size_t at = bytes.find(first);
  ASSERT_NE(at, std::string::npos);
  bytes[at] = static_cast<char>(bytes[at] ^ 1);
  ASSERT_OK(testing::WriteFileBytes(path, bytes));
  ASSERT_OK_AND_ASSIGN(const TensorImport import, TensorImport::Open(path, {.prefix = "q/"}));
  RecordingSink sink;
  EXPECT_ERROR(import.Run(sink), StatusCode::kDataLoss, {path, "quantized", "checksum"});
  ExpectNothingPublished(sink);
}

TEST_F(TensorImportTest, ASinkRefusalEndsTheImportNamingFileAndTensor) {
  ASSERT_OK_AND_ASSIGN(const TensorImport import,
                       TensorImport::Open(Path("model.safetensors"), {.prefix = "m/"}));
  RecordingSink sink;
  sink.refuse_allocation = 1;
  EXPECT_ERROR(
      import.Run(sink), StatusCode::kResourceExhausted,
      {Path("model.safetensors"), "allocating tensor \"layers.0.bias\"", "pool cpu has no room"});
  EXPECT_EQ(sink.allocations.size(), 1U);
  EXPECT_EQ(sink.allocations_refused, std::vector<std::string>{"m/layers.0.bias"});
  ExpectNothingPublished(sink);
}

TEST_F(TensorImportTest, BuffersThatDoNotMatchTheDescriptorAreInternalBeforeAnythingIsRead) {
  ASSERT_OK_AND_ASSIGN(const TensorImport import,
                       TensorImport::Open(Path("model.safetensors"), {.prefix = "m/"}));
  RecordingSink missing;
  missing.drop_a_buffer = true;
  EXPECT_ERROR(import.Run(missing), StatusCode::kInternal,
               {Path("model.safetensors"), "tensor \"embed.weight\"", "0 buffers", "the 1"});
  EXPECT_EQ(missing.allocations.size(), 1U);
  ExpectNothingPublished(missing);

  RecordingSink short_buffer;
  short_buffer.short_buffer = true;
  EXPECT_ERROR(
      import.Run(short_buffer), StatusCode::kInternal,
      {Path("model.safetensors"), "tensor \"embed.weight\" buffer 0", "32 bytes", "its 64 bytes"});
  ASSERT_EQ(short_buffer.allocations.size(), 1U);
  EXPECT_EQ(short_buffer.allocations[0].buffers[0], Bytes(64)) << "read before refusing";
  ExpectNothingPublished(short_buffer);
}

TEST_F(TensorImportTest, AStopEndsTheImportBeforePublishing) {
  ASSERT_OK_AND_ASSIGN(const TensorImport import,
                       TensorImport::Open(Path("model.safetensors"), {.prefix = "m/"}));
  std::stop_source stop;
  stop.request_stop();
  RecordingSink sink;
  EXPECT_ERROR(import.Run(sink, {.stop = stop.get_token()}), StatusCode::kCancelled,
               {Path("model.safetensors")});
  ExpectNothingPublished(sink);
}

TEST_F(TensorImportTest, ARefusedPublicationNamesTheFile) {
  ASSERT_OK_AND_ASSIGN(const TensorImport import,
                       TensorImport::Open(Path("model.safetensors"), {.prefix = "m/"}));
  RecordingSink sink;
  sink.refuse_publish = true;
  EXPECT_ERROR(import.Run(sink), StatusCode::kAlreadyExists,
               {Path("model.safetensors"), "items[0] (m/a)"});
  EXPECT_EQ(sink.publish_calls, 1);
}

}  // namespace
}  // namespace hurray
