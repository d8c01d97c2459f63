#include "hurray/safetensors.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "testing/safetensors_writer.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

using testing::PatternBytes;
using testing::RawSafetensorsBytes;
using testing::SafetensorsBytes;
using testing::SafetensorsTensorSpec;

const std::filesystem::path kFixtures = HURRAY_SAFETENSORS_FIXTURES;

Result<SafetensorsHeader> Parse(const std::string& file) {
  return ParseSafetensorsHeader(std::as_bytes(std::span(file)), file.size());
}

// A file of one tensor "t" with `entry` as its JSON and 16 bytes of data.
Result<SafetensorsHeader> ParseOne(const std::string& entry) {
  return Parse(RawSafetensorsBytes(R"({"t":)" + entry + "}", std::string(16, 'x')));
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// Reads a fixture through ReadSafetensorsHeader, as an importer would.
Result<SafetensorsHeader> ReadFixture(const std::string& name) {
  const std::filesystem::path path = kFixtures / (name + ".safetensors");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFoundError("cannot open " + path.string());
  auto header = ReadSafetensorsHeader(fd, path.string());
  ::close(fd);
  return header;
}

TEST(SafetensorsDtypeTest, EveryDtypeWithAHurrayTypeMaps) {
  const std::vector<std::pair<std::string, ElementType>> table = {
      {"BOOL", ElementType::kBool},
      {"U8", ElementType::kUint8},
      {"I8", ElementType::kInt8},
      {"I16", ElementType::kInt16},
      {"U16", ElementType::kUint16},
      {"F16", ElementType::kFloat16},
      {"BF16", ElementType::kBfloat16},
      {"I32", ElementType::kInt32},
      {"U32", ElementType::kUint32},
      {"F32", ElementType::kFloat32},
      {"F64", ElementType::kFloat64},
      {"I64", ElementType::kInt64},
      {"U64", ElementType::kUint64},
      {"C64", ElementType::kComplex64},
      {"F8_E5M2", ElementType::kFloat8E5m2},
      {"F8_E4M3", ElementType::kFloat8E4m3fn},
      {"F8_E8M0", ElementType::kFloat8E8m0}};
  for (const auto& [dtype, type] : table) {
    ASSERT_OK_AND_ASSIGN(ElementType mapped, ElementTypeOfSafetensorsDtype(dtype));
    EXPECT_EQ(mapped, type) << dtype;
  }
}

TEST(SafetensorsDtypeTest, DefinedDtypesWithoutAHurrayTypeAreRefusedByName) {
  for (const char* dtype : {"F4", "F6_E2M3", "F6_E3M2"}) {
    EXPECT_ERROR(ElementTypeOfSafetensorsDtype(dtype), StatusCode::kInvalidArgument,
                 {"dtype", dtype, "has no hurray element type"});
  }
}

TEST(SafetensorsDtypeTest, UnknownDtypesAreRefusedAsUnknown) {
  EXPECT_ERROR(ElementTypeOfSafetensorsDtype("f32"), StatusCode::kInvalidArgument,
               {"unknown dtype \"f32\""});
  EXPECT_ERROR(ElementTypeOfSafetensorsDtype(""), StatusCode::kInvalidArgument, {"unknown dtype"});
}

TEST(SafetensorsHeaderTest, ValidFixtureGivesEveryTensorSortedWithMetadata) {
  ASSERT_OK_AND_ASSIGN(SafetensorsHeader header, ReadFixture("valid_several_dtypes"));
  const std::string file = ReadFile(kFixtures / "valid_several_dtypes.safetensors");
  EXPECT_EQ(header.metadata,
            (std::map<std::string, std::string>{{"format", "pt"}, {"source", "hurray"}}));
  ASSERT_EQ(header.tensors.size(), 7U);
  const std::vector<std::string> names = {
      "model.embed.weight", "model.norm.weight", "model.positions", "model.mask",
      "model.empty",        "model.fp8.weight",  "model.scale"};
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(header.tensors[i].name, names[i]);
  const SafetensorsTensor& embed = header.tensors[0];
  EXPECT_EQ(embed.file_offset, header.data_offset);
  EXPECT_EQ(embed.byte_size, 24U);
  EXPECT_EQ(embed.descriptor.element_type(), ElementType::kFloat32);
  EXPECT_EQ(embed.descriptor.shape(), (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(embed.descriptor.buffers().at(0).byte_size(), 24U);
  const auto expected = PatternBytes(24, 1);
  EXPECT_EQ(file.substr(embed.file_offset, embed.byte_size),
            std::string(reinterpret_cast<const char*>(expected.data()), expected.size()));
  const SafetensorsTensor& scale = header.tensors.back();
  EXPECT_TRUE(scale.descriptor.shape().empty());
  EXPECT_EQ(scale.file_offset + scale.byte_size, file.size());
  EXPECT_EQ(header.tensors[4].byte_size, 0U);
}

TEST(SafetensorsHeaderTest, TensorsAreOrderedByFileOffsetNotByName) {
  const std::vector<SafetensorsTensorSpec> tensors = {{"z", "U8", {4}, PatternBytes(4, 1)},
                                                      {"a", "U8", {4}, PatternBytes(4, 2)}};
  ASSERT_OK_AND_ASSIGN(SafetensorsHeader header, Parse(SafetensorsBytes(tensors)));
  ASSERT_EQ(header.tensors.size(), 2U);
  EXPECT_EQ(header.tensors[0].name, "z");
  EXPECT_EQ(header.tensors[1].file_offset, header.tensors[0].file_offset + 4);
}

TEST(SafetensorsHeaderTest, HeaderLengthPastTheFileIsRefused) {
  EXPECT_ERROR(
      ReadFixture("header_length_past_file"), StatusCode::kInvalidArgument,
      {"header_length_past_file.safetensors", "header length 4096", "past the end of the file"});
}

TEST(SafetensorsHeaderTest, HeaderOverTheLimitIsRefused) {
  const std::string file = RawSafetensorsBytes("{}", "", kMaxSafetensorsHeaderBytes + 1);
  // The length is checked before the file's size: a small file suffices.
  EXPECT_ERROR(ParseSafetensorsHeader(std::as_bytes(std::span(file)), std::uint64_t{1} << 40),
               StatusCode::kInvalidArgument, {"header length 100000001", "maximum 100000000"});
}

TEST(SafetensorsHeaderTest, FileShorterThanTheLengthFieldIsRefused) {
  EXPECT_ERROR(Parse(std::string(3, '\0')), StatusCode::kInvalidArgument,
               {"header length", "3 bytes"});
}

TEST(SafetensorsHeaderTest, PrefixShorterThanTheHeaderIsRefused) {
  const std::string file = RawSafetensorsBytes(R"({"__metadata__":{}})", "");
  EXPECT_ERROR(ParseSafetensorsHeader(std::as_bytes(std::span(file)).first(12), file.size()),
               StatusCode::kInvalidArgument, {"12 bytes given", "8 + 19"});
}

TEST(SafetensorsHeaderTest, InvalidJsonIsRefusedWithItsPosition) {
  EXPECT_ERROR(ReadFixture("invalid_json"), StatusCode::kInvalidArgument,
               {"invalid_json.safetensors", "header: invalid JSON", "column 33"});
}

TEST(SafetensorsHeaderTest, JsonThatIsNotAnObjectIsRefused) {
  EXPECT_ERROR(Parse(RawSafetensorsBytes("[1]", "")), StatusCode::kInvalidArgument,
               {"header: JSON is array, not an object"});
}

TEST(SafetensorsHeaderTest, EntryThatIsNotAnObjectNamesTheTensor) {
  EXPECT_ERROR(ParseOne("\"F32\""), StatusCode::kInvalidArgument,
               {"tensor \"t\"", "entry is string"});
}

TEST(SafetensorsHeaderTest, MissingFieldsNameTensorAndField) {
  EXPECT_ERROR(ParseOne(R"({"shape":[4],"data_offsets":[0,4]})"), StatusCode::kInvalidArgument,
               {"tensor \"t\"", "dtype is missing"});
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","data_offsets":[0,4]})"), StatusCode::kInvalidArgument,
               {"tensor \"t\"", "shape is missing"});
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":[4]})"), StatusCode::kInvalidArgument,
               {"tensor \"t\"", "data_offsets is missing"});
}

