// The C ABI of hurray.h. Every entry point runs inside Guard, so no exception crosses the
// boundary, and every error leaves a message for hurray_last_error_message.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <unordered_map>
#include <vector>

#include "hurray.h"
#include "hurray/c_abi_internal.h"
#include "hurray/tensor_descriptor.h"

struct HurrayBuffer {
  void* data;
  hurray::BufferHandle handle;
  HurrayReleaseCallback release;
  void* release_context;
  bool owned_by_list = false;
  // Event attached by hurray_buffer_handoff_event, released with the buffer.
  void* sync_event = nullptr;
  HurrayEventReleaseCallback event_release = nullptr;
  void* event_release_context = nullptr;
};

struct HurrayBufferList {
  std::vector<HurrayBuffer*> buffers;  // Owned.
};

struct HurrayDescriptor {
  hurray::TensorDescriptor descriptor;
};

struct HurrayTensorContext {
  std::uint32_t abi_version = HURRAY_C_ABI_VERSION;  // First, as every ABI version keeps it.
  std::vector<std::uint8_t> descriptor_bytes;
  HurrayOwnerRelease owner_release;
  void* owner_context;
};

namespace {

using hurray::internal::CurrentFunction;
using hurray::internal::Guard;
using hurray::internal::NullArgument;
using hurray::internal::SetLastError;

#ifndef NDEBUG
// Debug builds track every live handle, so a double destroy (or a handle of the wrong kind)
// is reported as HURRAY_ERR_INTERNAL instead of freeing memory twice. Thread-safe.
enum class HandleKind : std::uint8_t { kBuffer, kList, kDescriptor, kContext };

class LiveHandles {
 public:
  void Add(const void* handle, HandleKind kind) {
    std::lock_guard lock(mutex_);
    live_[handle] = kind;
  }
  // Removes the handle; false when it was not live with that kind.
  bool Remove(const void* handle, HandleKind kind) {
    std::lock_guard lock(mutex_);
    auto found = live_.find(handle);
    if (found == live_.end() || found->second != kind) return false;
    live_.erase(found);
    return true;
  }
  [[nodiscard]] bool Contains(const void* handle, HandleKind kind) {
    std::lock_guard lock(mutex_);
    auto found = live_.find(handle);
    return found != live_.end() && found->second == kind;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<const void*, HandleKind> live_;  // Guarded by mutex_.
};

LiveHandles& Live() {
  static auto* live = new LiveHandles();  // Never destroyed: destroys may run at exit.
  return *live;
}

#define HURRAY_TRACK(handle, kind) Live().Add(handle, HandleKind::kind)
#define HURRAY_UNTRACK_OR_FAIL(handle, kind, what)                                                 \
  do {                                                                                             \
    if (!Live().Remove(handle, HandleKind::kind)) {                                                \
      return SetLastError(                                                                         \
          HURRAY_ERR_INTERNAL,                                                                     \
          fmt::format("{}: {} is not a live handle (destroyed twice?)", CurrentFunction(), what)); \
    }                                                                                              \
  } while (false)
#define HURRAY_CHECK_LIVE(handle, kind, what)                                                   \
  do {                                                                                          \
    if (!Live().Contains(handle, HandleKind::kind)) {                                           \
      return SetLastError(HURRAY_ERR_INTERNAL,                                                  \
                          fmt::format("{}: {} is not a live handle", CurrentFunction(), what)); \
    }                                                                                           \
  } while (false)
#else
#define HURRAY_TRACK(handle, kind) ((void)0)
#define HURRAY_UNTRACK_OR_FAIL(handle, kind, what) ((void)0)
#define HURRAY_CHECK_LIVE(handle, kind, what) ((void)0)
#endif

// Releases what a buffer owns and frees it. Runs each callback exactly once.
void FreeBuffer(HurrayBuffer* buffer) {
  if (buffer->release != nullptr) buffer->release(buffer->data, buffer->release_context);
  if (buffer->sync_event != nullptr && buffer->event_release != nullptr) {
    buffer->event_release(buffer->sync_event, buffer->event_release_context);
  }
  delete buffer;
}

// Translates a C++ result's error into the thread's last error and a status.
template <typename T>
std::optional<HurrayStatus> FailureOf(const hurray::Result<T>& result) {
  if (result) return std::nullopt;
  return SetLastError(result.error());
}

HurrayStatus SyncModeMismatch(const HurrayBuffer* buffer, hurray::SyncMode expected) {
  return SetLastError(HURRAY_ERR_SYNC_MODE_MISMATCH,
                      fmt::format("{}: buffer declares sync_mode {}, not {}", CurrentFunction(),
                                  hurray::SyncModeName(buffer->handle.sync_mode()),
                                  hurray::SyncModeName(expected)));
}

HurrayStatus CheckHandoffDevice(const HurrayBuffer* buffer, std::uint8_t device_tag,
                                const char* field) {
  const std::uint8_t buffer_tag = buffer->handle.device_tag().ToByte();
  if (device_tag == buffer_tag) return HURRAY_OK;
  return SetLastError(HURRAY_ERR_INVALID_ARGUMENT,
                      fmt::format("{}: {} 0x{:02X} differs from the buffer's device_tag 0x{:02X}",
                                  CurrentFunction(), field, device_tag, buffer_tag));
}

}  // namespace

extern "C" {

uint32_t hurray_c_abi_version(void) { return HURRAY_C_ABI_VERSION; }

const char* hurray_status_name(HurrayStatus status) {
  switch (status) {
    case HURRAY_OK:
      return "HURRAY_OK";
    case HURRAY_ERR_NULL_POINTER:
      return "HURRAY_ERR_NULL_POINTER";
    case HURRAY_ERR_INVALID_ARGUMENT:
      return "HURRAY_ERR_INVALID_ARGUMENT";
    case HURRAY_ERR_BUFFER_TOO_SMALL:
      return "HURRAY_ERR_BUFFER_TOO_SMALL";
    case HURRAY_ERR_SYNC_MODE_MISMATCH:
      return "HURRAY_ERR_SYNC_MODE_MISMATCH";
    case HURRAY_ERR_OUT_OF_RANGE:
      return "HURRAY_ERR_OUT_OF_RANGE";
    case HURRAY_ERR_OUT_OF_MEMORY:
      return "HURRAY_ERR_OUT_OF_MEMORY";
    case HURRAY_ERR_INTERNAL:
      return "HURRAY_ERR_INTERNAL";
    case HURRAY_ERR_INTERNAL_PANIC:
      return "HURRAY_ERR_INTERNAL_PANIC";
    case HURRAY_ERR_NOT_FOUND:
      return "HURRAY_ERR_NOT_FOUND";
    case HURRAY_ERR_TIMEOUT:
      return "HURRAY_ERR_TIMEOUT";
    case HURRAY_ERR_UNAVAILABLE:
      return "HURRAY_ERR_UNAVAILABLE";
    case HURRAY_ERR_PERMISSION_DENIED:
      return "HURRAY_ERR_PERMISSION_DENIED";
    case HURRAY_ERR_RESOURCE_EXHAUSTED:
      return "HURRAY_ERR_RESOURCE_EXHAUSTED";
    case HURRAY_ERR_FAILED_PRECONDITION:
      return "HURRAY_ERR_FAILED_PRECONDITION";
    case HURRAY_ERR_DAEMON_INTERNAL:
      return "HURRAY_ERR_DAEMON_INTERNAL";
    case HURRAY_ERR_DATA_LOSS:
      return "HURRAY_ERR_DATA_LOSS";
    default:
      return "HURRAY_ERR_UNKNOWN";
  }
}

// ---- Buffers ----

HurrayStatus hurray_buffer_from_ptr(void* data, uint64_t byte_size, uint64_t alignment,
                                    uint8_t device_tag, uint8_t sync_mode, uint8_t memory_class,
                                    HurrayReleaseCallback release, void* release_context,
                                    HurrayBuffer** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(out);
    if (data == nullptr && byte_size != 0) return NullArgument("data");
    auto tag = hurray::DeviceTag::FromByte(device_tag);
    if (auto failure = FailureOf(tag)) return *failure;
    auto mode = hurray::SyncModeFromByte(sync_mode);
    if (auto failure = FailureOf(mode)) return *failure;
    auto memory = hurray::MemoryClass::FromByte(memory_class);
    if (auto failure = FailureOf(memory)) return *failure;
    auto handle = hurray::BufferHandle::Create(byte_size, alignment, *tag, *mode, *memory);
    if (auto failure = FailureOf(handle)) return *failure;
    // Alignment is measured, not asserted: the address must back the declared guarantee.
    if (byte_size != 0 && reinterpret_cast<std::uintptr_t>(data) % alignment != 0) {
      return SetLastError(
          HURRAY_ERR_INVALID_ARGUMENT,
          fmt::format("data pointer {} is not aligned to the declared {} bytes", data, alignment));
    }
    auto* buffer = new HurrayBuffer{data, *handle, release, release_context};
    HURRAY_TRACK(buffer, kBuffer);
    *out = buffer;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_destroy(HurrayBuffer* buffer) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_CHECK_LIVE(buffer, kBuffer, "buffer");
    if (buffer->owned_by_list) {
      return SetLastError(HURRAY_ERR_INTERNAL,
                          "hurray_buffer_destroy: the buffer is owned (and will be destroyed) "
                          "by its list; destroy the list instead");
    }
    HURRAY_UNTRACK_OR_FAIL(buffer, kBuffer, "buffer");
    FreeBuffer(buffer);
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_byte_size(const HurrayBuffer* buffer, uint64_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(out);
    *out = buffer->handle.byte_size();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_alignment(const HurrayBuffer* buffer, uint64_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(out);
    *out = buffer->handle.alignment();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_data_ptr(const HurrayBuffer* buffer, void** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(out);
    *out = buffer->data;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_device_tag(const HurrayBuffer* buffer, uint8_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(out);
    *out = buffer->handle.device_tag().ToByte();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_memory_class(const HurrayBuffer* buffer, uint8_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(out);
    *out = buffer->handle.memory_class().ToByte();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_sync_mode(const HurrayBuffer* buffer, uint8_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(out);
    *out = hurray::SyncModeToByte(buffer->handle.sync_mode());
    return HURRAY_OK;
  });
}

// ---- Buffer lists ----

HurrayStatus hurray_buffer_list_new(uint64_t capacity, HurrayBufferList** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(out);
    auto* list = new HurrayBufferList();
    // A hint only: a huge capacity from a confused caller must not fail or allocate wildly.
    constexpr std::uint64_t kMaxReserve = 1024;
    list->buffers.reserve(static_cast<std::size_t>(std::min(capacity, kMaxReserve)));
    HURRAY_TRACK(list, kList);
    *out = list;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_list_push(HurrayBufferList* list, HurrayBuffer* buffer) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(list);
    HURRAY_REQUIRE(buffer);
    HURRAY_CHECK_LIVE(list, kList, "list");
    HURRAY_CHECK_LIVE(buffer, kBuffer, "buffer");
    if (buffer->owned_by_list) {
      return SetLastError(HURRAY_ERR_INVALID_ARGUMENT,
                          "hurray_buffer_list_push: the buffer already belongs to a list");
    }
    list->buffers.push_back(buffer);  // May throw: ownership then stays with the caller.
    buffer->owned_by_list = true;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_list_len(const HurrayBufferList* list, uint64_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(list);
    HURRAY_REQUIRE(out);
    *out = list->buffers.size();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_list_get(const HurrayBufferList* list, uint64_t index,
                                    HurrayBuffer** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(list);
    HURRAY_REQUIRE(out);
    if (index >= list->buffers.size()) {
      return SetLastError(HURRAY_ERR_OUT_OF_RANGE,
                          fmt::format("hurray_buffer_list_get: index {} is out of range for a "
                                      "list of {}",
                                      index, list->buffers.size()));
    }
    *out = list->buffers[static_cast<std::size_t>(index)];
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_list_destroy(HurrayBufferList** list) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(list);
    if (*list == nullptr) return HURRAY_OK;
    HURRAY_UNTRACK_OR_FAIL(*list, kList, "list");
    for (HurrayBuffer* buffer : (*list)->buffers) {
      HURRAY_UNTRACK_OR_FAIL(buffer, kBuffer, "a buffer of the list");
      FreeBuffer(buffer);
    }
    delete *list;
    *list = nullptr;
    return HURRAY_OK;
  });
}

// ---- Descriptors ----

HurrayStatus hurray_descriptor_decode(const uint8_t* bytes, size_t len, HurrayDescriptor** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(out);
    if (bytes == nullptr && len != 0) return NullArgument("bytes");
    auto descriptor = hurray::TensorDescriptor::Decode(
        std::span<const std::uint8_t>(bytes == nullptr ? nullptr : bytes, len));
    if (auto failure = FailureOf(descriptor)) return *failure;
    auto* handle = new HurrayDescriptor{std::move(*descriptor)};
    HURRAY_TRACK(handle, kDescriptor);
    *out = handle;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_descriptor_new_dense(uint8_t element_type_tag, const uint64_t* dims,
                                         uint32_t rank, HurrayDescriptor** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(out);
    if (dims == nullptr && rank != 0) return NullArgument("dims");
    if (rank > hurray::kMaxRank) {
      return SetLastError(HURRAY_ERR_INVALID_ARGUMENT,
                          fmt::format("rank {} is above the limit {}", rank, hurray::kMaxRank));
    }
    auto type = hurray::ElementTypeFromTag(element_type_tag);
    if (auto failure = FailureOf(type)) return *failure;
    std::vector<std::uint64_t> shape(dims, dims + rank);
    auto descriptor = hurray::TensorDescriptor::Dense(*type, std::move(shape));
    if (auto failure = FailureOf(descriptor)) return *failure;
    auto* handle = new HurrayDescriptor{std::move(*descriptor)};
    HURRAY_TRACK(handle, kDescriptor);
    *out = handle;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_descriptor_encode(const HurrayDescriptor* descriptor, uint8_t** bytes,
                                      size_t* len) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(bytes);
    HURRAY_REQUIRE(len);
    const std::string encoded = descriptor->descriptor.Encode();
    auto* copy = static_cast<uint8_t*>(std::malloc(encoded.empty() ? 1 : encoded.size()));
    if (copy == nullptr) return SetLastError(HURRAY_ERR_OUT_OF_MEMORY, "out of memory");
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes, not a string.
    std::memcpy(copy, encoded.data(), encoded.size());
    *bytes = copy;
    *len = encoded.size();
    return HURRAY_OK;
  });
}

void hurray_bytes_free(uint8_t* bytes) { std::free(bytes); }

HurrayStatus hurray_descriptor_destroy(HurrayDescriptor* descriptor) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(descriptor);
    HURRAY_UNTRACK_OR_FAIL(descriptor, kDescriptor, "descriptor");
    delete descriptor;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_descriptor_rank(const HurrayDescriptor* descriptor, uint32_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(out);
    *out = static_cast<uint32_t>(descriptor->descriptor.rank());
    return HURRAY_OK;
  });
}

HurrayStatus hurray_descriptor_shape(const HurrayDescriptor* descriptor, uint64_t* out_dims,
                                     size_t* in_out_rank) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(in_out_rank);
    const auto& shape = descriptor->descriptor.shape();
    const std::size_t rank = shape.size();  // At most kMaxRank.
    if ((out_dims == nullptr && rank != 0) || *in_out_rank < rank) {
      const std::size_t capacity = out_dims == nullptr ? 0 : *in_out_rank;
      *in_out_rank = rank;
      return SetLastError(
          HURRAY_ERR_BUFFER_TOO_SMALL,
          fmt::format("hurray_descriptor_shape: capacity {} is below the rank {}", capacity, rank));
    }
    std::ranges::copy(shape, out_dims);
    *in_out_rank = rank;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_descriptor_element_type_tag(const HurrayDescriptor* descriptor, uint8_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(out);
    *out = hurray::ElementTypeTag(descriptor->descriptor.element_type());
    return HURRAY_OK;
  });
}

HurrayStatus hurray_descriptor_buffer_count(const HurrayDescriptor* descriptor, uint64_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(out);
    *out = descriptor->descriptor.buffers().size();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_descriptor_buffer_byte_size(const HurrayDescriptor* descriptor, uint64_t index,
                                                uint64_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(out);
    const auto& buffers = descriptor->descriptor.buffers();
    if (index >= buffers.size()) {
      return SetLastError(HURRAY_ERR_OUT_OF_RANGE,
                          fmt::format("hurray_descriptor_buffer_byte_size: index {} is out of "
                                      "range for a buffer table of {}",
                                      index, buffers.size()));
    }
    *out = buffers[static_cast<std::size_t>(index)].byte_size();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_descriptor_check_buffer_list(const HurrayDescriptor* descriptor,
                                                 const HurrayBufferList* list) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(list);
    std::vector<hurray::BufferHandle> delivered;
    delivered.reserve(list->buffers.size());
    for (const HurrayBuffer* buffer : list->buffers) delivered.push_back(buffer->handle);
    auto status = descriptor->descriptor.ValidateDeliveredBuffers(delivered);
    if (auto failure = FailureOf(status)) return *failure;
    return HURRAY_OK;
  });
}

