#include "hurrayctl/npy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

namespace hurray {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// Magic and version bytes; the length field follows.
constexpr std::uint64_t kMagicAndVersionBytes = 8;
// NumPy aligns the data to this many bytes (numpy.lib.format.ARRAY_ALIGN).
constexpr std::uint64_t kDataAlignment = 64;

struct Dtype {
  ElementType type;
  char kind;           // NumPy's kind character: b, i, u, f, c.
  std::uint32_t size;  // Bytes per element.
};

constexpr std::array<Dtype, 14> kDtypes = {{
    {ElementType::kBool, 'b', 1},
    {ElementType::kInt8, 'i', 1},
    {ElementType::kInt16, 'i', 2},
    {ElementType::kInt32, 'i', 4},
    {ElementType::kInt64, 'i', 8},
    {ElementType::kUint8, 'u', 1},
    {ElementType::kUint16, 'u', 2},
    {ElementType::kUint32, 'u', 4},
    {ElementType::kUint64, 'u', 8},
    {ElementType::kFloat16, 'f', 2},
    {ElementType::kFloat32, 'f', 4},
    {ElementType::kFloat64, 'f', 8},
    {ElementType::kComplex64, 'c', 8},
    {ElementType::kComplex128, 'c', 16},
}};

std::optional<Dtype> DtypeOf(ElementType type) {
  for (const Dtype& dtype : kDtypes) {
    if (dtype.type == type) return dtype;
  }
  return std::nullopt;
}

// The dtype of a kind character and a size in decimal ("4"); exact match, so "04" is none.
std::optional<Dtype> DtypeOf(char kind, std::string_view size) {
  for (const Dtype& dtype : kDtypes) {
    if (dtype.kind == kind && fmt::to_string(dtype.size) == size) return dtype;
  }
  return std::nullopt;
}

// `text` in single quotes for a message, non-printable bytes as \xNN, cut after 64 bytes.
std::string Quoted(std::string_view text) {
  constexpr std::size_t kMaxShown = 64;
  std::string quoted = "'";
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\' && byte != '\'') {
      quoted += static_cast<char>(byte);
    } else {
      constexpr std::string_view kHex = "0123456789abcdef";
      quoted += "\\x";
      quoted += kHex[byte >> 4];
      quoted += kHex[byte & 0xf];
    }
  }
  if (text.size() > kMaxShown) quoted += "...";
  quoted += '\'';
  return quoted;
}

// Bytes as "93 4e 55", for a message.
std::string HexBytes(std::span<const std::uint8_t> bytes) {
  return fmt::format("{:02x}", fmt::join(bytes, " "));
}

// A shape as Python writes a tuple: "()", "(3,)", "(2, 3)". Messages show at most
// `max_entries` entries, then "...".
std::string PythonShape(std::span<const std::uint64_t> shape,
                        std::size_t max_entries = std::numeric_limits<std::size_t>::max()) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) text += ", ";
    if (i == max_entries) {
      text += "...";
      break;
    }
    text += fmt::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ',';
  text += ')';
  return text;
}

std::unexpected<Error> HeaderError(std::string message) {
  return InvalidArgumentError(fmt::format("npy header: {}", message));
}

// Most shape entries a message shows.
constexpr std::size_t kMaxShownEntries = 8;

// What the header dict holds, before its values are interpreted.
struct HeaderDict {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
};