TEST(SafetensorsHeaderTest, MistypedFieldsNameTensorAndField) {
  EXPECT_ERROR(ParseOne(R"({"dtype":4,"shape":[4],"data_offsets":[0,4]})"),
               StatusCode::kInvalidArgument, {"tensor \"t\"", "dtype is 4, not a string"});
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":{},"data_offsets":[0,4]})"),
               StatusCode::kInvalidArgument,
               {"tensor \"t\"", "shape is an object of size 0, not an array"});
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":[2,-2],"data_offsets":[0,4]})"),
               StatusCode::kInvalidArgument, {"tensor \"t\"", "shape[1] is -2"});
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":[4],"data_offsets":[0,"4"]})"),
               StatusCode::kInvalidArgument, {"tensor \"t\"", "data_offsets[1] is \"4\""});
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":[4],"data_offsets":[0,2,4]})"),
               StatusCode::kInvalidArgument,
               {"tensor \"t\"", "data_offsets is an array of size 3, not an array"});
}

TEST(SafetensorsHeaderTest, UnknownDtypeNamesTheTensor) {
  EXPECT_ERROR(ReadFixture("unknown_dtype"), StatusCode::kInvalidArgument,
               {"tensor \"t\"", "unknown dtype \"Q4_K\""});
}

TEST(SafetensorsHeaderTest, DtypeWithoutAHurrayTypeNamesTheTensor) {
  EXPECT_ERROR(ParseOne(R"({"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]})"),
               StatusCode::kInvalidArgument, {"tensor \"t\"", "dtype F6_E2M3 has no hurray"});
}

