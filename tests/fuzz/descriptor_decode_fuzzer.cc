// libFuzzer target for hurray::TensorDescriptor::Decode.
//
// Whatever the bytes, Decode must return. A refusal must be INVALID_ARGUMENT with a message.
// A descriptor it accepts must keep every promise docs/descriptor.md makes, checked here
// without core's help (sizes are recomputed in 128-bit arithmetic, so an overflow that core
// misses cannot hide in a shared helper):
//   - every tag, limit and pairing rule holds (element type, rank, buffers, metadata, which
//     layouts and quantizations go together);
//   - each buffer index of the layout and the quantization resolves, every buffer is
//     referenced exactly once, and each buffer has exactly the bytes its role needs (at least
//     that many for strided dense data);
//   - Encode() is canonical: it decodes to an equal descriptor that encodes to the same bytes,
//     and Create(parts()) accepts the same parts;
//   - ToString() renders, and ValidateDeliveredBuffers accepts the table itself but refuses
//     it with a buffer missing, added, resized, less aligned, on another device or synced
//     differently.
// A broken promise prints which one and aborts, which libFuzzer reports as a crash.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hurray/tensor_descriptor.h"

#if __has_include(<google/protobuf/stubs/common.h>)
#include <google/protobuf/stubs/common.h>
#endif
#if defined(GOOGLE_PROTOBUF_VERSION) && GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#endif

