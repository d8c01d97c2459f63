// Tests of the .npy header reader and writer (client/src/npy.h): round trips for every
// supported dtype, headers as NumPy writes them, and every malformed header refused with
// INVALID_ARGUMENT. Inputs are copied into buffers of exactly their size, so that a read
// out of bounds is caught under AddressSanitizer.
#include "hurrayctl/npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "testing/status_matchers.h"

namespace hurray {
namespace {

using namespace std::string_literals;  // NOLINT(google-build-using-namespace): "..."s.
using ::hurray::testing::FailsWith;

std::vector<std::uint8_t> Bytes(std::string_view text) { return {text.begin(), text.end()}; }

// A .npy file of format `major`.0 whose header is `dict` (unpadded) followed by `data_bytes`
// zero bytes of data.
std::vector<std::uint8_t> NpyFile(std::string_view dict, std::uint64_t data_bytes, int major = 1) {
  std::string file = "\x93NUMPY"s + static_cast<char>(major) + '\0';
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < length_bytes; ++i) {
    file += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  }
  file += dict;
  file.append(data_bytes, '\0');
  return Bytes(file);
}

// Parses a whole file given as bytes.
Result<NpyHeader> ParseFile(const std::vector<std::uint8_t>& file) {
  return ParseNpyHeader(file, file.size());
}

// Parses `dict` as the header of a file with `data_bytes` bytes of data.
Result<NpyHeader> ParseDict(std::string_view dict, std::uint64_t data_bytes = 24) {
  return ParseFile(NpyFile(dict, data_bytes));
}

struct SupportedType {
  ElementType type;
  std::string dtype;
  std::uint64_t size;
};

const std::vector<SupportedType>& SupportedTypes() {
  static const auto* const types = new std::vector<SupportedType>{
      {ElementType::kBool, "|b1", 1},      {ElementType::kInt8, "|i1", 1},
      {ElementType::kInt16, "<i2", 2},     {ElementType::kInt32, "<i4", 4},
      {ElementType::kInt64, "<i8", 8},     {ElementType::kUint8, "|u1", 1},
      {ElementType::kUint16, "<u2", 2},    {ElementType::kUint32, "<u4", 4},
      {ElementType::kUint64, "<u8", 8},    {ElementType::kFloat16, "<f2", 2},
      {ElementType::kFloat32, "<f4", 4},   {ElementType::kFloat64, "<f8", 8},
      {ElementType::kComplex64, "<c8", 8}, {ElementType::kComplex128, "<c16", 16},
  };
  return *types;
}

// ---- NpyDtype ----

TEST(NpyDtypeTest, NamesEverySupportedType) {
  for (const SupportedType& supported : SupportedTypes()) {
    auto dtype = NpyDtype(supported.type);
    ASSERT_OK(dtype);
    EXPECT_EQ(*dtype, supported.dtype) << ElementTypeName(supported.type);
  }
}

TEST(NpyDtypeTest, RefusesTypesNumPyLacks) {
  for (ElementType type : {ElementType::kBfloat16, ElementType::kFloat8E4m3fn,
                           ElementType::kFloat8E5m2, ElementType::kInt4, ElementType::kUint4,
                           ElementType::kNf4, ElementType::kMxfp4, ElementType::kFloat8E8m0}) {
    EXPECT_ERROR(NpyDtype(type), StatusCode::kInvalidArgument,
                 {ElementTypeName(type), "no NumPy dtype"});
    const std::vector<std::uint64_t> shape = {2};
    EXPECT_ERROR(NpyHeaderFor(type, shape), StatusCode::kInvalidArgument, {ElementTypeName(type)});
  }
}

// ---- NpyHeaderFor and ParseNpyHeader together ----

TEST(NpyHeaderForTest, RoundTripsEveryTypeAndShape) {
  const std::vector<std::vector<std::uint64_t>> shapes = {
      {}, {0}, {3}, {2, 3}, {1, 0, 5}, {7, 1, 1, 2}, {4096}, {12345678901, 0}};
  for (const SupportedType& supported : SupportedTypes()) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(supported.dtype + " rank " + std::to_string(shape.size()));
      auto header = NpyHeaderFor(supported.type, shape);
      ASSERT_OK(header);
      EXPECT_EQ(header->size() % 64, 0u);
      EXPECT_EQ(header->substr(0, 8), "\x93NUMPY\x01\x00"s);
      EXPECT_EQ(header->back(), '\n');
      EXPECT_NE(header->find("'descr': '" + supported.dtype + "'"), std::string::npos);

      std::uint64_t count = 1;
      for (std::uint64_t dimension : shape) count *= dimension;
      const std::vector<std::uint8_t> prefix = Bytes(*header);
      auto parsed = ParseNpyHeader(prefix, prefix.size() + count * supported.size);
      ASSERT_OK(parsed);
      EXPECT_EQ(parsed->element_type, supported.type);
      EXPECT_EQ(parsed->shape, shape);
      EXPECT_EQ(parsed->data_offset, header->size());
      EXPECT_EQ(parsed->data_bytes, count * supported.size);
      EXPECT_EQ(NpyHeaderEnd(prefix, prefix.size() + count * supported.size),
                Result<std::uint64_t>(header->size()));
    }
  }
}