TEST(SafetensorsHeaderTest, DimensionProductOverflowIsRefused) {
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
               StatusCode::kInvalidArgument, {"tensor \"t\"", "shape", "2^64 elements"});
  EXPECT_ERROR(ParseOne(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]})"),
               StatusCode::kInvalidArgument, {"tensor \"t\"", "2^64 bytes"});
}

TEST(SafetensorsHeaderTest, TooManyDimensionsAreRefused) {
  std::string shape = "[1";
  for (std::size_t i = 0; i < kMaxRank; ++i) shape += ",1";
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":)" + shape + R"(],"data_offsets":[0,1]})"),
               StatusCode::kInvalidArgument, {"tensor \"t\"", "shape has 65 dimensions"});
}

TEST(SafetensorsHeaderTest, ReversedOffsetsAreRefused) {
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":[4],"data_offsets":[8,4]})"),
               StatusCode::kInvalidArgument, {"tensor \"t\"", "data_offsets [8, 4] are reversed"});
}

TEST(SafetensorsHeaderTest, OffsetsOutsideTheDataAreRefused) {
  EXPECT_ERROR(ReadFixture("offsets_outside_data"), StatusCode::kInvalidArgument,
               {"tensor \"t\"", "data_offsets [0, 32] lie outside the data of 16 bytes"});
  EXPECT_ERROR(
      ParseOne(
          R"({"dtype":"U8","shape":[3],"data_offsets":[18446744073709551612,18446744073709551615]})"),
      StatusCode::kInvalidArgument, {"tensor \"t\"", "outside the data"});
}

