// Builds a per-channel-quantized int8 weight matrix (data, scales and zero points: three
// buffers), encodes its descriptor, decodes the bytes again and prints both ends.
#include <cstdio>
#include <span>

#include "hurray/tensor_descriptor.h"

namespace {

int Fail(const hurray::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.ToString().c_str());
  return 1;
}

}  // namespace

// Out of memory is the only exception left to escape; it ends the tour as it should.
int main() {  // NOLINT(bugprone-exception-escape)
  using hurray::BufferHandle;
  using hurray::DeviceTag;
  using hurray::ElementType;
  using hurray::SyncMode;

  constexpr std::uint64_t kRows = 4096;
  constexpr std::uint64_t kColumns = 1024;
  auto data = BufferHandle::Create(kRows * kColumns, hurray::kPageAlignment, DeviceTag::Cpu(),
                                   SyncMode::kProducerSynced);
  auto scales = BufferHandle::Create(kRows * sizeof(float), hurray::kMinBufferAlignment,
                                     DeviceTag::Cpu(), SyncMode::kProducerSynced);
  auto zero_points = BufferHandle::Create(kRows, hurray::kMinBufferAlignment, DeviceTag::Cpu(),
                                          SyncMode::kProducerSynced);
  if (!data || !scales || !zero_points) return 1;

  hurray::TensorDescriptor::Parts parts;
  parts.element_type = ElementType::kInt8;
  parts.shape = {kRows, kColumns};
  parts.quantization = hurray::PerChannelAffine{
      .axis = 0,
      .scale_buffer = 1,
      .scale_type = ElementType::kFloat32,
      .zero_points = hurray::ZeroPoints{.buffer = 2, .type = ElementType::kInt8}};
  parts.buffers = {*data, *scales, *zero_points};
  parts.metadata = {{"model", "tour-7b"}, {"parameter", "layers.0.mlp.up_proj.weight"}};

  auto descriptor = hurray::TensorDescriptor::Create(parts);
  if (!descriptor) return Fail(descriptor.error());
  std::printf("built:\n%s\n", descriptor->ToString().c_str());

  const std::string bytes = descriptor->Encode();
  std::printf("encoded: %zu bytes of hurray.v1.TensorDescriptor\n\n", bytes.size());

  auto decoded = hurray::TensorDescriptor::Decode(
      std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
  if (!decoded) return Fail(decoded.error());
  std::printf("decoded:\n%s\n", decoded->ToString().c_str());
  std::printf("round trip %s\n\n", *decoded == *descriptor ? "equal" : "DIFFERENT");

  // A broken descriptor is refused with the field and value named.
  parts.buffers[1] = *BufferHandle::Create(kRows * sizeof(float) / 2, 64, DeviceTag::Cpu(),
                                           SyncMode::kProducerSynced);
  auto broken = hurray::TensorDescriptor::Create(parts);
  std::printf("a scale buffer of half the size is refused:\n  %s\n",
              broken ? "accepted?!" : broken.error().ToString().c_str());
  return *decoded == *descriptor && !broken ? 0 : 1;
}
