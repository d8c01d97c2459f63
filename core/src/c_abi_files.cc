// The .hrry file functions of hurray.h: HurrayWriter and HurrayReader over FileWriter and
// FileReader. They reach descriptors and buffer lists through the handle functions of
// hurray.h only, as any other client of those handles does. Every entry point runs inside
// Guard.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "hurray.h"
#include "hurray/c_abi_internal.h"
#include "hurray/file_reader.h"
#include "hurray/file_writer.h"

struct HurrayWriter {
  hurray::FileWriter writer;
};

struct HurrayReader {
  hurray::FileReader reader;
};

namespace {

using hurray::internal::FailAfterCleanup;
using hurray::internal::Guard;
using hurray::internal::NullArgument;
using hurray::internal::SetLastError;

HurrayStatus FailureOf(const hurray::Status& status) {
  return status ? HURRAY_OK : SetLastError(status.error());
}

// The descriptor behind a handle, through its encoding (the handle's one public view).
std::optional<hurray::TensorDescriptor> DescriptorOf(const HurrayDescriptor* handle,
                                                     HurrayStatus& status) {
  uint8_t* bytes = nullptr;
  size_t len = 0;
  status = hurray_descriptor_encode(handle, &bytes, &len);
  if (status != HURRAY_OK) return std::nullopt;
  auto descriptor = hurray::TensorDescriptor::Decode(std::span<const std::uint8_t>(bytes, len));
  hurray_bytes_free(bytes);
  if (!descriptor) {
    status = SetLastError(descriptor.error());
    return std::nullopt;
  }
  return *std::move(descriptor);
}

// The bytes of every buffer of `list`, in order; each must be in host memory.
HurrayStatus HostBytesOf(const HurrayBufferList* list,
                         std::vector<std::span<const std::byte>>& spans) {
  uint64_t count = 0;
  if (HurrayStatus status = hurray_buffer_list_len(list, &count); status != HURRAY_OK) {
    return status;
  }
  for (uint64_t i = 0; i < count; ++i) {
    HurrayBuffer* buffer = nullptr;
    void* data = nullptr;
    uint64_t size = 0;
    uint8_t device = 0;
    for (HurrayStatus status :
         {hurray_buffer_list_get(list, i, &buffer), hurray_buffer_data_ptr(buffer, &data),
          hurray_buffer_byte_size(buffer, &size), hurray_buffer_device_tag(buffer, &device)}) {
      if (status != HURRAY_OK) return status;
    }
    if (device != HURRAY_DEVICE_CPU) {
      return SetLastError(HURRAY_ERR_INVALID_ARGUMENT,
                          fmt::format("hurray_writer_write_tensor: buffers[{}] has device_tag "
                                      "0x{:02X}; only CPU (host) memory can be written",
                                      i, device));
    }
    spans.emplace_back(static_cast<const std::byte*>(data), static_cast<std::size_t>(size));
  }
  return HURRAY_OK;
}

void FreeAligned(void* data, void* /*release_context*/) { std::free(data); }

// Host memory for each buffer of `tensor`, aligned to its table entry (null when empty).
// Returns false (memory freed) when an allocation fails.
bool AllocateBuffers(const hurray::FileTensorEntry& tensor, std::vector<void*>& memory) {
  const auto& table = tensor.descriptor.buffers();
  for (const hurray::BufferHandle& entry : table) {
    void* data = nullptr;
    if (!entry.IsEmpty()) {
      const std::uint64_t alignment = entry.alignment();
      const std::uint64_t rounded = (entry.byte_size() + alignment - 1) / alignment * alignment;
      if (rounded >= entry.byte_size() && rounded <= SIZE_MAX) {
        data = std::aligned_alloc(static_cast<std::size_t>(alignment),
                                  static_cast<std::size_t>(rounded));
      }
      if (data == nullptr) {
        std::ranges::for_each(memory, std::free);
        return false;
      }
    }
    memory.push_back(data);
  }
  return true;
}

// Wraps the filled memory in buffer handles of a new list; frees it all on failure.
HurrayStatus ListOf(const hurray::TensorDescriptor& descriptor, std::vector<void*>& memory,
                    HurrayBufferList** out) {
  HurrayBufferList* list = nullptr;
  HurrayStatus status = hurray_buffer_list_new(memory.size(), &list);
  std::size_t wrapped = 0;
  for (; status == HURRAY_OK && wrapped < memory.size(); ++wrapped) {
    const hurray::BufferHandle& entry = descriptor.buffers()[wrapped];
    HurrayBuffer* buffer = nullptr;
    status = hurray_buffer_from_ptr(memory[wrapped], entry.byte_size(), entry.alignment(),
                                    entry.device_tag().ToByte(),
                                    hurray::SyncModeToByte(entry.sync_mode()),
                                    entry.memory_class().ToByte(), FreeAligned, nullptr, &buffer);
    if (status != HURRAY_OK) break;
    status = hurray_buffer_list_push(list, buffer);
    if (status != HURRAY_OK) {
      status = FailAfterCleanup(status, [&] { (void)hurray_buffer_destroy(buffer); });  // Frees it.
    }
  }
  if (status != HURRAY_OK) {
    // Buffers already wrapped are freed with the list; the rest here.
    std::for_each(memory.begin() + static_cast<std::ptrdiff_t>(wrapped), memory.end(), std::free);
    return FailAfterCleanup(status, [&] { (void)hurray_buffer_list_destroy(&list); });
  }
  *out = list;
  return HURRAY_OK;
}

}  // namespace

