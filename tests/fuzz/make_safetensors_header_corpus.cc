// Writes the committed safetensors files: the fixtures of tests/fixtures/safetensors (a valid
// file of several dtypes with metadata, and one broken file per kind of damage the unit
// tests read back) and the seed corpus of safetensors_header_fuzzer (the fixtures again, and
// more variants: every dtype, every missing or mistyped field, the limits, JSON nested at,
// past and far past the depth limit). Every file is parsed before it is written; the run
// fails if a valid_ file is refused or another accepted, and prints the error each broken
// one gets.
//
// Usage: make_safetensors_header_corpus tests/fuzz/corpus/safetensors_header
// tests/fixtures/safetensors Existing files of the same name are overwritten; others are left
// alone.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/safetensors.h"
#include "testing/safetensors_writer.h"

namespace hurray {
namespace {

using testing::PatternBytes;
using testing::RawSafetensorsBytes;
using testing::SafetensorsBytes;
using testing::SafetensorsTensorSpec;

// Checks each file against ParseSafetensorsHeader and writes it. Not thread-safe.
class FileSet {
 public:
  FileSet(std::filesystem::path corpus, std::filesystem::path fixtures)
      : corpus_(std::move(corpus)), fixtures_(std::move(fixtures)) {}

  // A file for the corpus only.
  void Seed(std::string_view name, const std::string& bytes) { Write(corpus_, name, bytes); }

  // A file for both the fixtures and the corpus.
  void Fixture(std::string_view name, const std::string& bytes) {
    Write(fixtures_, name, bytes);
    Write(corpus_, name, bytes);
  }

  [[nodiscard]] int failures() const { return failures_; }

 private:
  void Write(const std::filesystem::path& directory, std::string_view name,
             const std::string& bytes) {
    const bool expect_valid = name.starts_with("valid_");
    auto header = ParseSafetensorsHeader(std::as_bytes(std::span(bytes)), bytes.size());
    if (header.has_value() != expect_valid) {
      std::fprintf(stderr, "%.*s: expected %s, got %s\n", static_cast<int>(name.size()),
                   name.data(), expect_valid ? "valid" : "a refusal",
                   header ? "valid" : header.error().ToString().c_str());
      ++failures_;
      return;
    }
    if (!header) {
      std::printf("%.*s: %s\n", static_cast<int>(name.size()), name.data(),
                  header.error().message().c_str());
    }
    const std::filesystem::path path = directory / (std::string(name) + ".safetensors");
    if (auto written = testing::WriteFileBytes(path, bytes); !written) {
      std::fprintf(stderr, "%s\n", written.error().ToString().c_str());
      ++failures_;
    }
  }

