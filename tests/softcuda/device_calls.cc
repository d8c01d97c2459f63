// Entry points: initialization, errors, devices and contexts.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "driver_state.h"
#include "error_names.h"
#include "refusal.h"

using softcuda::CheckDevice;
using softcuda::CheckInitialized;
using softcuda::DriverState;
using softcuda::Refuse;

namespace {

// "CUDA_ERROR_OUT_OF_MEMORY" → "out of memory". Built once, never freed: callers keep the
// pointers.
const std::vector<std::string>& ErrorTexts() {
  static const auto* const texts = [] {
    auto* made = new std::vector<std::string>();  // NOLINT: returned pointers stay valid.
    for (const auto& [code, name] : softcuda::kErrorNames) {
      std::string text = code == CUDA_SUCCESS ? "no error" : name + std::strlen("CUDA_ERROR_");
      std::ranges::transform(text, text.begin(), [](char c) {
        return c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      });
      made->push_back(std::move(text));
    }
    return made;
  }();
  return *texts;
}

CUresult LookUpError(CUresult error, const char** text, bool name) {
  if (text == nullptr) return Refuse(CUDA_ERROR_INVALID_VALUE, "cuGetErrorName", "pStr is NULL");
  for (std::size_t i = 0; i < softcuda::kErrorNames.size(); ++i) {
    if (softcuda::kErrorNames[i].first != error) continue;
    *text = name ? softcuda::kErrorNames[i].second : ErrorTexts()[i].c_str();
    return CUDA_SUCCESS;
  }
  *text = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

CUresult cuInit(unsigned int flags) {
  if (flags != 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuInit",
                  "Flags must be 0, not " + std::to_string(flags));
  }
  return DriverState::Get().Initialize();
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDriverGetVersion", "driverVersion is NULL");
  }
  *version = softcuda::DriverVersion();
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  return LookUpError(error, name, true);
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  return LookUpError(error, text, false);
}

CUresult cuDeviceGetCount(int* count) {
  if (CUresult result = CheckInitialized("cuDeviceGetCount"); result != CUDA_SUCCESS) return result;
  if (count == nullptr)
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetCount", "count is NULL");
  *count = DriverState::Get().devices().count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (CUresult result = CheckDevice("cuDeviceGet", ordinal); result != CUDA_SUCCESS) return result;
  if (device == nullptr) return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet", "device is NULL");
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (CUresult result = CheckDevice("cuDeviceGetName", device); result != CUDA_SUCCESS) {
    return result;
  }
  if (name == nullptr || length <= 0) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetName",
                  "name is NULL or len is not positive");
  }
  const std::string& text = DriverState::Get().devices().at(device).name;
  const std::size_t copied = std::min(text.size(), static_cast<std::size_t>(length) - 1);
  std::memcpy(name, text.data(), copied);
  name[copied] = '\0';
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  if (CUresult result = CheckDevice("cuDeviceGetUuid_v2", device); result != CUDA_SUCCESS) {
    return result;
  }
  if (uuid == nullptr)
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetUuid_v2", "uuid is NULL");
  *uuid = DriverState::Get().devices().at(device).uuid;
  return CUDA_SUCCESS;
}

// No MIG in softcuda: the physical GPU's UUID is the device's.
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  if (CUresult result = CheckDevice("cuDeviceGetUuid", device); result != CUDA_SUCCESS) {
    return result;
  }
  if (uuid == nullptr) return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetUuid", "uuid is NULL");
  *uuid = DriverState::Get().devices().at(device).uuid;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (CUresult result = CheckDevice("cuDeviceGetAttribute", device); result != CUDA_SUCCESS) {
    return result;
  }
  const std::optional<int> found = DriverState::Get().devices().Attribute(attribute);
  if (value == nullptr || !found) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute",
                  "pi is NULL or attribute " + std::to_string(attribute) + " does not exist");
  }
  *value = *found;
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice device) {
  if (CUresult result = CheckDevice("cuDeviceTotalMem", device); result != CUDA_SUCCESS) {
    return result;
  }
  if (bytes == nullptr)
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceTotalMem", "bytes is NULL");
  *bytes = DriverState::Get().devices().at(device).total_memory;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (CUresult result = CheckDevice("cuDevicePrimaryCtxRetain", device); result != CUDA_SUCCESS) {
    return result;
  }
  if (context == nullptr) {
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxRetain", "pctx is NULL");
  }
  DriverState& state = DriverState::Get();
  std::lock_guard lock(state.mutex());
  *context = state.PrimaryContext(device);
  ++(*context)->retains;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (CUresult result = CheckDevice("cuDevicePrimaryCtxRelease", device); result != CUDA_SUCCESS) {
    return result;
  }
  DriverState& state = DriverState::Get();
  std::lock_guard lock(state.mutex());
  CUctx_st* context = state.PrimaryContext(device);
  if (context->retains == 0) {
    return Refuse(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease",
                  "device " + std::to_string(device) +
                      "'s primary context is not retained (released more often than retained)");
  }
  --context->retains;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (CUresult result = CheckInitialized("cuCtxSetCurrent"); result != CUDA_SUCCESS) return result;
  DriverState& state = DriverState::Get();
  std::lock_guard lock(state.mutex());
  if (context != nullptr && (!state.IsContext(context) || context->retains == 0)) {
    return Refuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent",
                  "not a live context (a primary context must be retained)");
  }
  softcuda::CurrentContext() = context;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  if (CUresult result = CheckInitialized("cuCtxGetCurrent"); result != CUDA_SUCCESS) return result;
  if (context == nullptr)
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuCtxGetCurrent", "pctx is NULL");
  *context = softcuda::CurrentContext();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  CUcontext context = nullptr;
  if (CUresult result = softcuda::CheckCurrentContext("cuCtxGetDevice", &context);
      result != CUDA_SUCCESS) {
    return result;
  }
  if (device == nullptr)
    return Refuse(CUDA_ERROR_INVALID_VALUE, "cuCtxGetDevice", "device is NULL");
  *device = context->device;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  CUcontext context = nullptr;
  if (CUresult result = softcuda::CheckCurrentContext("cuCtxSynchronize", &context);
      result != CUDA_SUCCESS) {
    return result;
  }
  DriverState& state = DriverState::Get();
  std::vector<CUstream_st*> streams;
  {
    std::lock_guard lock(state.mutex());
    if (context->default_stream != nullptr) streams.push_back(context->default_stream);
    for (CUstream stream : state.streams()) {
      if (stream->context() == context) streams.push_back(stream);
    }
  }
  // A stream destroyed meanwhile by another thread would be a race of the caller's own.
  for (CUstream_st* stream : streams) stream->Synchronize();
  return CUDA_SUCCESS;
}