// ---- Tensor context ----

HurrayStatus hurray_tensor_context_new(const uint8_t* bytes, size_t len,
                                       HurrayOwnerRelease owner_release, void* owner_context,
                                       HurrayTensorContext** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(out);
    if (bytes == nullptr && len != 0) return NullArgument("bytes");
    if (len != 0) {
      auto descriptor = hurray::TensorDescriptor::Decode(std::span<const std::uint8_t>(bytes, len));
      if (auto failure = FailureOf(descriptor)) return *failure;
    }
    auto* context =
        new HurrayTensorContext{.abi_version = HURRAY_C_ABI_VERSION,
                                .descriptor_bytes = std::vector<std::uint8_t>(bytes, bytes + len),
                                .owner_release = owner_release,
                                .owner_context = owner_context};
    HURRAY_TRACK(context, kContext);
    *out = context;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_tensor_context_abi_version(const HurrayTensorContext* context, uint32_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(context);
    HURRAY_REQUIRE(out);
    *out = context->abi_version;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_tensor_context_descriptor(const HurrayTensorContext* context,
                                              const uint8_t** bytes, uint64_t* len) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(context);
    HURRAY_REQUIRE(bytes);
    HURRAY_REQUIRE(len);
    const auto& stored = context->descriptor_bytes;
    *bytes = stored.empty() ? nullptr : stored.data();
    *len = stored.size();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_tensor_context_destroy(HurrayTensorContext** context) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(context);
    if (*context == nullptr) return HURRAY_OK;
    HURRAY_UNTRACK_OR_FAIL(*context, kContext, "context");
    HurrayTensorContext* owned = *context;
    *context = nullptr;
    if (owned->owner_release != nullptr) owned->owner_release(owned->owner_context);
    delete owned;
    return HURRAY_OK;
  });
}

