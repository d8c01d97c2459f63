// The C client of hurray_client.h: a thin layer over the C++ Client. Buffers handed to C
// consumers are built through hurray.h's own functions, so they follow its rules exactly.
#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "client_internal.h"
#include "hurray/c_abi_internal.h"
#include "hurray/client.h"
#include "hurray/tensor_name.h"
#include "hurray_client.h"

struct HurrayClient {
  std::unique_ptr<hurray::Client> client;
};

struct HurrayAllocation {
  hurray::WritableTensor tensor;
};

namespace {

using hurray::internal::FailAfterCleanup;
using hurray::internal::Guard;
using hurray::internal::SetLastError;

// A consumer's lease, kept alive by its tensor context.
struct AcquiredTensor {
  hurray::TensorView view;
  const HurrayTensorContext* context = nullptr;  // The context that owns it, once made.
};

// The contexts hurray_client_acquire made and that are still alive, with their leases: how
// hurray_client_release_after finds the lease behind a context (hurray.h's context
// shows only its descriptor). Thread-safe.
class AcquiredContexts {
 public:
  static AcquiredContexts& Get() {
    static auto* const contexts = new AcquiredContexts();  // Never destroyed: see EndLease.
    return *contexts;
  }
  void Add(AcquiredTensor* acquired) {
    const std::lock_guard lock(mutex_);
    by_context_[acquired->context] = acquired;
  }
  void Remove(const AcquiredTensor* acquired) {
    const std::lock_guard lock(mutex_);
    by_context_.erase(acquired->context);
  }
  // The lease of `context`; null for a context hurray_client_acquire did not make.
  AcquiredTensor* Find(const HurrayTensorContext* context) const {
    const std::lock_guard lock(mutex_);
    const auto found = by_context_.find(context);
    return found == by_context_.end() ? nullptr : found->second;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const HurrayTensorContext*, AcquiredTensor*> by_context_;
};

void EndLease(void* owner_context) {
  auto* acquired = static_cast<AcquiredTensor*>(owner_context);
  AcquiredContexts::Get().Remove(acquired);
  delete acquired;
}

std::string OrEmpty(const char* text) { return text == nullptr ? std::string() : text; }

// The C++ descriptor of a C handle, through its encoding.
hurray::Result<hurray::TensorDescriptor> DescriptorOf(const HurrayDescriptor* descriptor) {
  std::uint8_t* bytes = nullptr;
  std::size_t length = 0;
  if (HurrayStatus status = hurray_descriptor_encode(descriptor, &bytes, &length);
      status != HURRAY_OK) {
    return hurray::InvalidArgumentError(fmt::format("descriptor: {}", hurray_last_error_message()));
  }
  auto decoded = hurray::TensorDescriptor::Decode(std::span<const std::uint8_t>(bytes, length));
  hurray_bytes_free(bytes);
  return decoded;
}

// An event handed to a buffer: the shared_ptr destroys it (and keeps the client's
// connection alive until then).
void ReleaseEvent(void* /*sync_handle*/, void* event_release_context) {
  delete static_cast<std::shared_ptr<void>*>(event_release_context);
}

// Event mode of a device tensor: hands `buffer` its own CUDA event that completes once the
// data is ready, so that a consumer makes its stream wait on it (cudaStreamWaitEvent).
HurrayStatus HandOffReadyEvent(const hurray::TensorView& view, HurrayBuffer* buffer) {
  auto event = hurray::client_internal::TensorViewAccess::ReadyEvent(view);
  if (!event) return SetLastError(event.error());
  auto holder = std::make_unique<std::shared_ptr<void>>(std::move(*event));
  const HurraySyncEventPayload payload{.sync_handle = holder->get(),
                                       .sync_handle_device_tag = HURRAY_DEVICE_CUDA,
                                       .event_release_fn = ReleaseEvent,
                                       .event_release_context = holder.get()};
  HurrayStatus status = hurray_buffer_handoff_event(buffer, &payload);
  if (status == HURRAY_OK) (void)holder.release();  // The buffer's now: ReleaseEvent frees it.
  return status;
}

// Builds the HurrayBufferList of a view: one borrowed-memory handle per buffer (a device
// address for a CUDA pool), with a ready event for each Event-mode buffer of a CUDA pool.
HurrayStatus BufferListOf(const hurray::TensorView& view, HurrayBufferList** out) {
  HurrayBufferList* list = nullptr;
  if (HurrayStatus status = hurray_buffer_list_new(view.buffer_count(), &list);
      status != HURRAY_OK) {
    return status;
  }
  for (std::size_t i = 0; i < view.buffer_count(); ++i) {
    const hurray::BufferHandle& declared = view.descriptor().buffers()[i];
    HurrayBuffer* buffer = nullptr;
    // The memory is the daemon's mapping, read-only; the view owns it, so no release.
    HurrayStatus status = hurray_buffer_from_ptr(
        const_cast<void*>(view.data(i)), declared.byte_size(), declared.alignment(),
        declared.device_tag().ToByte(), hurray::SyncModeToByte(declared.sync_mode()),
        declared.memory_class().ToByte(), nullptr, nullptr, &buffer);
    if (status == HURRAY_OK && declared.sync_mode() == hurray::SyncMode::kEvent &&
        declared.device_tag() == hurray::DeviceTag::Cuda()) {
      status = HandOffReadyEvent(view, buffer);
    }
    if (status == HURRAY_OK) status = hurray_buffer_list_push(list, buffer);
    if (status != HURRAY_OK) {
      return FailAfterCleanup(status, [&] {
        if (buffer != nullptr) (void)hurray_buffer_destroy(buffer);
        (void)hurray_buffer_list_destroy(&list);
      });
    }
  }
  *out = list;
  return HURRAY_OK;
}

// HURRAY_ERR_NULL_POINTER for a null allocations[i] or names[i], HURRAY_ERR_INVALID_ARGUMENT
// for an allocation listed twice (publishing moves each out of its handle); HURRAY_OK
// otherwise.
HurrayStatus CheckBatchArguments(HurrayAllocation* const* allocations, const char* const* names,
                                 std::uint64_t count) {
  std::unordered_map<const HurrayAllocation*, std::uint64_t> seen;
  seen.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (allocations[i] == nullptr) {
      return hurray::internal::NullArgument(fmt::format("allocations[{}]", i));
    }
    if (names[i] == nullptr) return hurray::internal::NullArgument(fmt::format("names[{}]", i));
    if (const auto [first, added] = seen.emplace(allocations[i], i); !added) {
      return SetLastError(
          hurray::InvalidArgumentError(fmt::format("allocations[{}] ({}): the same allocation as "
                                                   "allocations[{}]",
                                                   i, hurray::ShownName(names[i]), first->second))
              .error());
    }
  }
  return HURRAY_OK;
}

}  // namespace

