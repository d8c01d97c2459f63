// libFuzzer target for hurray::ParseSafetensorsHeader: the input is a whole .safetensors file.
//
// Whatever the bytes, the parser must return. A refusal must be INVALID_ARGUMENT with a
// message. A header it accepts must keep every promise safetensors.h makes, checked here
// without the parser's help:
//   - data_offset is 8 + the length field, and lies inside the file;
//   - tensors are in order of file_offset (ties: by name), names unique and at most
//     kMaxSafetensorsNameBytes, each range inside the data, non-empty ranges disjoint;
//   - each descriptor is dense with one buffer of exactly byte_size bytes.
// A broken promise prints which one and aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>
#include <variant>

#include "hurray/safetensors.h"

namespace hurray {
namespace {

[[noreturn]] void Broken(std::string_view promise) {
  std::fprintf(stderr, "safetensors_header_fuzzer: broken promise: %.*s\n",
               static_cast<int>(promise.size()), promise.data());
  std::abort();
}

void Require(bool holds, std::string_view promise) {
  if (!holds) Broken(promise);
}

std::uint64_t LengthField(std::span<const std::uint8_t> bytes) {
  std::uint64_t length = 0;
  for (std::size_t i = 0; i < 8; ++i) length |= std::uint64_t{bytes[i]} << (8 * i);
  return length;
}

void CheckAccepted(const SafetensorsHeader& header, std::span<const std::uint8_t> bytes) {
  Require(bytes.size() >= 8, "an accepted file holds the length field");
  Require(header.data_offset == 8 + LengthField(bytes), "data_offset is 8 + the length field");
  Require(header.data_offset <= bytes.size(), "data_offset lies inside the file");
  const SafetensorsTensor* previous = nullptr;
  std::uint64_t covered_end = header.data_offset;
  for (const SafetensorsTensor& tensor : header.tensors) {
    Require(tensor.name.size() <= kMaxSafetensorsNameBytes, "names are within the limit");
    Require(tensor.file_offset >= header.data_offset, "a tensor starts inside the data");
    Require(tensor.byte_size <= bytes.size() - tensor.file_offset, "a tensor ends in the file");
    if (previous != nullptr) {
      Require(previous->file_offset < tensor.file_offset ||
                  (previous->file_offset == tensor.file_offset && previous->name < tensor.name),
              "tensors in order of file_offset, then name, names unique");
    }
    if (tensor.byte_size != 0) {
      Require(tensor.file_offset >= covered_end, "non-empty ranges are disjoint");
      covered_end = tensor.file_offset + tensor.byte_size;
    }
    const auto& buffers = tensor.descriptor.buffers();
    Require(buffers.size() == 1 && buffers[0].byte_size() == tensor.byte_size,
            "one buffer of exactly byte_size bytes");
    Require(std::holds_alternative<DenseLayout>(tensor.descriptor.layout()), "dense layout");
    previous = &tensor;
  }
}

}  // namespace
}  // namespace hurray

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span bytes(data, size);
  auto header = hurray::ParseSafetensorsHeader(std::as_bytes(bytes), size);
  if (header) {
    hurray::CheckAccepted(*header, bytes);
  } else if (header.error().code() != hurray::StatusCode::kInvalidArgument ||
             header.error().message().empty()) {
    hurray::Broken("a refusal is INVALID_ARGUMENT with a message");
  }
  return 0;
}