// A recursive-descent parser for the subset of Python literal syntax a .npy header uses:
// one dict with string keys, whose values are a string, True/False and a tuple of integers.
// Every read is bounds-checked against `text`.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  Result<HeaderDict> Parse() {
    HeaderDict dict;
    std::array<bool, kKeyCount> seen{};
    SkipWhitespace();
    if (!Consume('{')) return Expected("'{' opening the header dict");
    SkipWhitespace();
    if (!Consume('}')) HURRAY_RETURN_IF_ERROR(ParseEntries(dict, seen));
    SkipWhitespace();
    if (pos_ != text_.size()) {
      return HeaderError(
          fmt::format("unexpected {} at byte {} after the closing '}}'", Found(), pos_));
    }
    for (std::size_t slot = 0; slot < kKeyCount; ++slot) {
      if (!seen[slot]) {
        return HeaderError(fmt::format("key {} is missing", Quoted(kKeyNames[slot])));
      }
    }
    return dict;
  }

 private:
  enum Key : std::uint8_t { kDescr, kFortranOrder, kShape, kKeyCount };
  static constexpr std::array<std::string_view, kKeyCount> kKeyNames = {"descr", "fortran_order",
                                                                        "shape"};

  // The dict's entries after its '{', through its closing '}'; `seen` marks each key read.
  Status ParseEntries(HeaderDict& dict, std::array<bool, kKeyCount>& seen) {
    while (true) {
      HURRAY_ASSIGN_OR_RETURN(const std::string key, ParseString("a key (a quoted string)"));
      const auto* found = std::ranges::find(kKeyNames, key);
      if (found == kKeyNames.end()) {
        return HeaderError(fmt::format(
            "unknown key {} (a .npy header holds descr, fortran_order and shape)", Quoted(key)));
      }
      const auto slot = static_cast<std::size_t>(found - kKeyNames.begin());
      if (seen[slot]) return HeaderError(fmt::format("key {} appears twice", Quoted(key)));
      seen[slot] = true;
      SkipWhitespace();
      if (!Consume(':')) return Expected(fmt::format("':' after key {}", Quoted(key)));
      SkipWhitespace();
      HURRAY_RETURN_IF_ERROR(ParseValue(slot, dict));
      SkipWhitespace();
      if (Consume('}')) return {};
      if (!Consume(',')) {
        return Expected(fmt::format("',' or '}}' after the value of {}", Quoted(key)));
      }
      SkipWhitespace();
      if (Consume('}')) return {};  // A trailing comma.
    }
  }

  // The value of the key in `slot`, into its field of `dict`.
  Status ParseValue(std::size_t slot, HeaderDict& dict) {
    switch (slot) {
      case kDescr: {
        if (Peek() == '[' || Peek() == '{') {
          return HeaderError("descr is a structured dtype, which is not supported");
        }
        HURRAY_ASSIGN_OR_RETURN(dict.descr, ParseString("the descr string"));
        return {};
      }
      case kFortranOrder: {
        HURRAY_ASSIGN_OR_RETURN(dict.fortran_order, ParseBool("fortran_order"));
        return {};
      }
      default: {
        HURRAY_ASSIGN_OR_RETURN(dict.shape, ParseShape());
        return {};
      }
    }
  }

  // The character at the cursor; '\0' at the end (never a valid character of a header).
  [[nodiscard]] char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // Python's whitespace between tokens.
  void SkipWhitespace() {
    while (pos_ < text_.size() &&
           std::string_view(" \t\n\r\f\v").find(text_[pos_]) != std::string_view::npos) {
      ++pos_;
    }
  }

  // What the cursor is on, for a message.
  [[nodiscard]] std::string Found() const {
    if (pos_ >= text_.size()) return "the end of the header";
    if (text_[pos_] == '\'') return "\"'\"";
    return Quoted(text_.substr(pos_, 1));
  }

  [[nodiscard]] std::unexpected<Error> Expected(std::string_view what) const {
    return HeaderError(fmt::format("expected {} at byte {}, found {}", what, pos_, Found()));
  }

  // A single- or double-quoted string without escapes.
  Result<std::string> ParseString(std::string_view what) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Expected(what);
    const std::size_t start = pos_;
    ++pos_;
    std::string value;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') {
        return HeaderError(
            fmt::format("escape sequence in the string at byte {} (not supported)", start));
      }
      if (text_[pos_] == '\n') break;
      value += text_[pos_++];
    }
    if (!Consume(quote)) {
      return HeaderError(fmt::format("unterminated string starting at byte {}", start));
    }
    return value;
  }

  // Python's True or False.
  Result<bool> ParseBool(std::string_view field) {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) != 0 || text_[pos_] == '_')) {
      ++pos_;
    }
    const std::string_view word = text_.substr(start, pos_ - start);
    if (word == "True") return true;
    if (word == "False") return false;
    pos_ = start;
    return HeaderError(fmt::format("{} must be True or False; found {} at byte {}", field,
                                   word.empty() ? Found() : Quoted(word), start));
  }

  // A tuple of non-negative integers: (), (3,), (2, 3), (2, 3,).
  Result<std::vector<std::uint64_t>> ParseShape() {
    if (Peek() == '[') return HeaderError("shape is a list; NumPy writes a tuple such as (2, 3)");
    if (!Consume('(')) return Expected("'(' opening the shape tuple");
    std::vector<std::uint64_t> shape;
    SkipWhitespace();
    if (Consume(')')) return shape;
    while (true) {
      auto entry = ParseShapeEntry(shape.size());
      if (!entry) return std::unexpected(entry.error());
      shape.push_back(*entry);
      SkipWhitespace();
      if (Consume(')')) {
        if (shape.size() == 1) {
          return HeaderError(fmt::format(
              "shape ({0}) is a parenthesized integer, not a tuple; a one-dimensional shape is "
              "written ({0},)",
              shape[0]));
        }
        return shape;
      }
      if (!Consume(',')) {
        return Expected(fmt::format("',' or ')' after shape entry {}", shape.size() - 1));
      }
      SkipWhitespace();
      if (Consume(')')) return shape;  // A trailing comma.
    }
  }

  // A decimal integer literal, with Python 2's optional L suffix.
  Result<std::uint64_t> ParseShapeEntry(std::size_t index) {
    const std::string entry_name = fmt::format("shape entry {}", index);
    const std::size_t start = pos_;
    const bool negative = Consume('-');
    const std::size_t digits_start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    const std::string_view digits = text_.substr(digits_start, pos_ - digits_start);
    if (digits.empty()) {
      pos_ = start;
      return Expected(fmt::format("{} (a non-negative integer)", entry_name));
    }
    const bool all_zero = digits.find_first_not_of('0') == std::string_view::npos;
    if (negative && !all_zero) {
      return HeaderError(fmt::format("{} is negative (-{})", entry_name, digits));
    }
    if (digits.size() > 1 && digits[0] == '0' && !all_zero) {
      return HeaderError(fmt::format("{} {} is not a Python integer literal (leading zero)",
                                     entry_name, Quoted(digits)));
    }
    std::uint64_t value = 0;
    for (char digit : digits) {
      if (__builtin_mul_overflow(value, 10u, &value) ||
          __builtin_add_overflow(value, static_cast<unsigned>(digit - '0'), &value)) {
        return HeaderError(fmt::format("{} overflows 64 bits ({})", entry_name, digits));
      }
    }
    if (Peek() == 'L' || Peek() == 'l') ++pos_;  // Headers written by Python 2.
    return value;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

// Reads an unsigned little-endian integer of bytes.size() bytes.
std::uint64_t ReadLittleEndian(std::span<const std::uint8_t> bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = bytes.size(); i > 0; --i) value = (value << 8) | bytes[i - 1];
  return value;
}