  std::filesystem::path corpus_;
  std::filesystem::path fixtures_;
  int failures_ = 0;
};

std::vector<SafetensorsTensorSpec> SeveralDtypes() {
  return {
      {"model.embed.weight", "F32", {2, 3}, PatternBytes(24, 1)},
      {"model.norm.weight", "BF16", {4}, PatternBytes(8, 2)},
      {"model.positions", "I64", {2, 2}, PatternBytes(32, 3)},
      {"model.mask", "BOOL", {3}, {std::byte{1}, std::byte{0}, std::byte{1}}},
      {"model.empty", "U8", {0}, {}},
      {"model.fp8.weight", "F8_E4M3", {8}, PatternBytes(8, 4)},
      {"model.scale", "F64", {}, PatternBytes(8, 5)},
  };
}

// A tensor entry's JSON.
std::string Entry(std::string_view dtype, std::string_view shape, std::string_view offsets) {
  return std::string(R"({"dtype":")") + std::string(dtype) + R"(","shape":)" + std::string(shape) +
         R"(,"data_offsets":)" + std::string(offsets) + "}";
}

// A one-tensor header with `entry` as the tensor's JSON, over `data_bytes` bytes of data.
std::string OneTensor(std::string_view entry, std::size_t data_bytes = 16) {
  return RawSafetensorsBytes(std::string(R"({"t":)") + std::string(entry) + "}",
                             std::string(data_bytes, 'x'));
}

void WriteFixtures(FileSet& files) {
  files.Fixture("valid_several_dtypes",
                SafetensorsBytes(SeveralDtypes(), {{"format", "pt"}, {"source", "hurray"}}));
  files.Fixture(
      "header_length_past_file",
      RawSafetensorsBytes(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x", 4096));
  files.Fixture("invalid_json", OneTensor(R"({"dtype":"F32","shape":[4],)"));
  files.Fixture("overlapping_offsets",
                RawSafetensorsBytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    std::string(12, 'x')));
  files.Fixture("offsets_outside_data",
                OneTensor(R"({"dtype":"F32","shape":[8],"data_offsets":[0,32]})"));
  files.Fixture("byte_length_mismatch",
                OneTensor(R"({"dtype":"F32","shape":[5],"data_offsets":[0,16]})"));
  files.Fixture("unknown_dtype",
                OneTensor(R"({"dtype":"Q4_K","shape":[16],"data_offsets":[0,16]})"));
}

void WriteDtypeSeeds(FileSet& files) {
  const std::vector<std::pair<std::string, std::size_t>> dtypes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},      {"I16", 2},     {"U16", 2},    {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"F64", 8},    {"I64", 8},
      {"U64", 8},  {"C64", 8}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}};
  for (const auto& [dtype, width] : dtypes) {
    const std::vector<SafetensorsTensorSpec> tensor = {
        {"w", dtype, {3}, PatternBytes(3 * width, 6)}};
    files.Seed("valid_dtype_" + dtype, SafetensorsBytes(tensor));
  }
  for (std::string_view dtype : {"F4", "F6_E2M3", "F6_E3M2"}) {
    files.Seed("dtype_without_hurray_type_" + std::string(dtype),
               OneTensor(Entry(dtype, "[4]", "[0,2]")));
  }
}

void WriteFieldSeeds(FileSet& files) {
  files.Seed("valid_scalar", OneTensor(Entry("F32", "[]", "[0,4]"), 4));
  files.Seed("valid_empty_tensor", OneTensor(Entry("F32", "[0,7]", "[3,3]"), 4));
  files.Seed("valid_no_tensors", RawSafetensorsBytes("{}", ""));
  files.Seed("valid_metadata_only", RawSafetensorsBytes(R"({"__metadata__":{"a":"b"}})", ""));
  files.Seed("file_shorter_than_length", std::string(5, '\0'));
  files.Seed("header_over_limit", RawSafetensorsBytes("{}", "", kMaxSafetensorsHeaderBytes + 1));
  files.Seed("json_not_object", RawSafetensorsBytes("[1,2]", ""));
  files.Seed("entry_not_object", OneTensor("7"));
  files.Seed("dtype_missing", OneTensor(R"({"shape":[4],"data_offsets":[0,4]})"));
  files.Seed("dtype_not_string", OneTensor(R"({"dtype":32,"shape":[4],"data_offsets":[0,16]})"));
  files.Seed("shape_missing", OneTensor(R"({"dtype":"U8","data_offsets":[0,4]})"));
  files.Seed("shape_not_array", OneTensor(Entry("U8", "4", "[0,4]")));
  files.Seed("shape_negative", OneTensor(Entry("U8", "[-4]", "[0,4]")));
  files.Seed("shape_fraction", OneTensor(Entry("U8", "[1.5]", "[0,4]")));
  files.Seed("shape_overflow", OneTensor(Entry("U8", "[4294967296,4294967296]", "[0,4]")));
  files.Seed("shape_bytes_overflow", OneTensor(Entry("F64", "[2305843009213693952,2]", "[0,4]")));
  files.Seed("offsets_missing", OneTensor(R"({"dtype":"U8","shape":[4]})"));
  files.Seed("offsets_one_value", OneTensor(Entry("U8", "[4]", "[4]")));
  files.Seed("offsets_reversed", OneTensor(Entry("U8", "[4]", "[8,4]")));
  files.Seed("offsets_huge",
             OneTensor(Entry("U8", "[4]", "[18446744073709551612,18446744073709551615]")));
  files.Seed("metadata_not_object", RawSafetensorsBytes(R"({"__metadata__":[]})", ""));
  files.Seed("metadata_not_string", RawSafetensorsBytes(R"({"__metadata__":{"n":1}})", ""));
  files.Seed("name_too_long",
             RawSafetensorsBytes("{\"" + std::string(kMaxSafetensorsNameBytes + 1, 'n') +
                                     "\":" + Entry("U8", "[1]", "[0,1]") + "}",
                                 "x"));
}

// `depth` arrays around `inner`.
std::string Nested(std::size_t depth, std::string_view inner) {
  return std::string(depth, '[') + std::string(inner) + std::string(depth, ']');
}

// JSON nested at the limit (accepted, in a key the parser does not read), one past it, and
// deep (4096 levels: before the limit, messages dumped such values, recursing as deep) in
// each field and in the metadata.
void WriteNestingSeeds(FileSet& files) {
  auto with_unread = [](std::size_t depth) {
    return OneTensor(R"({"dtype":"U8","shape":[16],"data_offsets":[0,16],"unread":)" +
                     Nested(depth, "") + "}");
  };
  // The header and the entry are two levels.
  files.Seed("valid_nesting_at_limit", with_unread(kMaxSafetensorsJsonDepth - 2));
  files.Seed("nesting_past_limit", with_unread(kMaxSafetensorsJsonDepth - 1));
  const std::string deep = Nested(4096, "1");
  files.Seed("dtype_nested_deep",
             OneTensor(R"({"dtype":)" + deep + R"(,"shape":[4],"data_offsets":[0,4]})"));
  files.Seed("shape_nested_deep",
             OneTensor(R"({"dtype":"U8","shape":)" + deep + R"(,"data_offsets":[0,4]})"));
  files.Seed("offsets_nested_deep",
             OneTensor(R"({"dtype":"U8","shape":[4],"data_offsets":)" + deep + "}"));
  files.Seed("metadata_nested_deep",
             RawSafetensorsBytes(R"({"__metadata__":{"k":)" + deep + "}}", ""));
  std::string objects;
  for (int i = 0; i < 4096; ++i) objects += R"({"a":)";
  files.Seed("objects_nested_deep",
             RawSafetensorsBytes(objects + "1" + std::string(4096, '}'), ""));
}

}  // namespace
}  // namespace hurray

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CORPUS_DIRECTORY FIXTURES_DIRECTORY\n", argv[0]);
    return 1;
  }
  hurray::FileSet files(argv[1], argv[2]);
  hurray::WriteFixtures(files);
  hurray::WriteDtypeSeeds(files);
  hurray::WriteFieldSeeds(files);
  hurray::WriteNestingSeeds(files);
  return files.failures() == 0 ? 0 : 1;
}
