// Publishes a per-channel-quantized int8 weight matrix (data + scales: two buffers) through
// hurrayd. Run `make run` (the daemon) in one terminal and this in another:
//   build/examples/producer [NAME]
#include <cstdio>
#include <cstring>

#include "hurray/client.h"

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "examples/weights";
  constexpr std::uint64_t kRows = 1024;
  constexpr std::uint64_t kColumns = 4096;

  auto client = hurray::Client::Connect({.socket_path = "", .client_name = "example-producer"});
  if (!client) {
    std::fprintf(stderr, "producer: %s\n", client.error().ToString().c_str());
    return 1;
  }
  hurray::TensorDescriptor::Parts parts;
  parts.element_type = hurray::ElementType::kInt8;
  parts.shape = {kRows, kColumns};
  parts.quantization = hurray::PerChannelAffine{.axis = 0, .scale_buffer = 1};
  parts.buffers = {
      *hurray::BufferHandle::Create(kRows * kColumns, hurray::kPageAlignment,
                                    hurray::DeviceTag::Cpu(), hurray::SyncMode::kProducerSynced),
      *hurray::BufferHandle::Create(kRows * sizeof(float), hurray::kPageAlignment,
                                    hurray::DeviceTag::Cpu(), hurray::SyncMode::kProducerSynced)};
  parts.metadata = {{"producer", "examples/producer.cc"}};
  auto descriptor = hurray::TensorDescriptor::Create(parts);
  if (!descriptor) {
    std::fprintf(stderr, "producer: %s\n", descriptor.error().ToString().c_str());
    return 1;
  }

  auto tensor = (*client)->Allocate(*descriptor);
  if (!tensor) {
    std::fprintf(stderr, "producer: %s\n", tensor.error().ToString().c_str());
    return 1;
  }
  // Write in place: the buffers are the daemon's shared memory, mapped read-write.
  std::span<std::byte> data = tensor->buffer(0);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7 % 251);
  std::span<std::byte> scales = tensor->buffer(1);
  for (std::uint64_t row = 0; row < kRows; ++row) {
    const float scale = 0.01F * static_cast<float>(row + 1);
    std::memcpy(scales.data() + row * sizeof(float), &scale, sizeof(float));
  }

  auto published = tensor->Publish(name);
  if (!published) {
    std::fprintf(stderr, "producer: %s\n", published.error().ToString().c_str());
    return 1;
  }
  std::printf("published %s version %llu: %s", published->name.c_str(),
              static_cast<unsigned long long>(published->version), descriptor->ToString().c_str());
  return 0;
}