extern "C" {

HurrayStatus hurray_client_connect(const char* socket_path, const char* client_name,
                                   HurrayClient** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(out);
    hurray::Client::Options options;
    options.socket_path = OrEmpty(socket_path);
    if (client_name != nullptr) options.client_name = client_name;
    auto client = hurray::Client::Connect(std::move(options));
    if (!client) return SetLastError(client.error());
    *out = new HurrayClient{std::move(*client)};
    return HURRAY_OK;
  });
}

HurrayStatus hurray_client_close(HurrayClient** client) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(client);
    delete *client;
    *client = nullptr;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_client_allocate(HurrayClient* client, const HurrayDescriptor* descriptor,
                                    const char* pool, HurrayAllocation** out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(client);
    HURRAY_REQUIRE(descriptor);
    HURRAY_REQUIRE(out);
    auto decoded = DescriptorOf(descriptor);
    if (!decoded) return SetLastError(decoded.error());
    auto tensor = client->client->Allocate(
        *decoded, pool == nullptr ? std::string_view() : std::string_view(pool));
    if (!tensor) return SetLastError(tensor.error());
    *out = new HurrayAllocation{std::move(*tensor)};
    return HURRAY_OK;
  });
}

HurrayStatus hurray_allocation_buffer_count(const HurrayAllocation* allocation, uint64_t* out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(allocation);
    HURRAY_REQUIRE(out);
    *out = allocation->tensor.buffer_count();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_allocation_buffer(const HurrayAllocation* allocation, uint64_t index,
                                      void** data, uint64_t* byte_size) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(allocation);
    HURRAY_REQUIRE(data);
    HURRAY_REQUIRE(byte_size);
    if (index >= allocation->tensor.buffer_count()) {
      return SetLastError(HURRAY_ERR_OUT_OF_RANGE,
                          fmt::format("hurray_allocation_buffer: index {} is out of range for {} "
                                      "buffers",
                                      index, allocation->tensor.buffer_count()));
    }
    const auto buffer = static_cast<std::size_t>(index);
    *data = allocation->tensor.data(buffer);
    *byte_size = allocation->tensor.descriptor().buffers()[buffer].byte_size();
    return HURRAY_OK;
  });
}