TEST(SafetensorsHeaderTest, OverlappingOffsetsNameBothTensors) {
  EXPECT_ERROR(ReadFixture("overlapping_offsets"), StatusCode::kInvalidArgument,
               {"tensor \"b\": data_offsets [4, 12] overlap those of tensor \"a\", [0, 8]"});
}

TEST(SafetensorsHeaderTest, EmptyTensorsMayShareAnOffset) {
  ASSERT_OK(Parse(RawSafetensorsBytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                      R"("b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                                      std::string(8, 'x'))));
}

TEST(SafetensorsHeaderTest, ByteLengthThatDisagreesWithDtypeAndShapeIsRefused) {
  EXPECT_ERROR(ReadFixture("byte_length_mismatch"), StatusCode::kInvalidArgument,
               {"tensor \"t\": data_offsets [0, 16] hold 16 bytes but dtype F32 x shape [5] "
                "needs 20"});
}

TEST(SafetensorsHeaderTest, NonStringMetadataValueIsRefused) {
  EXPECT_ERROR(Parse(RawSafetensorsBytes(R"({"__metadata__":{"epoch":3}})", "")),
               StatusCode::kInvalidArgument, {"__metadata__ \"epoch\"", "not a string"});
  EXPECT_ERROR(Parse(RawSafetensorsBytes(R"({"__metadata__":"x"})", "")),
               StatusCode::kInvalidArgument, {"__metadata__ is string, not an object"});
}

// `depth` arrays around `inner`.
std::string Nested(std::size_t depth, std::string_view inner) {
  return std::string(depth, '[') + std::string(inner) + std::string(depth, ']');
}

constexpr std::size_t kDeep = 200'000;

TEST(SafetensorsHeaderTest, DeeplyNestedFieldsAreRefusedWithoutACrash) {
  const std::string deep = Nested(kDeep, "1");
  const std::vector<std::string> entries = {
      R"({"dtype":)" + deep + R"(,"shape":[4],"data_offsets":[0,4]})",
      R"({"dtype":"U8","shape":)" + deep + R"(,"data_offsets":[0,4]})",
      R"({"dtype":"U8","shape":[4],"data_offsets":)" + deep + "}",
      R"({"dtype":"U8","shape":[4],"data_offsets":[0,4],"unread":)" + deep + "}", deep};
  for (const std::string& entry : entries) {
    EXPECT_ERROR(ParseOne(entry), StatusCode::kInvalidArgument,
                 {"header: JSON nested deeper than the maximum 64 levels"})
        << entry.substr(0, 60);
  }
  for (const std::string& metadata :
       {R"({"__metadata__":{"k":)" + deep + "}}", R"({"__metadata__":)" + deep + "}"}) {
    EXPECT_ERROR(Parse(RawSafetensorsBytes(metadata, "")), StatusCode::kInvalidArgument,
                 {"header: JSON nested deeper than the maximum 64 levels"});
  }
  // As deep in objects as in arrays.
  std::string objects;
  for (std::size_t i = 0; i < kDeep; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kDeep, '}');
  EXPECT_ERROR(Parse(RawSafetensorsBytes(objects, "")), StatusCode::kInvalidArgument,
               {"nested deeper than the maximum 64"});
}

TEST(SafetensorsHeaderTest, NestingUpToTheLimitIsAccepted) {
  // The header and the entry are 2 levels: 62 more in a key the parser does not read make 64.
  auto with_unread = [](std::size_t depth) {
    return ParseOne(R"({"dtype":"U8","shape":[16],"data_offsets":[0,16],"unread":)" +
                    Nested(depth, "") + "}");
  };
  ASSERT_OK(with_unread(kMaxSafetensorsJsonDepth - 2));
  EXPECT_ERROR(with_unread(kMaxSafetensorsJsonDepth - 1), StatusCode::kInvalidArgument,
               {"nested deeper than the maximum 64"});
}