TEST(NpyHeaderForTest, WritesTuplesAsPythonDoes) {
  const std::vector<std::uint64_t> scalar;
  const std::vector<std::uint64_t> vector = {3};
  const std::vector<std::uint64_t> matrix = {2, 3};
  EXPECT_NE(NpyHeaderFor(ElementType::kFloat64, scalar)->find("'shape': (), }"), std::string::npos);
  EXPECT_NE(NpyHeaderFor(ElementType::kFloat64, vector)->find("'shape': (3,), }"),
            std::string::npos);
  EXPECT_NE(NpyHeaderFor(ElementType::kFloat64, matrix)->find("'shape': (2, 3), }"),
            std::string::npos);
}

TEST(NpyHeaderForTest, MatchesNumPyByteForByte) {
  // numpy.save(f, numpy.zeros((2, 3), numpy.float32)): the header before the data.
  const std::string expected =
      "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"s +
      std::string(58, ' ') + "\n";
  const std::vector<std::uint64_t> shape = {2, 3};
  EXPECT_EQ(NpyHeaderFor(ElementType::kFloat32, shape), Result<std::string>(expected));
}

TEST(NpyHeaderForTest, PadsAWholeLineWhenAlreadyAligned) {
  // As numpy.lib.format._wrap_header: 64 - 0 % 64 spaces when the unpadded header ends on a
  // 64-byte boundary. Shape (10, 1, ..., 1) of rank 21 makes a dict of 117 bytes, which
  // with the 10-byte preamble and the '\n' makes 128.
  std::vector<std::uint64_t> shape(21, 1);
  shape[0] = 10;
  auto header = NpyHeaderFor(ElementType::kUint8, shape);
  ASSERT_OK(header);
  ASSERT_EQ(header->find('}'), 10u + 116u);
  EXPECT_EQ(header->size(), 128u + 64u);
  EXPECT_EQ(header->substr(127, 64), std::string(64, ' '));
}

TEST(NpyHeaderForTest, UsesVersion2WhenTheHeaderOutgrowsVersion1) {
  // 22000 dimensions of 1 make a dict of about 66000 bytes: more than a uint16 length.
  const std::vector<std::uint64_t> shape(22000, 1);
  auto header = NpyHeaderFor(ElementType::kInt32, shape);
  ASSERT_OK(header);
  EXPECT_EQ(header->substr(0, 8), "\x93NUMPY\x02\x00"s);
  EXPECT_EQ(header->size() % 64, 0u);
  const std::vector<std::uint8_t> prefix = Bytes(*header);
  auto parsed = ParseNpyHeader(prefix, prefix.size() + 4);
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->shape, shape);
  EXPECT_EQ(parsed->data_bytes, 4u);
}

// ---- ParseNpyHeader on headers NumPy wrote ----

TEST(NpyHeaderTest, ParsesNumPyFloat32Matrix) {
  const std::vector<std::uint8_t> prefix =
      Bytes("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"s +
            std::string(58, ' ') + "\n");
  ASSERT_EQ(prefix.size(), 128u);
  auto header = ParseNpyHeader(prefix, 128 + 24);
  ASSERT_OK(header);
  EXPECT_EQ(*header, (NpyHeader{.element_type = ElementType::kFloat32,
                                .shape = {2, 3},
                                .data_offset = 128,
                                .data_bytes = 24}));
}