HurrayStatus hurray_allocation_device(const HurrayAllocation* allocation, uint8_t* device_tag,
                                      int32_t* device_ordinal) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(allocation);
    HURRAY_REQUIRE(device_tag);
    HURRAY_REQUIRE(device_ordinal);
    const hurray::DeviceInfo& device = allocation->tensor.device();
    *device_tag = device.device_tag.ToByte();
    *device_ordinal = device.device_ordinal;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_allocation_publish(HurrayAllocation** allocation, const char* name,
                                       uint64_t* version) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(allocation);
    HURRAY_REQUIRE(*allocation);
    HURRAY_REQUIRE(name);
    auto published = (*allocation)->tensor.Publish(name);
    if (!published) return SetLastError(published.error());
    if (version != nullptr) *version = published->version;
    delete *allocation;
    *allocation = nullptr;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_allocation_publish_and_allocate(HurrayAllocation** allocation, const char* name,
                                                    uint64_t* version, HurrayAllocation** next) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(allocation);
    HURRAY_REQUIRE(*allocation);
    HURRAY_REQUIRE(name);
    HURRAY_REQUIRE(next);
    auto published = (*allocation)->tensor.PublishAndAllocate(name);
    if (!published) return SetLastError(published.error());
    if (version != nullptr) *version = published->published.version;
    delete *allocation;
    *allocation = nullptr;
    *next = nullptr;
    if (!published->next) return SetLastError(published->next.error());
    *next = new HurrayAllocation{std::move(*published->next)};
    return HURRAY_OK;
  });
}

HurrayStatus hurray_client_publish_batch(HurrayClient* client, HurrayAllocation** allocations,
                                         const char* const* names, uint64_t count,
                                         uint64_t* versions_out) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(client);
    HURRAY_REQUIRE(allocations);
    HURRAY_REQUIRE(names);
    HURRAY_REQUIRE(versions_out);
    if (count == 0 || count > hurray::Client::kMaxBatchPublish) {
      return SetLastError(
          hurray::InvalidArgumentError(fmt::format("count {}: 1 to {} allocations may be published",
                                                   count, hurray::Client::kMaxBatchPublish))
              .error());
    }
    if (HurrayStatus status = CheckBatchArguments(allocations, names, count); status != HURRAY_OK) {
      return status;
    }
    std::vector<hurray::WritableTensor> tensors;
    std::vector<std::string> tensor_names;
    tensors.reserve(count);
    tensor_names.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      tensors.push_back(std::move(allocations[i]->tensor));
      tensor_names.emplace_back(names[i]);
    }
    auto published = client->client->PublishBatch(tensors, tensor_names);
    if (!published) {
      // Every tensor is still the caller's: back into its allocation.
      for (std::uint64_t i = 0; i < count; ++i) allocations[i]->tensor = std::move(tensors[i]);
      return SetLastError(published.error());
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      versions_out[i] = (*published)[i].version;
      delete allocations[i];
      allocations[i] = nullptr;
    }
    return HURRAY_OK;
  });
}