namespace hurray {
namespace {

// An unsigned size that cannot overflow here: results saturate at kHuge, far above any
// 64-bit byte size, so a saturated requirement can never match a buffer.
using Wide = unsigned __int128;
constexpr Wide kHuge = Wide{1} << 100;
constexpr Wide kMax64 = std::numeric_limits<std::uint64_t>::max();

Wide Mul(Wide a, Wide b) {
  if (a != 0 && b > kHuge / a) return kHuge;
  return a * b;
}

Wide Add(Wide a, Wide b) { return std::min(a + b, kHuge); }

Wide CeilDiv(Wide a, Wide b) { return a / b + (a % b != 0 ? 1 : 0); }

Wide Product(std::span<const std::uint64_t> values) {
  Wide product = 1;
  for (std::uint64_t value : values) product = Mul(product, value);
  return product;
}

Wide BytesOf(ElementType type, Wide count) { return CeilDiv(Mul(count, ElementBitWidth(type)), 8); }

std::string Decimal(Wide value) {
  if (value == 0) return "0";
  std::string digits;
  for (; value != 0; value /= 10) {
    digits.insert(digits.begin(), static_cast<char>('0' + value % 10));
  }
  return digits;
}

[[noreturn]] void Broken(std::string_view promise, std::string_view detail) {
  std::fprintf(stderr, "descriptor_decode_fuzzer: broken promise: %.*s\n%.*s\n",
               static_cast<int>(promise.size()), promise.data(), static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// One buffer reference of the layout or the quantization, as the rules define it.
struct Role {
  std::uint32_t index;
  Wide byte_size;
  bool exact;  // false: byte_size is a minimum.
  std::string_view field;
};

// Checks the rules that tie element type, shape, layout and quantization together, and
// derives the buffer each reference needs. Single-use; not thread-safe.
class RuleChecker {
 public:
  explicit RuleChecker(const TensorDescriptor& descriptor)
      : descriptor_(descriptor),
        type_(descriptor.element_type()),
        shape_(descriptor.shape()),
        element_count_(Product(descriptor.shape())) {}

  std::vector<Role> Roles() {
    std::visit([this](const auto& layout) { CheckLayout(layout); }, descriptor_.layout());
    std::visit([this](const auto& quantization) { CheckQuantization(quantization); },
               descriptor_.quantization());
    return roles_;
  }

 private:
  void Require(bool holds, std::string_view promise) const {
    if (!holds) Broken(promise, descriptor_.ToString());
  }

  [[nodiscard]] bool IsDense() const {
    return std::holds_alternative<DenseLayout>(descriptor_.layout());
  }

  void CheckLayout(const DenseLayout& dense) {
    if (dense.strides.empty()) {
      roles_.push_back({dense.data_buffer, BytesOf(type_, element_count_), true, "dense data"});
      return;
    }
    Require(dense.strides.size() == shape_.size(), "dense strides: one per dimension");
    Require(!IsPacked(type_), "dense strides: never for a 4-bit element type");
    // The span the strides address: 1 + sum((dim - 1) * stride) elements, none when empty.
    Wide span = 0;
    if (element_count_ != 0) {
      span = 1;
      for (std::size_t i = 0; i < shape_.size(); ++i) {
        span = Add(span, Mul(shape_[i] - 1, dense.strides[i]));
      }
    }
    roles_.push_back({dense.data_buffer, BytesOf(type_, span), false, "strided dense data"});
  }

  void CheckLayout(const CooLayout& coo) {
    roles_.push_back({coo.values_buffer, BytesOf(type_, coo.nnz), true, "coo values"});
    roles_.push_back(
        {coo.indices_buffer, Mul(Mul(coo.nnz, shape_.size()), 8), true, "coo indices"});
  }

  void CheckLayout(const CompressedLayout& compressed) {
    Require(shape_.size() == 2, "csr/csc: rank 2");
    const bool rows = compressed.axis == CompressedAxis::kRows;
    const Wide offsets = Wide{shape_[rows ? 0 : 1]} + 1;
    roles_.push_back(
        {compressed.values_buffer, BytesOf(type_, compressed.nnz), true, "compressed values"});
    roles_.push_back({compressed.primary_index_buffer, Mul(offsets, 8), true, "offsets"});
    roles_.push_back(
        {compressed.secondary_index_buffer, Mul(compressed.nnz, 8), true, "secondary indices"});
  }

  void CheckLayout(const BlockPagedLayout& paged) {
    Require(!shape_.empty(), "block_paged: rank 1 or more");
    Require(paged.block_size >= 1, "block_paged: block_size at least 1");
    const Wide blocks = CeilDiv(shape_[0], paged.block_size);
    Require(blocks == 0 || paged.num_pages >= 1, "block_paged: a page when there is a block");
    const Wide page_bits =
        Mul(Mul(Product(std::span(shape_).subspan(1)), paged.block_size), ElementBitWidth(type_));
    Require(page_bits % 8 == 0, "block_paged: a page ends on a byte");
    roles_.push_back({paged.data_buffer, Mul(page_bits / 8, paged.num_pages), true, "pages"});
    roles_.push_back({paged.page_table_buffer, Mul(blocks, 8), true, "page table"});
  }

  void CheckQuantization(const NoQuantization&) {
    Require(type_ != ElementType::kNf4, "nf4 elements need nf4 quantization");
  }

  void CheckAffineStorage() const {
    Require(IsInteger(type_) || type_ == ElementType::kFloat8E4m3fn ||
                type_ == ElementType::kFloat8E5m2,
            "affine quantization stores integers or 8-bit floats");
  }

  void CheckQuantization(const PerTensorAffine& affine) {
    CheckAffineStorage();
    Require(std::isfinite(affine.scale) && affine.scale != 0.0,
            "per_tensor_affine: scale finite and non-zero");
  }

  void CheckQuantization(const PerChannelAffine& affine) {
    CheckAffineStorage();
    Require(affine.axis < shape_.size(), "per_channel_affine: axis below the rank");
    Require(IsWideFloat(affine.scale_type), "per_channel_affine: scales are wide floats");
    const std::uint64_t channels = shape_[affine.axis];
    roles_.push_back(
        {affine.scale_buffer, BytesOf(affine.scale_type, channels), true, "channel scales"});
    if (affine.zero_points) {
      const ElementType type = affine.zero_points->type;
      Require(!IsPacked(type) && (IsInteger(type) || IsWideFloat(type)),
              "per_channel_affine: zero points are byte-sized or wider integers or floats");
      roles_.push_back(
          {affine.zero_points->buffer, BytesOf(type, channels), true, "channel zero points"});
    }
  }

  void CheckQuantization(const Nf4Quantization& nf4) {
    Require(type_ == ElementType::kNf4, "nf4 quantization: element type nf4");
    Require(IsDense(), "nf4 quantization: dense layout");
    Require(nf4.block_size >= 1, "nf4 quantization: block_size at least 1");
    Require(nf4.scale_type == ElementType::kFloat16 || nf4.scale_type == ElementType::kBfloat16 ||
                nf4.scale_type == ElementType::kFloat32,
            "nf4 quantization: scales are float16, bfloat16 or float32");
    roles_.push_back({nf4.scale_buffer,
                      BytesOf(nf4.scale_type, CeilDiv(element_count_, nf4.block_size)), true,
                      "nf4 scales"});
  }

  void CheckQuantization(const MxfpQuantization& mxfp) {
    Require(type_ == ElementType::kMxfp4 || type_ == ElementType::kFloat8E4m3fn ||
                type_ == ElementType::kFloat8E5m2,
            "mxfp quantization: element type mxfp4, float8_e4m3fn or float8_e5m2");
    Require(IsDense(), "mxfp quantization: dense layout");
    Require(!shape_.empty(), "mxfp quantization: rank 1 or more");
    Require(mxfp.block_size >= 1, "mxfp quantization: block_size at least 1");
    const Wide rows = Product(std::span(shape_).first(shape_.size() - 1));
    // One float8_e8m0 byte per scale.
    roles_.push_back({mxfp.scale_buffer, Mul(rows, CeilDiv(shape_.back(), mxfp.block_size)), true,
                      "mxfp scales"});
  }

  const TensorDescriptor& descriptor_;
  const ElementType type_;
  const std::vector<std::uint64_t>& shape_;
  const Wide element_count_;
  std::vector<Role> roles_;
};

bool IsNamedOrPrivate(std::uint8_t byte, std::uint8_t last_named) {
  return byte <= last_named || (byte >= 0xF0 && byte <= 0xFE);
}

void CheckFields(const TensorDescriptor& descriptor, const std::string& text) {
  auto require = [&text](bool holds, std::string_view promise) {
    if (!holds) Broken(promise, text);
  };
  const std::uint8_t tag = ElementTypeTag(descriptor.element_type());
  require(tag >= 1 && tag <= 22, "element type tag is 1-22");
  require(descriptor.rank() == descriptor.shape().size() && descriptor.rank() <= kMaxRank,
          "rank at most kMaxRank");
  const Wide count = Product(descriptor.shape());
  require(count <= kMax64 && descriptor.ElementCount() == count,
          "ElementCount() is the product of the shape and fits in 64 bits");

  const auto& buffers = descriptor.buffers();
  require(!buffers.empty(), "every descriptor has a buffer");
  require(descriptor.device_tag() == buffers.front().device_tag() &&
              descriptor.memory_class() == buffers.front().memory_class(),
          "device_tag() and memory_class() are buffer 0's");
  for (const BufferHandle& buffer : buffers) {
    require(std::has_single_bit(buffer.alignment()), "alignment is a power of two");
    require(buffer.IsEmpty() || buffer.alignment() >= kMinBufferAlignment,
            "a non-empty buffer is aligned to at least 64");
    require(IsNamedOrPrivate(buffer.device_tag().ToByte(), 0x08),
            "device tag is named (0x00-0x08) or private (0xF0-0xFE)");
    require(IsNamedOrPrivate(buffer.memory_class().ToByte(), 0x03),
            "memory class is named (0x00-0x03) or private (0xF0-0xFE)");
    require(SyncModeToByte(buffer.sync_mode()) <= 0x02, "sync mode is 0x00-0x02");
    require(buffer.device_tag() == buffers.front().device_tag() &&
                buffer.memory_class() == buffers.front().memory_class(),
            "colocation: one device tag and memory class");
  }

  require(descriptor.metadata().size() <= kMaxMetadataEntries, "metadata entry limit");
  for (const auto& [key, value] : descriptor.metadata()) {
    require(!key.empty() && key.size() <= kMaxMetadataKeyBytes, "metadata key of 1-256 bytes");
    require(value.size() <= kMaxMetadataValueBytes, "metadata value of at most 65536 bytes");
  }
}

void CheckBufferTable(const TensorDescriptor& descriptor, const std::string& text) {
  const std::vector<Role> roles = RuleChecker(descriptor).Roles();
  const auto& buffers = descriptor.buffers();
  std::vector<const Role*> role_of_buffer(buffers.size(), nullptr);
  for (const Role& role : roles) {
    if (role.index >= buffers.size()) {
      Broken(std::string(role.field) + " index resolves in the buffer table", text);
    }
    if (role_of_buffer[role.index] != nullptr) {
      Broken(std::string(role.field) + " buffer has no other role", text);
    }
    role_of_buffer[role.index] = &role;
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const Role* role = role_of_buffer[i];
    if (role == nullptr) Broken("every buffer is referenced", text);
    const Wide actual = buffers[i].byte_size();
    if (role->exact ? actual != role->byte_size : actual < role->byte_size) {
      Broken(std::string(role->field) + " buffer holds " + (role->exact ? "" : "at least ") +
                 Decimal(role->byte_size) + " bytes, not " + Decimal(actual),
             text);
    }
  }
}

void CheckRoundTrip(const TensorDescriptor& descriptor, const std::string& text) {
  const std::string bytes = descriptor.Encode();
  if (descriptor.Encode() != bytes) Broken("Encode() is deterministic", text);
  auto again = TensorDescriptor::Decode(
      std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
  if (!again) Broken("Encode() decodes again", again.error().ToString() + "\n" + text);
  if (*again != descriptor) Broken("Encode() decodes to an equal descriptor", text);
  if (again->Encode() != bytes) Broken("re-encoding gives the same bytes", text);
  auto created = TensorDescriptor::Create(descriptor.parts());
  if (!created) Broken("Create(parts()) accepts", created.error().ToString() + "\n" + text);
  if (*created != descriptor) Broken("Create(parts()) gives an equal descriptor", text);
}

// `buffer` declared again with the given properties; its memory class is kept.
BufferHandle Modified(const BufferHandle& buffer, std::uint64_t byte_size, std::uint64_t alignment,
                      DeviceTag device_tag, SyncMode sync_mode, const std::string& text) {
  auto modified =
      BufferHandle::Create(byte_size, alignment, device_tag, sync_mode, buffer.memory_class());
  if (!modified) {
    Broken("a modified buffer is creatable", modified.error().ToString() + "\n" + text);
  }
  return *modified;
}

void CheckDeliveredBuffers(const TensorDescriptor& descriptor, const std::string& text) {
  const std::vector<BufferHandle>& table = descriptor.buffers();
  auto require_accepted = [&](std::span<const BufferHandle> delivered, std::string_view what) {
    auto status = descriptor.ValidateDeliveredBuffers(delivered);
    if (!status) Broken(what, status.error().ToString() + "\n" + text);
  };
  auto require_refused = [&](std::span<const BufferHandle> delivered, std::string_view what) {
    auto status = descriptor.ValidateDeliveredBuffers(delivered);
    if (status) Broken(what, text);
    if (status.error().code() != StatusCode::kInvalidArgument || status.error().message().empty()) {
      Broken("a refused buffer list is INVALID_ARGUMENT with a message", text);
    }
  };
  require_accepted(table, "ValidateDeliveredBuffers accepts the table itself");
  require_refused(std::span(table).first(table.size() - 1),
                  "ValidateDeliveredBuffers refuses a missing buffer");
  std::vector<BufferHandle> delivered = table;
  delivered.push_back(table.back());
  require_refused(delivered, "ValidateDeliveredBuffers refuses an extra buffer");

  const BufferHandle& last = table.back();
  delivered = table;
  if (last.byte_size() < kMax64) {
    delivered.back() =
        Modified(last, last.byte_size() + 1, std::max(last.alignment(), kMinBufferAlignment),
                 last.device_tag(), last.sync_mode(), text);
    require_refused(delivered, "ValidateDeliveredBuffers refuses a resized buffer");
  }
  if (last.alignment() < (std::uint64_t{1} << 63)) {
    delivered.back() = Modified(last, last.byte_size(), last.alignment() * 2, last.device_tag(),
                                last.sync_mode(), text);
    require_accepted(delivered, "ValidateDeliveredBuffers accepts a better-aligned buffer");
  }
  if (last.alignment() / 2 >= (last.IsEmpty() ? 1 : kMinBufferAlignment)) {
    delivered.back() = Modified(last, last.byte_size(), last.alignment() / 2, last.device_tag(),
                                last.sync_mode(), text);
    require_refused(delivered, "ValidateDeliveredBuffers refuses a less-aligned buffer");
  }
  const DeviceTag other_device =
      last.device_tag() == DeviceTag::Cpu() ? DeviceTag::Cuda() : DeviceTag::Cpu();
  delivered.back() =
      Modified(last, last.byte_size(), last.alignment(), other_device, last.sync_mode(), text);
  require_refused(delivered, "ValidateDeliveredBuffers refuses a buffer on another device");
  const SyncMode other_sync =
      last.sync_mode() == SyncMode::kProducerSynced ? SyncMode::kEvent : SyncMode::kProducerSynced;
  delivered.back() =
      Modified(last, last.byte_size(), last.alignment(), last.device_tag(), other_sync, text);
  require_refused(delivered, "ValidateDeliveredBuffers refuses another sync mode");
}

void CheckAccepted(const TensorDescriptor& descriptor) {
  const std::string text = descriptor.ToString();
  if (text.empty()) Broken("ToString() renders something", "");
  CheckFields(descriptor, text);
  CheckBufferTable(descriptor, text);
  CheckRoundTrip(descriptor, text);
  CheckDeliveredBuffers(descriptor, text);
}

void CheckRefused(const Error& error) {
  if (error.code() != StatusCode::kInvalidArgument) {
    Broken("Decode refuses with INVALID_ARGUMENT", error.ToString());
  }
  if (error.message().empty()) Broken("Decode's refusal has a message", error.ToString());
}

}  // namespace
}  // namespace hurray

// protobuf logs each string field it refuses for invalid UTF-8; at thousands of inputs a
// second that logging would be most of the work. (Protobuf 22 and later log through Abseil
// and are left as they are.)
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
#if defined(GOOGLE_PROTOBUF_VERSION) && GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(nullptr);
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto decoded = hurray::TensorDescriptor::Decode(std::span(data, size));
  if (decoded) {
    hurray::CheckAccepted(*decoded);
  } else {
    hurray::CheckRefused(decoded.error());
  }
  return 0;
}