// INVALID_ARGUMENT unless the first `needed` bytes of the file exist and were given.
Status NeedBytes(std::uint64_t needed, std::span<const std::uint8_t> prefix,
                 std::uint64_t file_size, std::string_view what) {
  if (file_size < needed) {
    return InvalidArgumentError(fmt::format(
        "npy: file of {} bytes ends inside {} (which ends at byte {})", file_size, what, needed));
  }
  if (prefix.size() < needed) {
    return InvalidArgumentError(fmt::format("npy: {} ends at byte {} but only {} bytes were given",
                                            what, needed, prefix.size()));
  }
  return {};
}

// The element type of a descr string such as "<f4"; INVALID_ARGUMENT for anything else.
Result<ElementType> ElementTypeOfDescr(std::string_view descr) {
  constexpr std::string_view kSupported =
      "supported: |b1, |i1, <i2, <i4, <i8, |u1, <u2, <u4, <u8, <f2, <f4, <f8, <c8, <c16";
  const auto unsupported = [&](std::string_view why) {
    return HeaderError(fmt::format("dtype {} {} ({})", Quoted(descr), why, kSupported));
  };
  if (descr.size() < 2 || std::string_view("<>|=").find(descr[0]) == std::string_view::npos) {
    return unsupported("is not supported");
  }
  const char order = descr[0];
  const char kind = descr[1];
  if (kind == 'O') {
    return unsupported("holds Python objects, which are not supported");
  }
  if (kind == 'V') {
    return unsupported("is a structured or void dtype, which is not supported");
  }
  const auto dtype = DtypeOf(kind, descr.substr(2));
  if (!dtype) return unsupported("is not supported");
  if (dtype->size > 1 && order != '<') {
    const std::string little = Quoted(fmt::format("<{}", descr.substr(1)));
    if (order == '>') {
      return HeaderError(fmt::format(
          "dtype {} is big-endian, which is not supported; convert the array with astype({})",
          Quoted(descr), little));
    }
    return HeaderError(
        fmt::format("dtype {} does not fix a byte order; expected {}", Quoted(descr), little));
  }
  return dtype->type;
}

}  // namespace