HurrayStatus hurray_allocation_publish_after(HurrayAllocation** allocation, const char* name,
                                             void* stream, uint64_t* version) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(allocation);
    HURRAY_REQUIRE(*allocation);
    HURRAY_REQUIRE(name);
    auto published = (*allocation)->tensor.PublishAfter(name, stream);
    if (!published) return SetLastError(published.error());
    if (version != nullptr) *version = published->version;
    delete *allocation;
    *allocation = nullptr;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_allocation_cancel(HurrayAllocation** allocation) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(allocation);
    if (*allocation == nullptr) return HURRAY_OK;
    auto cancelled = (*allocation)->tensor.Cancel();
    delete *allocation;
    *allocation = nullptr;
    if (!cancelled) return SetLastError(cancelled.error());
    return HURRAY_OK;
  });
}

HurrayStatus hurray_allocation_cancel_after(HurrayAllocation** allocation, void* stream) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(allocation);
    if (*allocation == nullptr) return HURRAY_OK;
    // Host memory is cancelled now, as hurray_allocation_cancel: gone even on error.
    if ((*allocation)->tensor.device().device_tag != hurray::DeviceTag::Cuda()) {
      return hurray_allocation_cancel(allocation);
    }
    if (auto cancelled = (*allocation)->tensor.CancelAfter(stream); !cancelled) {
      return SetLastError(cancelled.error());
    }
    delete *allocation;
    *allocation = nullptr;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_client_release_after(HurrayTensorContext** context, void* stream) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(context);
    if (*context == nullptr) return HURRAY_OK;
    AcquiredTensor* acquired = AcquiredContexts::Get().Find(*context);
    if (acquired == nullptr) {
      return SetLastError(hurray::InvalidArgumentError(
                              "the context was not made by hurray_client_acquire (or was "
                              "destroyed already): destroy it with hurray_tensor_context_destroy")
                              .error());
    }
    if (auto released = acquired->view.ReleaseAfter(stream); !released) {
      return SetLastError(released.error());
    }
    return hurray_tensor_context_destroy(context);
  });
}

HurrayStatus hurray_client_acquire(HurrayClient* client, const char* name, uint64_t version,
                                   uint32_t wait_timeout_ms, HurrayBufferList** out_list,
                                   HurrayTensorContext** out_context) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(client);
    HURRAY_REQUIRE(name);
    HURRAY_REQUIRE(out_list);
    HURRAY_REQUIRE(out_context);
    auto view = client->client->Acquire(
        name, hurray::AcquireOptions{.version = version,
                                     .wait = std::chrono::milliseconds(wait_timeout_ms)});
    if (!view) return SetLastError(view.error());
    auto acquired = std::make_unique<AcquiredTensor>(AcquiredTensor{std::move(*view)});
    HurrayBufferList* list = nullptr;
    if (HurrayStatus status = BufferListOf(acquired->view, &list); status != HURRAY_OK) {
      return status;
    }
    const std::string encoded = acquired->view.descriptor().Encode();
    HurrayTensorContext* context = nullptr;
    HurrayStatus status =
        hurray_tensor_context_new(reinterpret_cast<const std::uint8_t*>(encoded.data()),
                                  encoded.size(), EndLease, acquired.get(), &context);
    if (status != HURRAY_OK) {
      return FailAfterCleanup(status, [&] { (void)hurray_buffer_list_destroy(&list); });
    }
    acquired->context = context;
    AcquiredContexts::Get().Add(acquired.get());
    (void)acquired.release();  // Now owned by the context: EndLease deletes it.
    *out_list = list;
    *out_context = context;
    return HURRAY_OK;
  });
}

HurrayStatus hurray_client_delete(HurrayClient* client, const char* name, uint64_t version,
                                  uint32_t* deleted) {
  return Guard(__func__, [&]() -> HurrayStatus {
    HURRAY_REQUIRE(client);
    HURRAY_REQUIRE(name);
    auto count = client->client->Delete(name, version);
    if (!count) return SetLastError(count.error());
    if (deleted != nullptr) *deleted = *count;
    return HURRAY_OK;
  });
}

}  // extern "C"
