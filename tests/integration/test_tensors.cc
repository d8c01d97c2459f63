#include "test_tensors.h"

#include <array>
#include <cstring>
#include <utility>

#include "test_pattern.h"

namespace hurray::integration {
namespace {

BufferHandle Buffer(std::uint64_t byte_size) {
  return *BufferHandle::Create(byte_size, kMinBufferAlignment, DeviceTag::Cpu(),
                               SyncMode::kProducerSynced);
}

TensorDescriptor Build(TensorDescriptor::Parts parts) {
  auto descriptor = TensorDescriptor::Create(std::move(parts));
  if (!descriptor) std::abort();  // The kinds are fixed and valid; a failure is a bug here.
  return *std::move(descriptor);
}

constexpr std::array kKinds = {TensorKind::kDense, TensorKind::kQuantized, TensorKind::kCsr};

}  // namespace

std::string_view TensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::kDense:
      return "dense";
    case TensorKind::kQuantized:
      return "quantized";
    case TensorKind::kCsr:
      return "csr";
  }
  return "unknown";
}

std::optional<TensorKind> TensorKindFromName(std::string_view name) {
  for (TensorKind kind : kKinds) {
    if (TensorKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

TensorDescriptor MakeTestDescriptor(TensorKind kind) {
  TensorDescriptor::Parts parts;
  switch (kind) {
    case TensorKind::kDense:
      parts.element_type = ElementType::kFloat32;
      parts.shape = {256, 1024};
      parts.buffers = {Buffer(256 * 1024 * 4)};
      break;
    case TensorKind::kQuantized:
      parts.element_type = ElementType::kInt8;
      parts.shape = {512, 1024};
      parts.quantization = PerChannelAffine{.axis = 0, .scale_buffer = 1};
      parts.buffers = {Buffer(512 * 1024), Buffer(512 * 4)};
      break;
    case TensorKind::kCsr: {
      constexpr std::uint64_t kRows = 1000;
      constexpr std::uint64_t kNonZeros = 5000;
      parts.element_type = ElementType::kFloat32;
      parts.shape = {kRows, 2000};
      parts.layout = CompressedLayout{.axis = CompressedAxis::kRows,
                                      .values_buffer = 0,
                                      .primary_index_buffer = 1,
                                      .secondary_index_buffer = 2,
                                      .nnz = kNonZeros};
      parts.buffers = {Buffer(kNonZeros * 4), Buffer((kRows + 1) * 8), Buffer(kNonZeros * 8)};
      break;
    }
  }
  parts.metadata = {{"kind", std::string(TensorKindName(kind))}};
  return Build(std::move(parts));
}

std::optional<TensorKind> KindOf(const TensorDescriptor& descriptor) {
  for (TensorKind kind : kKinds) {
    if (MakeTestDescriptor(kind) == descriptor) return kind;
  }
  return std::nullopt;
}

TensorDescriptor MakeByteTensor(std::uint64_t byte_size) {
  return Build(TensorDescriptor::Parts{
      .element_type = ElementType::kUint8, .shape = {byte_size}, .buffers = {Buffer(byte_size)}});
}

void FillBuffer(std::span<std::byte> buffer, std::uint64_t seed, std::uint64_t index) {
  for (std::size_t word = 0; word * 8 < buffer.size(); ++word) {
    const std::uint64_t value = hurray_it_pattern_word(seed, index, word);
    const std::size_t length = std::min<std::size_t>(8, buffer.size() - word * 8);
    for (std::size_t k = 0; k < length; ++k) {
      buffer[word * 8 + k] = static_cast<std::byte>(value >> (k * 8));
    }
  }
}

std::string CheckBuffer(std::span<const std::byte> buffer, std::uint64_t seed,
                        std::uint64_t index) {
  std::size_t differing = 0;
  std::string first;
  for (std::size_t offset = 0; offset < buffer.size(); ++offset) {
    const auto expected = hurray_it_pattern_byte(seed, index, offset);
    const auto actual = std::to_integer<std::uint8_t>(buffer[offset]);
    if (actual == expected) continue;
    if (differing++ == 0) {
      first = "buffer " + std::to_string(index) + " byte " + std::to_string(offset) + " is " +
              std::to_string(actual) + ", expected " + std::to_string(expected);
    }
  }
  if (differing == 0) return {};
  return first + " (" + std::to_string(differing) + " of " + std::to_string(buffer.size()) +
         " bytes differ)";
}

}  // namespace hurray::integration