TEST(NpyHeaderTest, ParsesNumPyBoolVectorWithDataInThePrefix) {
  std::string file =
      "\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }"s +
      std::string(60, ' ') + "\n" + "\x01\x00\x01"s;
  const std::vector<std::uint8_t> bytes = Bytes(file);
  auto header = ParseFile(bytes);
  ASSERT_OK(header);
  EXPECT_EQ(header->element_type, ElementType::kBool);
  EXPECT_EQ(header->shape, std::vector<std::uint64_t>{3});
  EXPECT_EQ(header->data_offset, 128u);
  EXPECT_EQ(header->data_bytes, 3u);
}

TEST(NpyHeaderTest, ParsesNumPyScalar) {
  const std::vector<std::uint8_t> prefix =
      Bytes("\x93NUMPY\x01\x00v\x00{'descr': '<c16', 'fortran_order': False, 'shape': (), }"s +
            std::string(62, ' ') + "\n");
  auto header = ParseNpyHeader(prefix, 128 + 16);
  ASSERT_OK(header);
  EXPECT_EQ(header->element_type, ElementType::kComplex128);
  EXPECT_TRUE(header->shape.empty());
  EXPECT_EQ(header->data_bytes, 16u);
}

TEST(NpyHeaderTest, ParsesNumPyEmptyArray) {
  const std::vector<std::uint8_t> prefix =
      Bytes("\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (0,), }"s +
            std::string(60, ' ') + "\n");
  auto header = ParseFile(prefix);
  ASSERT_OK(header);
  EXPECT_EQ(header->shape, std::vector<std::uint64_t>{0});
  EXPECT_EQ(header->data_bytes, 0u);
}

TEST(NpyHeaderTest, ParsesPython2HeaderAlignedTo16) {
  // NumPy before 1.9 aligned to 16 bytes; Python 2 wrote long integers with an L.
  const std::vector<std::uint8_t> prefix = Bytes(
      "\x93NUMPY\x01\x00\x46\x00{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L), }"s +
      std::string(8, ' ') + "\n");
  ASSERT_EQ(prefix.size(), 80u);
  auto header = ParseNpyHeader(prefix, 80 + 48);
  ASSERT_OK(header);
  EXPECT_EQ(header->element_type, ElementType::kInt64);
  EXPECT_EQ(header->shape, (std::vector<std::uint64_t>{2, 3}));
}

TEST(NpyHeaderTest, ParsesVersions2And3) {
  for (int major : {2, 3}) {
    const std::string dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (5,)}\n";
    auto header = ParseFile(NpyFile(dict, 10, major));
    ASSERT_OK(header);
    EXPECT_EQ(header->element_type, ElementType::kUint16);
    EXPECT_EQ(header->data_offset, 12u + dict.size());
  }
}

TEST(NpyHeaderTest, AcceptsAnyKeyOrderQuotesWhitespaceAndTrailingCommas) {
  const std::vector<std::string> dicts = {
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
      R"({"descr": "<f4", "fortran_order": False, "shape": (2, 3)})",
      "  {\n\t'descr' :'<f4' ,\r\n 'fortran_order':False,'shape':( 2 ,3 , ) , }\n   \n",
      "{'fortran_order': False, 'descr': '<f4', 'shape': (2,3,),}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
  };
  for (const std::string& dict : dicts) {
    auto header = ParseDict(dict);
    SCOPED_TRACE(dict);
    ASSERT_OK(header);
    EXPECT_EQ(header->element_type, ElementType::kFloat32);
    EXPECT_EQ(header->shape, (std::vector<std::uint64_t>{2, 3}));
  }
}

TEST(NpyHeaderTest, AcceptsAnyByteOrderMarkForOneByteTypes) {
  for (const char* descr : {"|i1", "<i1", ">i1", "=i1", "|u1", ">u1", "|b1", "=b1", "<b1"}) {
    auto header = ParseDict(
        "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (4,)}", 4);
    EXPECT_OK(header);
  }
}

