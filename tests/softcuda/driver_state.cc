#include "driver_state.h"

#include <charconv>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "refusal.h"

namespace softcuda {

int DriverVersion() {
  static const int version = [] {
    const char* text = std::getenv("HURRAY_SOFTCUDA_DRIVER_VERSION");
    if (text == nullptr) return kDriverVersion;
    int value = 0;
    const std::string_view digits(text);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return error == std::errc() && end == digits.data() + digits.size() && value > 0
               ? value
               : kDriverVersion;
  }();
  return version;
}

DriverState& DriverState::Get() {
  static DriverState* const state = new DriverState();  // NOLINT: leaked on purpose.
  return *state;
}

CUresult DriverState::Initialize() {
  std::call_once(initialized_once_, [this] {
    devices_ = DeviceTable::FromEnvironment();
    memory_ = std::make_unique<MemorySpace>();
    contexts_.resize(static_cast<std::size_t>(devices_.count()));
    for (int i = 0; i < devices_.count(); ++i) contexts_[static_cast<std::size_t>(i)].device = i;
    initialize_result_ = devices_.count() == 0 ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
  });
  return initialize_result_;
}

bool DriverState::initialized() const {
  // Written once under the once_flag, before any caller could see CUDA_SUCCESS.
  std::lock_guard lock(mutex_);
  return initialize_result_ == CUDA_SUCCESS;
}

bool DriverState::IsContext(CUcontext context) const {
  for (const CUctx_st& candidate : contexts_) {
    if (&candidate == context) return true;
  }
  return false;
}

CUcontext& CurrentContext() {
  thread_local CUcontext current = nullptr;
  return current;
}

bool& InHostFunction() {
  thread_local bool in = false;
  return in;
}

CUresult CheckInitialized(std::string_view call) {
  if (InHostFunction()) {
    return Refuse(CUDA_ERROR_NOT_PERMITTED, call,
                  "called from a host function (cuLaunchHostFunc), which must make no CUDA call");
  }
  if (!DriverState::Get().initialized()) {
    return Refuse(CUDA_ERROR_NOT_INITIALIZED, call, "cuInit has not succeeded in this process");
  }
  return CUDA_SUCCESS;
}

CUresult CheckCurrentContext(std::string_view call, CUcontext* context) {
  if (CUresult result = CheckInitialized(call); result != CUDA_SUCCESS) return result;
  DriverState& state = DriverState::Get();
  std::lock_guard lock(state.mutex());
  *context = CurrentContext();
  if (*context == nullptr) {
    return Refuse(CUDA_ERROR_INVALID_CONTEXT, call,
                  "needs a current context; this thread has none");
  }
  if ((*context)->retains == 0) {
    return Refuse(CUDA_ERROR_INVALID_CONTEXT, call,
                  "the current context is device " + std::to_string((*context)->device) +
                      "'s primary context, released (no retains left)");
  }
  return CUDA_SUCCESS;
}

CUresult CheckDevice(std::string_view call, CUdevice device) {
  if (CUresult result = CheckInitialized(call); result != CUDA_SUCCESS) return result;
  if (!DriverState::Get().devices().Valid(device)) {
    return Refuse(CUDA_ERROR_INVALID_DEVICE, call,
                  "device " + std::to_string(device) + " does not exist (" +
                      std::to_string(DriverState::Get().devices().count()) + " visible)");
  }
  return CUDA_SUCCESS;
}

CUresult ResolveStream(std::string_view call, CUstream stream, CUstream_st** resolved) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
    CUcontext context = nullptr;
    if (CUresult result = CheckCurrentContext(call, &context); result != CUDA_SUCCESS) {
      return result;
    }
    DriverState& state = DriverState::Get();
    std::lock_guard lock(state.mutex());
    if (context->default_stream == nullptr) {
      context->default_stream = new CUstream_st(context, 0);  // NOLINT: lives forever.
    }
    *resolved = context->default_stream;
    return CUDA_SUCCESS;
  }
  if (CUresult result = CheckInitialized(call); result != CUDA_SUCCESS) return result;
  DriverState& state = DriverState::Get();
  std::lock_guard lock(state.mutex());
  if (!state.streams().contains(stream)) {
    return Refuse(CUDA_ERROR_INVALID_HANDLE, call, "the stream is not live (destroyed?)");
  }
  *resolved = stream;
  return CUDA_SUCCESS;
}

CUresult CheckDeviceAccess(std::string_view call, CUdeviceptr address, std::size_t size,
                           Access access) {
  const Access granted = DriverState::Get().memory().AccessOf(address, size);
  if (granted == Access::kNone || (access == Access::kReadWrite && granted == Access::kRead)) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, call,
                  std::to_string(size) + " bytes at " + std::to_string(address) + " are not " +
                      (access == Access::kRead ? "readable" : "writable") +
                      " device memory (a GPU would fault)");
  }
  return CUDA_SUCCESS;
}

int AttributeOf(CUdevice_attribute attribute) {
  return DriverState::Get().devices().Attribute(attribute).value_or(0);
}

}  // namespace softcuda
