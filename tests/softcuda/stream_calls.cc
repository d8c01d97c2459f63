// Entry points: streams, stream memory operations and events.
#include <cstdint>
#include <string>

#include "driver_state.h"
#include "refusal.h"

using softcuda::Access;
using softcuda::AttributeOf;
using softcuda::CheckCurrentContext;
using softcuda::DriverState;
using softcuda::Refuse;
using softcuda::ResolveStream;

namespace {

constexpr unsigned int kWaitFlush = CU_STREAM_WAIT_VALUE_FLUSH;

std::uint64_t* WordAt(CUdeviceptr address) {
  return reinterpret_cast<std::uint64_t*>(address);  // NOLINT(performance-no-int-to-ptr)
}

// The checks cuStreamWaitValue64 and cuStreamWriteValue64 share: the attribute, the word's
// alignment and access.
CUresult CheckMemoryOperation(const char* call, CUdeviceptr address, Access access) {
  if (AttributeOf(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) == 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, call,
                  "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0 on this device");
  }
  if (address % 8 != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, call,
                  "addr " + std::to_string(address) + " is not aligned to 8 bytes");
  }
  return softcuda::CheckDeviceAccess(call, address, sizeof(std::uint64_t), access);
}

CUresult CheckWaitFlags(unsigned int flags) {
  constexpr const char* kCall = "cuStreamWaitValue64";
  const unsigned int condition = flags & ~kWaitFlush;
  if (condition > CU_STREAM_WAIT_VALUE_NOR) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "unknown flags " + std::to_string(flags));
  }
  if (condition == CU_STREAM_WAIT_VALUE_NOR &&
      AttributeOf(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR) == 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, kCall,
                  "CU_STREAM_WAIT_VALUE_NOR needs CAN_USE_STREAM_WAIT_VALUE_NOR");
  }
  if ((flags & kWaitFlush) != 0 && AttributeOf(CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES) == 0) {
    return Refuse(CUDA_ERROR_NOT_SUPPORTED, kCall,
                  "CU_STREAM_WAIT_VALUE_FLUSH needs CAN_FLUSH_REMOTE_WRITES");
  }
  return CUDA_SUCCESS;
}

// A live event, else CUDA_ERROR_INVALID_HANDLE refused for `call`.
CUresult CheckEvent(const char* call, CUevent event) {
  DriverState& state = DriverState::Get();
  std::lock_guard lock(state.mutex());
  if (!state.events().contains(event)) {
    return Refuse(CUDA_ERROR_INVALID_HANDLE, call, "the event is not live (destroyed?)");
  }
  return CUDA_SUCCESS;
}

}  // namespace

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuStreamCreate", &context); result != CUDA_SUCCESS) {
    return result;
  }
  if (stream == nullptr || (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING)) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate",
                  "phStream is NULL or Flags " + std::to_string(flags) + " is unknown");
  }
  *stream = new CUstream_st(context, flags);  // NOLINT: owned by the handle until destroyed.
  DriverState& state = DriverState::Get();
  std::lock_guard lock(state.mutex());
  state.streams().insert(*stream);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  if (CUresult result = softcuda::CheckInitialized("cuStreamDestroy"); result != CUDA_SUCCESS) {
    return result;
  }
  DriverState& state = DriverState::Get();
  {
    std::lock_guard lock(state.mutex());
    if (state.streams().erase(stream) == 0) {
      return Refuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy",
                    "not a live stream created by cuStreamCreate (the NULL stream cannot be "
                    "destroyed)");
    }
  }
  stream->Destroy();  // Returns at once; queued work still runs.
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  CUstream_st* resolved = nullptr;
  if (CUresult result = ResolveStream("cuStreamSynchronize", stream, &resolved);
      result != CUDA_SUCCESS) {
    return result;
  }
  resolved->Synchronize();
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream stream, CUcontext* context) {
  CUstream_st* resolved = nullptr;
  if (CUresult result = ResolveStream("cuStreamGetCtx", stream, &resolved);
      result != CUDA_SUCCESS) {
    return result;
  }
  if (context == nullptr) return Refuse(CUDA_ERROR_INVALID_VALUE, "cuStreamGetCtx", "pctx is NULL");
  *context = resolved->context();
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr address, cuuint64_t value,
                                unsigned int flags) {
  constexpr const char* kCall = "cuStreamWaitValue64";
  CUstream_st* resolved = nullptr;
  if (CUresult result = ResolveStream(kCall, stream, &resolved); result != CUDA_SUCCESS) {
    return result;
  }
  if (CUresult result = CheckMemoryOperation(kCall, address, Access::kRead);
      result != CUDA_SUCCESS) {
    return result;
  }
  if (CUresult result = CheckWaitFlags(flags); result != CUDA_SUCCESS) return result;
  resolved->Enqueue(
      [word = WordAt(address), value, flags] { softcuda::WaitForValue(word, value, flags); });
  return CUDA_SUCCESS;
}

CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr address, cuuint64_t value,
                                 unsigned int flags) {
  constexpr const char* kCall = "cuStreamWriteValue64";
  CUstream_st* resolved = nullptr;
  if (CUresult result = ResolveStream(kCall, stream, &resolved); result != CUDA_SUCCESS) {
    return result;
  }
  if (CUresult result = CheckMemoryOperation(kCall, address, Access::kReadWrite);
      result != CUDA_SUCCESS) {
    return result;
  }
  if (flags != CU_STREAM_WRITE_VALUE_DEFAULT && flags != CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "unknown flags " + std::to_string(flags));
  }
  // Release order: the stream's earlier writes are visible before the word (the default
  // flag's fence).
  resolved->Enqueue(
      [word = WordAt(address), value] { __atomic_store_n(word, value, __ATOMIC_RELEASE); });
  return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream stream, CUhostFn function, void* data) {
  constexpr const char* kCall = "cuLaunchHostFunc";
  CUstream_st* resolved = nullptr;
  if (CUresult result = ResolveStream(kCall, stream, &resolved); result != CUDA_SUCCESS) {
    return result;
  }
  if (function == nullptr) return Refuse(CUDA_ERROR_INVALID_VALUE, kCall, "fn is NULL");
  resolved->Enqueue([function, data] {
    softcuda::InHostFunction() = true;
    function(data);
    softcuda::InHostFunction() = false;
  });
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuEventCreate", &context); result != CUDA_SUCCESS) {
    return result;
  }
  constexpr unsigned int kKnown =
      CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  const bool interprocess_without_timing_off =
      (flags & CU_EVENT_INTERPROCESS) != 0 && (flags & CU_EVENT_DISABLE_TIMING) == 0;
  if (event == nullptr || (flags & ~kKnown) != 0 || interprocess_without_timing_off) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuEventCreate",
                  "phEvent is NULL or Flags " + std::to_string(flags) +
                      " is invalid (CU_EVENT_INTERPROCESS needs CU_EVENT_DISABLE_TIMING)");
  }
  *event = new CUevent_st{.context = context, .flags = flags};  // NOLINT: the handle owns it.
  DriverState& state = DriverState::Get();
  std::lock_guard lock(state.mutex());
  state.events().insert(*event);
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  constexpr const char* kCall = "cuEventRecord";
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext(kCall, &context); result != CUDA_SUCCESS) return result;
  if (CUresult result = CheckEvent(kCall, event); result != CUDA_SUCCESS) return result;
  CUstream_st* resolved = nullptr;
  if (CUresult result = ResolveStream(kCall, stream, &resolved); result != CUDA_SUCCESS) {
    return result;
  }
  if (resolved->context() != event->context) {
    return Refuse(CUDA_ERROR_INVALID_HANDLE, kCall,
                  "the event and the stream belong to different contexts");
  }
  const std::uint64_t record = ++event->progress->recorded;
  resolved->Enqueue([progress = event->progress, record] {
    std::uint64_t reached = progress->reached.load();
    while (reached < record && !progress->reached.compare_exchange_weak(reached, record)) {
    }
  });
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event) {
  if (CUresult result = softcuda::CheckInitialized("cuEventQuery"); result != CUDA_SUCCESS) {
    return result;
  }
  if (CUresult result = CheckEvent("cuEventQuery", event); result != CUDA_SUCCESS) return result;
  // Never recorded: CUDA_SUCCESS, as documented.
  return event->progress->reached.load() >= event->progress->recorded.load() ? CUDA_SUCCESS
                                                                             : CUDA_ERROR_NOT_READY;
}

CUresult cuEventDestroy_v2(CUevent event) {
  CUcontext context = nullptr;
  if (CUresult result = CheckCurrentContext("cuEventDestroy", &context); result != CUDA_SUCCESS) {
    return result;
  }
  DriverState& state = DriverState::Get();
  {
    std::lock_guard lock(state.mutex());
    if (state.events().erase(event) == 0) {
      return Refuse(CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy", "the event is not live");
    }
  }
  // Pending records hold the progress, not the event: destroying now is safe.
  delete event;  // NOLINT(cppcoreguidelines-owning-memory): the handle owned it.
  return CUDA_SUCCESS;
}