Result<std::uint64_t> NpyHeaderEnd(std::span<const std::uint8_t> file_prefix,
                                   std::uint64_t file_size) {
  if (auto status = NeedBytes(kMagic.size(), file_prefix, file_size, "the magic"); !status) {
    return std::unexpected(status.error());
  }
  if (std::memcmp(file_prefix.data(), kMagic.data(), kMagic.size()) != 0) {
    return InvalidArgumentError(
        fmt::format("npy: not a .npy file: it starts with bytes {} instead of the magic \\x93NUMPY",
                    HexBytes(file_prefix.first(kMagic.size()))));
  }
  if (auto status = NeedBytes(kMagicAndVersionBytes, file_prefix, file_size, "the version");
      !status) {
    return std::unexpected(status.error());
  }
  const std::uint8_t major = file_prefix[6];
  const std::uint8_t minor = file_prefix[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return InvalidArgumentError(fmt::format(
        "npy: format version {}.{} is not supported (only 1.0, 2.0 and 3.0)", major, minor));
  }
  const std::uint64_t length_bytes = major == 1 ? 2 : 4;
  const std::uint64_t preamble_bytes = kMagicAndVersionBytes + length_bytes;
  if (auto status = NeedBytes(preamble_bytes, file_prefix, file_size, "the header length field");
      !status) {
    return std::unexpected(status.error());
  }
  const std::uint64_t header_bytes =
      ReadLittleEndian(file_prefix.subspan(kMagicAndVersionBytes, length_bytes));
  if (header_bytes > kMaxNpyHeaderBytes) {
    return InvalidArgumentError(fmt::format("npy: header length {} exceeds the limit of {} bytes",
                                            header_bytes, kMaxNpyHeaderBytes));
  }
  const std::uint64_t header_end = preamble_bytes + header_bytes;
  if (header_end > file_size) {
    return InvalidArgumentError(fmt::format(
        "npy: header length {} runs past the end of the file: the header would end at byte {} of "
        "a {}-byte file",
        header_bytes, header_end, file_size));
  }
  return header_end;
}