extern "C" {

HurrayStatus hurray_writer_open(const char* path, HurrayWriter** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(path);
    HURRAY_REQUIRE(out);
    auto writer = hurray::FileWriter::Create(path);
    if (!writer) return SetLastError(writer.error());
    *out = new HurrayWriter{*std::move(writer)};
    return HURRAY_OK;
  });
}

HurrayStatus hurray_writer_write_tensor(HurrayWriter* writer, const char* name,
                                        const HurrayDescriptor* descriptor,
                                        const HurrayBufferList* buffers) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(writer);
    HURRAY_REQUIRE(name);
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(buffers);
    HurrayStatus status = HURRAY_OK;
    const auto decoded = DescriptorOf(descriptor, status);
    if (!decoded) return status;
    std::vector<std::span<const std::byte>> spans;
    status = HostBytesOf(buffers, spans);
    if (status != HURRAY_OK) return status;
    return FailureOf(writer->writer.WriteTensor(name, *decoded, spans));
  });
}

HurrayStatus hurray_writer_finish(HurrayWriter* writer) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(writer);
    return FailureOf(writer->writer.Finish());
  });
}

HurrayStatus hurray_writer_destroy(HurrayWriter** writer) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(writer);
    delete *writer;
    *writer = nullptr;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_reader_open(const char* path, HurrayReader** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(path);
    HURRAY_REQUIRE(out);
    auto reader = hurray::FileReader::Open(path);
    if (!reader) return SetLastError(reader.error());
    *out = new HurrayReader{*std::move(reader)};
    return HURRAY_OK;
  });
}

HurrayStatus hurray_reader_tensor_count(const HurrayReader* reader, uint64_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(reader);
    HURRAY_REQUIRE(out);
    *out = reader->reader.tensors().size();
    return HURRAY_OK;
  });
}

}  // extern "C"

namespace {

// The tensor at `index`, or null with HURRAY_ERR_OUT_OF_RANGE recorded in `status`.
const hurray::FileTensorEntry* TensorAt(const HurrayReader* reader, uint64_t index,
                                        const char* function, HurrayStatus& status) {
  const auto tensors = reader->reader.tensors();
  if (index < tensors.size()) return &tensors[static_cast<std::size_t>(index)];
  status = SetLastError(HURRAY_ERR_OUT_OF_RANGE,
                        fmt::format("{}: index {} is out of range for a file of {} tensors",
                                    function, index, tensors.size()));
  return nullptr;
}

}  // namespace