TEST(SafetensorsHeaderTest, MistypedValuesAreShownByTheirSizeAndStringsCut) {
  EXPECT_ERROR(
      ParseOne(R"({"dtype":)" + Nested(40, "\"F32\"") + R"(,"shape":[4],"data_offsets":[0,4]})"),
      StatusCode::kInvalidArgument, {"dtype is an array of size 1, not a string"});
  EXPECT_ERROR(ParseOne(R"({"dtype":"U8","shape":[4],"data_offsets":{"0":0,"1":4}})"),
               StatusCode::kInvalidArgument, {"data_offsets is an object of size 2"});
  const std::string long_key(100'000, 'k');
  auto result = Parse(RawSafetensorsBytes(R"({"__metadata__":{")" + long_key + R"(":1}})", ""));
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code(), StatusCode::kInvalidArgument);
  EXPECT_LT(result.error().message().size(), kMaxSafetensorsNameBytes + 200);
  EXPECT_NE(result.error().message().find("kkk\"...: value is number"), std::string::npos)
      << result.error().message().substr(0, 100);
}

TEST(SafetensorsHeaderTest, OverlongNameIsRefused) {
  const std::string name(kMaxSafetensorsNameBytes + 1, 'n');
  EXPECT_ERROR(Parse(RawSafetensorsBytes(
                   "{\"" + name + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x")),
               StatusCode::kInvalidArgument, {"tensor name of 4097 bytes", "4096"});
}

TEST(SafetensorsIndexTest, ShardsInOrderOfFirstAppearanceInSortedNames) {
  ASSERT_OK_AND_ASSIGN(SafetensorsIndex index,
                       ParseSafetensorsIndex(R"({"metadata":{"total_size":64},"weight_map":{
          "b.weight":"model-00002-of-00002.safetensors",
          "a.weight":"model-00001-of-00002.safetensors",
          "c.weight":"model-00001-of-00002.safetensors"}})"));
  EXPECT_EQ(index.shards, (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                    "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(index.weight_map.size(), 3U);
  EXPECT_EQ(index.weight_map.at("b.weight"), "model-00002-of-00002.safetensors");
}

TEST(SafetensorsIndexTest, BrokenIndexesNameTheField) {
  EXPECT_ERROR(ParseSafetensorsIndex("{"), StatusCode::kInvalidArgument, {"index: invalid JSON"});
  EXPECT_ERROR(ParseSafetensorsIndex("[]"), StatusCode::kInvalidArgument, {"index: JSON is array"});
  EXPECT_ERROR(ParseSafetensorsIndex(R"({"metadata":{}})"), StatusCode::kInvalidArgument,
               {"weight_map is missing"});
  EXPECT_ERROR(ParseSafetensorsIndex(R"({"weight_map":[]})"), StatusCode::kInvalidArgument,
               {"weight_map is array"});
  EXPECT_ERROR(ParseSafetensorsIndex(R"({"weight_map":{"a":1}})"), StatusCode::kInvalidArgument,
               {"weight_map \"a\": shard is number"});
}

TEST(SafetensorsIndexTest, DeeplyNestedIndexIsRefusedWithoutACrash) {
  EXPECT_ERROR(ParseSafetensorsIndex(R"({"weight_map":{"a":)" + Nested(kDeep, "") + "}}"),
               StatusCode::kInvalidArgument,
               {"index: JSON nested deeper than the maximum 64 levels"});
}

TEST(SafetensorsIndexTest, ShardNamesThatAreNotPlainFileNamesAreRefused) {
  for (const char* shard :
       {"", "..", "../model.safetensors", "sub/model.safetensors", "/etc/passwd"}) {
    EXPECT_ERROR(ParseSafetensorsIndex(std::string(R"({"weight_map":{"a":")") + shard + "\"}}"),
                 StatusCode::kInvalidArgument, {"weight_map \"a\"", "not a plain file name"})
        << shard;
  }
}

}  // namespace
}  // namespace hurray