// ---- Sync handoff ----

HurrayStatus hurray_buffer_handoff_event(HurrayBuffer* buffer,
                                         const HurraySyncEventPayload* payload) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(payload);
    if (buffer->handle.sync_mode() != hurray::SyncMode::kEvent) {
      return SyncModeMismatch(buffer, hurray::SyncMode::kEvent);
    }
    if (payload->sync_handle == nullptr) return NullArgument("payload->sync_handle");
    if (HurrayStatus status =
            CheckHandoffDevice(buffer, payload->sync_handle_device_tag, "sync_handle_device_tag");
        status != HURRAY_OK) {
      return status;
    }
    // A producer may record the same event again and hand it over again: the buffer then
    // already holds it, and releasing it here would leave the buffer holding a dead event.
    if (buffer->sync_event != nullptr && buffer->sync_event != payload->sync_handle &&
        buffer->event_release != nullptr) {
      buffer->event_release(buffer->sync_event, buffer->event_release_context);
    }
    buffer->sync_event = payload->sync_handle;
    buffer->event_release = payload->event_release_fn;
    buffer->event_release_context = payload->event_release_context;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_sync_event(const HurrayBuffer* buffer, void** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(out);
    *out = buffer->sync_event;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_buffer_handoff_consumer_stream(const HurrayBuffer* buffer,
                                                   const HurraySyncConsumerStreamPayload* payload) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    HURRAY_REQUIRE(payload);
    if (buffer->handle.sync_mode() != hurray::SyncMode::kConsumerStream) {
      return SyncModeMismatch(buffer, hurray::SyncMode::kConsumerStream);
    }
    return CheckHandoffDevice(buffer, payload->consumer_stream_device_tag,
                              "consumer_stream_device_tag");
  });
}

HurrayStatus hurray_buffer_handoff_producer_synced(const HurrayBuffer* buffer) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(buffer);
    if (buffer->handle.sync_mode() != hurray::SyncMode::kProducerSynced) {
      return SyncModeMismatch(buffer, hurray::SyncMode::kProducerSynced);
    }
    return HURRAY_OK;
  });
}

}  // extern "C"