Result<NpyHeader> ParseNpyHeader(std::span<const std::uint8_t> file_prefix,
                                 std::uint64_t file_size) {
  auto header_end = NpyHeaderEnd(file_prefix, file_size);
  if (!header_end) return std::unexpected(header_end.error());
  if (auto status = NeedBytes(*header_end, file_prefix, file_size, "the header"); !status) {
    return std::unexpected(status.error());
  }
  const std::uint64_t header_start = kMagicAndVersionBytes + (file_prefix[6] == 1 ? 2u : 4u);
  const std::string_view text(reinterpret_cast<const char*>(file_prefix.data()) + header_start,
                              *header_end - header_start);
  auto dict = HeaderParser(text).Parse();
  if (!dict) return std::unexpected(dict.error());

  auto element_type = ElementTypeOfDescr(dict->descr);
  if (!element_type) return std::unexpected(element_type.error());
  if (dict->fortran_order) {
    return HeaderError(
        "fortran_order True is not supported; save a C-order array "
        "(numpy.ascontiguousarray)");
  }

  // A zero dimension makes the array empty, however large the others are.
  const bool empty = std::ranges::find(dict->shape, std::uint64_t{0}) != dict->shape.end();
  std::uint64_t element_count = empty ? 0 : 1;
  for (std::uint64_t dimension : dict->shape) {
    if (empty) break;
    if (__builtin_mul_overflow(element_count, dimension, &element_count)) {
      return HeaderError(fmt::format("shape {} has more elements than fit in 64 bits",
                                     PythonShape(dict->shape, kMaxShownEntries)));
    }
  }
  const std::uint64_t element_bytes = ElementBitWidth(*element_type) / 8;
  std::uint64_t data_bytes = 0;
  if (__builtin_mul_overflow(element_count, element_bytes, &data_bytes)) {
    return HeaderError(fmt::format("shape {} of {} needs more bytes than fit in 64 bits",
                                   PythonShape(dict->shape, kMaxShownEntries),
                                   Quoted(dict->descr)));
  }
  const std::uint64_t file_data_bytes = file_size - *header_end;
  if (file_data_bytes != data_bytes) {
    return InvalidArgumentError(
        fmt::format("npy: file holds {} data bytes but shape {} of {} needs {}", file_data_bytes,
                    PythonShape(dict->shape, kMaxShownEntries), dict->descr, data_bytes));
  }
  return NpyHeader{.element_type = *element_type,
                   .shape = std::move(dict->shape),
                   .data_offset = *header_end,
                   .data_bytes = data_bytes};
}

Result<std::string> NpyDtype(ElementType element_type) {
  const auto dtype = DtypeOf(element_type);
  if (!dtype) {
    return InvalidArgumentError(
        fmt::format("element type {} has no NumPy dtype", ElementTypeName(element_type)));
  }
  return fmt::format("{}{}{}", dtype->size == 1 ? '|' : '<', dtype->kind, dtype->size);
}

Result<std::string> NpyHeaderFor(ElementType element_type, std::span<const std::uint64_t> shape) {
  auto dtype = NpyDtype(element_type);
  if (!dtype) return std::unexpected(dtype.error());
  const std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                       *dtype, PythonShape(shape));
  // As numpy.lib.format._wrap_header: pad with spaces, end with '\n', align the data to 64
  // bytes (a whole 64 bytes of padding when already aligned).
  for (const int major : {1, 2}) {
    const std::uint64_t length_bytes = major == 1 ? 2 : 4;
    const std::uint64_t preamble_bytes = kMagicAndVersionBytes + length_bytes;
    const std::uint64_t unpadded = dict.size() + 1;
    const std::uint64_t padding = kDataAlignment - (preamble_bytes + unpadded) % kDataAlignment;
    const std::uint64_t header_bytes = unpadded + padding;
    if (header_bytes > (std::uint64_t{1} << (8 * length_bytes)) - 1) continue;
    std::string file_start(kMagic);
    file_start += static_cast<char>(major);
    file_start += '\0';
    for (std::uint64_t i = 0; i < length_bytes; ++i) {
      file_start += static_cast<char>((header_bytes >> (8 * i)) & 0xff);
    }
    file_start += dict;
    file_start.append(padding, ' ');
    file_start += '\n';
    return file_start;
  }
  return InvalidArgumentError(fmt::format(
      "npy: the header of shape with {} dimensions exceeds the 4 GiB a .npy header can hold",
      shape.size()));
}

}  // namespace hurray