TEST(NpyHeaderTest, AcceptsExtremeButValidShapes) {
  // Any dimension 0 makes the array empty, however large the others are.
  auto empty =
      ParseDict("{'descr': '<f8', 'fortran_order': False, 'shape': (18446744073709551615, 0)}", 0);
  ASSERT_OK(empty);
  EXPECT_EQ(empty->shape[0], 18446744073709551615u);
  auto zeros = ParseDict("{'descr': '<f8', 'fortran_order': False, 'shape': (00, 0,)}", 0);
  EXPECT_OK(zeros);
}

// ---- ParseNpyHeader on malformed input ----

struct MalformedCase {
  std::string name;
  std::vector<std::uint8_t> file;
  std::vector<std::string> fragments;
};

TEST(NpyHeaderTest, RefusesMalformedFiles) {
  const std::string valid_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  auto with_shape = [](std::string_view descr, std::string_view shape, std::uint64_t bytes) {
    return NpyFile("{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': " + std::string(shape) + "}",
                   bytes);
  };
  auto with_dict = [](std::string_view dict) { return NpyFile(dict, 24); };
  std::vector<MalformedCase> cases = {
      {"empty", {}, {"ends inside the magic"}},
      {"truncated magic", Bytes("\x93NUM"), {"ends inside the magic"}},
      {"wrong magic", Bytes("\x89PNG\r\n\x1a\n\x00\x00"s), {"not a .npy file", "89 50 4e 47"}},
      {"no version", Bytes("\x93NUMPY\x01"), {"ends inside the version"}},
      {"version 4.0", Bytes("\x93NUMPY\x04\x00\x00\x00"s), {"version 4.0"}},
      {"version 1.1", Bytes("\x93NUMPY\x01\x01\x00\x00"s), {"version 1.1"}},
      {"version 0.0", Bytes("\x93NUMPY\x00\x00\x00\x00"s), {"version 0.0"}},
      {"truncated length 1.0", Bytes("\x93NUMPY\x01\x00v"s), {"header length field"}},
      {"truncated length 2.0", Bytes("\x93NUMPY\x02\x00v\x00\x00"s), {"header length field"}},
      {"length past the end", Bytes("\x93NUMPY\x01\x00v\x00{'descr'"s), {"runs past the end"}},
      {"length over the limit",
       Bytes("\x93NUMPY\x02\x00\xff\xff\xff\xff{}"s),
       {"header length 4294967295 exceeds the limit"}},
      {"length cuts the dict",
       [&] {
         std::vector<std::uint8_t> file = NpyFile(valid_dict, 24);
         file[8] = 20;  // The header ends in the middle of the dict; the rest reads as data.
         return file;
       }(),
       {"npy header:"}},
      {"not a dict", with_dict("[1, 2]"), {"expected '{'"}},
      {"empty header", with_dict(""), {"expected '{'", "the end of the header"}},
      {"unclosed dict", with_dict("{'descr': '<f4'"), {"expected ',' or '}'"}},
      {"empty dict", with_dict("{}"), {"key 'descr' is missing"}},
      {"missing shape",
       with_dict("{'descr': '<f4', 'fortran_order': False}"),
       {"key 'shape' is missing"}},
      {"missing fortran_order",
       with_dict("{'descr': '<f4', 'shape': (2, 3)}"),
       {"key 'fortran_order' is missing"}},
      {"unknown key",
       with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}"),
       {"unknown key 'x'"}},
      {"duplicate key",
       with_dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}"),
       {"key 'descr' appears twice"}},
      {"missing comma",
       with_dict("{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}"),
       {"expected ',' or '}'"}},
      {"double comma",
       with_dict("{'descr': '<f4',, 'fortran_order': False, 'shape': (6,)}"),
       {"expected a key"}},
      {"lone comma", with_dict("{,}"), {"expected a key"}},
      {"missing colon",
       with_dict("{'descr' '<f4', 'fortran_order': False, 'shape': (6,)}"),
       {"expected ':' after key 'descr'"}},
      {"unquoted key",
       with_dict("{descr: '<f4', 'fortran_order': False, 'shape': (6,)}"),
       {"expected a key"}},
      {"quote inside a key", with_dict("{'descr: '<f4'}"), {"unknown key 'descr: '"}},
      {"string ends at the end", with_dict("{'descr"), {"unterminated string"}},
      {"mismatched quotes", with_dict("{'descr\": <f4}"), {"unterminated string"}},
      {"escape",
       with_dict("{'de\\x73cr': '<f4', 'fortran_order': False, 'shape': (6,)}"),
       {"escape sequence"}},
      {"garbage after the dict", with_dict(valid_dict + " x"), {"after the closing '}'"}},
      {"second dict", with_dict(valid_dict + "{}"), {"after the closing '}'"}},
      {"nul padding", with_dict(valid_dict + std::string("\0\0", 2)), {"after the closing '}'"}},
      {"fortran order",
       with_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}"),
       {"fortran_order True is not supported"}},
      {"fortran order as int",
       with_dict("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}"),
       {"fortran_order must be True or False"}},
      {"fortran order lower case",
       with_dict("{'descr': '<f4', 'fortran_order': false, 'shape': (6,)}"),
       {"fortran_order must be True or False", "'false'"}},
      {"big-endian", with_shape(">f4", "(6,)", 24), {"'>f4' is big-endian", "'<f4'"}},
      {"big-endian int", with_shape(">i8", "(3,)", 24), {"big-endian"}},
      {"native order", with_shape("=f4", "(6,)", 24), {"does not fix a byte order"}},
      {"no order", with_shape("|i4", "(6,)", 24), {"does not fix a byte order"}},
      {"object", with_shape("|O", "(3,)", 24), {"Python objects"}},
      {"void", with_shape("|V8", "(3,)", 24), {"structured or void"}},
      {"structured",
       with_dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}"),
       {"structured dtype"}},
      {"unicode", with_shape("<U6", "(1,)", 24), {"'<U6' is not supported"}},
      {"bytes", with_shape("|S24", "(1,)", 24), {"'|S24' is not supported"}},
      {"datetime", with_shape("<M8[ns]", "(3,)", 24), {"not supported"}},
      {"float128", with_shape("<f16", "(3,)", 48), {"not supported"}},
      {"padded size", with_shape("<f04", "(6,)", 24), {"not supported"}},
      {"short descr", with_shape("<", "(6,)", 24), {"not supported"}},
      {"no order mark", with_shape("f4", "(6,)", 24), {"not supported"}},
      {"descr not a string",
       with_dict("{'descr': 4, 'fortran_order': False, 'shape': (6,)}"),
       {"expected the descr string"}},
      {"shape as list", with_shape("<f4", "[2, 3]", 24), {"shape is a list"}},
      {"shape as int", with_shape("<f4", "6", 24), {"expected '(' opening the shape"}},
      {"shape in parentheses", with_shape("<f4", "(6)", 24), {"not a tuple", "(6,)"}},
      {"negative entry", with_shape("<f4", "(2, -3)", 24), {"shape entry 1 is negative (-3)"}},
      {"entry overflows",
       with_shape("<f4", "(2, 18446744073709551616)", 24),
       {"shape entry 1 overflows 64 bits"}},
      {"huge entry",
       with_shape("<f4", "(99999999999999999999999999999999,)", 24),
       {"shape entry 0 overflows"}},
      {"count overflows",
       with_shape("<f4", "(4294967296, 4294967296)", 24),
       {"more elements than fit in 64 bits"}},
      {"bytes overflow",
       with_shape("<f8", "(2305843009213693952,)", 24),
       {"of '<f8' needs more bytes than fit in 64 bits"}},
      {"leading zero", with_shape("<f4", "(06,)", 24), {"'06' is not a Python integer"}},
      {"float entry", with_shape("<f4", "(6.0,)", 24), {"expected ',' or ')'"}},
      {"hex entry", with_shape("<f4", "(0x6,)", 24), {"expected ',' or ')'"}},
      {"underscore entry", with_shape("<f4", "(1_2,)", 2 * 24), {"expected ',' or ')'"}},
      {"empty entry", with_shape("<f4", "(2,,3)", 24), {"shape entry 1"}},
      {"lone comma tuple", with_shape("<f4", "(,)", 0), {"shape entry 0"}},
      {"unclosed tuple", with_shape("<f4", "(2, 3", 24), {"expected ',' or ')'"}},
      {"plus sign", with_shape("<f4", "(+6,)", 24), {"shape entry 0"}},
      {"too little data",
       with_shape("<f4", "(5, 5)", 96),
       {"npy: file holds 96 data bytes but shape (5, 5) of <f4 needs 100"}},
      {"too much data",
       with_shape("<f4", "(5, 5)", 101),
       {"file holds 101 data bytes", "needs 100"}},
      {"scalar without data", with_shape("<f8", "()", 0), {"file holds 0 data bytes", "needs 8"}},
  };
  for (const MalformedCase& malformed : cases) {
    EXPECT_TRUE(FailsWith(ParseFile(malformed.file), StatusCode::kInvalidArgument, {}))
        << malformed.name;
    auto result = ParseFile(malformed.file);
    if (result) continue;
    for (const std::string& fragment : malformed.fragments) {
      EXPECT_NE(result.error().message().find(fragment), std::string::npos)
          << malformed.name << ": \"" << result.error().message() << "\" lacks \"" << fragment
          << "\"";
    }
  }
}