extern "C" {

HurrayStatus hurray_reader_tensor_name(const HurrayReader* reader, uint64_t index, char* buffer,
                                       uint64_t* in_out_size) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(reader);
    HURRAY_REQUIRE(in_out_size);
    HurrayStatus status = HURRAY_OK;
    const hurray::FileTensorEntry* tensor =
        TensorAt(reader, index, "hurray_reader_tensor_name", status);
    if (tensor == nullptr) return status;
    const std::uint64_t needed = tensor->name.size() + 1;
    if (buffer == nullptr || *in_out_size < needed) {
      const std::uint64_t capacity = buffer == nullptr ? 0 : *in_out_size;
      *in_out_size = needed;
      return SetLastError(HURRAY_ERR_BUFFER_TOO_SMALL,
                          fmt::format("hurray_reader_tensor_name: capacity {} is below the {} "
                                      "bytes of the name and its NUL",
                                      capacity, needed));
    }
    std::memcpy(buffer, tensor->name.c_str(), static_cast<std::size_t>(needed));
    *in_out_size = needed;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_reader_read_tensor(const HurrayReader* reader, uint64_t index,
                                       HurrayDescriptor** out_descriptor,
                                       HurrayBufferList** out_buffers) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(reader);
    HURRAY_REQUIRE(out_descriptor);
    HURRAY_REQUIRE(out_buffers);
    HurrayStatus status = HURRAY_OK;
    const hurray::FileTensorEntry* tensor =
        TensorAt(reader, index, "hurray_reader_read_tensor", status);
    if (tensor == nullptr) return status;
    if (tensor->descriptor.device_tag() != hurray::DeviceTag::Cpu()) {
      return SetLastError(
          HURRAY_ERR_FAILED_PRECONDITION,
          fmt::format("hurray_reader_read_tensor: tensor {} ({}) declares "
                      "device_tag 0x{:02X}; the reader gives host memory only",
                      index, tensor->name, tensor->descriptor.device_tag().ToByte()));
    }
    std::vector<void*> memory;
    if (!AllocateBuffers(*tensor, memory)) {
      return SetLastError(HURRAY_ERR_OUT_OF_MEMORY,
                          fmt::format("hurray_reader_read_tensor: no memory for tensor {} ({})",
                                      index, tensor->name));
    }
    std::vector<hurray::FileReader::BufferDestination> destinations;
    for (std::size_t i = 0; i < memory.size(); ++i) {
      const auto size = static_cast<std::size_t>(tensor->buffers[i].byte_size);
      destinations.push_back({.tensor = static_cast<std::size_t>(index),
                              .buffer = i,
                              .destination = {static_cast<std::byte*>(memory[i]), size}});
    }
    if (auto read = reader->reader.ReadBuffers(destinations); !read) {
      std::ranges::for_each(memory, std::free);
      return SetLastError(read.error());
    }
    const std::string encoded = tensor->descriptor.Encode();
    HurrayDescriptor* descriptor = nullptr;
    status = hurray_descriptor_decode(reinterpret_cast<const uint8_t*>(encoded.data()),
                                      encoded.size(), &descriptor);
    if (status != HURRAY_OK) {
      std::ranges::for_each(memory, std::free);
      return status;
    }
    status = ListOf(tensor->descriptor, memory, out_buffers);
    if (status != HURRAY_OK) {
      return FailAfterCleanup(status, [&] { (void)hurray_descriptor_destroy(descriptor); });
    }
    *out_descriptor = descriptor;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_reader_destroy(HurrayReader** reader) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(reader);
    delete *reader;
    *reader = nullptr;
    return HURRAY_OK;
  });
}

}  // extern "C"