TEST(NpyHeaderTest, RefusesAPrefixShorterThanTheHeader) {
  const std::vector<std::uint8_t> file =
      NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
  const std::vector<std::uint8_t> prefix(file.begin(), file.begin() + 20);
  EXPECT_ERROR(ParseNpyHeader(prefix, file.size()), StatusCode::kInvalidArgument,
               {"the header ends at byte 69 but only 20 bytes were given"});
  // NpyHeaderEnd needs only the preamble.
  EXPECT_EQ(NpyHeaderEnd(prefix, file.size()), Result<std::uint64_t>(69));
}

TEST(NpyHeaderTest, IgnoresPrefixBytesBeyondTheFileSize) {
  const std::vector<std::uint8_t> file =
      NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
  // A caller claiming a smaller file than the bytes it hands over: the file size wins.
  EXPECT_ERROR(ParseNpyHeader(file, 40), StatusCode::kInvalidArgument, {"runs past the end"});
}

TEST(NpyHeaderTest, RefusesEveryTruncationOfAValidFile) {
  const std::vector<std::uint8_t> file =
      Bytes("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"s +
            std::string(58, ' ') + "\n" + std::string(24, '\x7f'));
  ASSERT_OK(ParseFile(file));
  for (std::size_t size = 0; size < file.size(); ++size) {
    // An exactly sized copy: any read past `size` is a heap overflow under ASan.
    const std::vector<std::uint8_t> truncated(file.begin(),
                                              file.begin() + static_cast<std::ptrdiff_t>(size));
    EXPECT_ERROR(ParseFile(truncated), StatusCode::kInvalidArgument) << "size " << size;
    // The same prefix of an intact file: only the header bytes given matter.
    auto with_full_size = ParseNpyHeader(truncated, file.size());
    if (size < 128) {
      EXPECT_ERROR(with_full_size, StatusCode::kInvalidArgument) << "size " << size;
    } else {
      EXPECT_OK(with_full_size);
    }
  }
}

TEST(NpyHeaderTest, SurvivesRandomMutations) {
  const std::vector<std::uint8_t> valid =
      Bytes("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"s +
            std::string(58, ' ') + "\n" + std::string(24, '\0'));
  std::mt19937 random(12345);  // Fixed seed: the same inputs every run.
  std::uniform_int_distribution<std::size_t> position(0, valid.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> mutations(1, 4);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<std::uint8_t> file = valid;
    for (int i = mutations(random); i > 0; --i) {
      file[position(random)] = static_cast<std::uint8_t>(byte(random));
    }
    if (round % 2 == 1) file.resize(position(random));
    auto header = ParseFile(file);
    if (header) {
      ++accepted;
      EXPECT_LE(header->data_offset, file.size());
      EXPECT_EQ(header->data_offset + header->data_bytes, file.size());
    } else {
      EXPECT_EQ(header.error().code(), StatusCode::kInvalidArgument);
    }
  }
  EXPECT_GT(accepted, 0);  // Mutations of padding and data keep the file valid.
}

}  // namespace
}  // namespace hurray
