#include "pool/cuda_devices.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <string_view>
#include <utility>

#include "hurray/checked_math.h"
#include "pool/huge_pages.h"

namespace hurray::daemon {
namespace {

constexpr std::uint64_t kMinGranularity = 4096;
// Slab ids of ordinal N start at (N + 1) << 32; fence segments start at 1 << 56.
constexpr std::uint64_t kMaxOrdinal = (std::uint64_t{1} << 24) - 2;

// The mechanism a device supports, and why when it is not VMM.
std::pair<SlabMechanism, std::string> ChooseMechanism(const CudaDeviceFacts& device) {
  if (!device.vmm_supported) {
    return {SlabMechanism::kLegacyIpc,
            "legacy_ipc: the device has no virtual memory management "
            "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 0)"};
  }
  if (!device.posix_fd_supported) {
    return {SlabMechanism::kLegacyIpc,
            "legacy_ipc: the device cannot export POSIX file descriptors "
            "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED 0)"};
  }
  if (device.granularity_bytes < kMinGranularity ||
      !std::has_single_bit(device.granularity_bytes)) {
    return {SlabMechanism::kLegacyIpc,
            fmt::format("legacy_ipc: the device's allocation granularity {} is not a power of "
                        "two of at least {}",
                        device.granularity_bytes, kMinGranularity)};
  }
  return {SlabMechanism::kVmm, "vmm: cuMemCreate slabs exported as POSIX file descriptors"};
}

Result<CudaPoolPlan> PlanPool(const CudaDeviceFacts& device, const CudaPoolSizing& sizing) {
  const std::string name = fmt::format("cuda:{}", device.ordinal);
  if (device.ordinal > kMaxOrdinal) {
    return InvalidArgumentError(
        fmt::format("device {} ({}): ordinal {} leaves no room for its segment ids (at most {})",
                    name, device.uuid, device.ordinal, kMaxOrdinal));
  }
  auto [mechanism, explanation] = ChooseMechanism(device);
  if (mechanism == SlabMechanism::kLegacyIpc && !device.legacy_ipc_supported) {
    return FailedPreconditionError(fmt::format(
        "device {} ({}): {}, and this driver has no legacy IPC calls (cuIpcGetMemHandle, "
        "cuIpcOpenMemHandle, cuIpcCloseMemHandle): no way to share its memory; set "
        "[cuda_pool] enabled = false or use a driver that has them",
        name, device.uuid, explanation));
  }
  if (!device.stream_mem_ops_64) {
    explanation +=
        "; no 64-bit stream memory operations (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS "
        "0): Event handoffs (PublishAfter, WaitOn, ReadyEvent) fail on this device";
  }
  const bool gpu_direct_rdma = mechanism == SlabMechanism::kVmm && device.gpu_direct_rdma_with_vmm;
  if (gpu_direct_rdma) explanation += "; GPUDirect RDMA capable slabs";
  const std::uint64_t granule =
      mechanism == SlabMechanism::kVmm ? device.granularity_bytes : kLegacySlabGranularity;
  const std::uint64_t wanted =
      sizing.capacity_bytes != 0 ? sizing.capacity_bytes : device.total_memory_bytes / 2;
  const std::uint64_t capacity = std::min(wanted, device.total_memory_bytes) / granule * granule;
  if (capacity == 0) {
    return InvalidArgumentError(fmt::format(
        "device {} ({}): capacity {} of a device of {} bytes is below one granule of {}", name,
        device.uuid, wanted, device.total_memory_bytes, granule));
  }
  if (wanted > device.total_memory_bytes) {
    explanation += fmt::format("; capacity {} is above the device's memory: {}", wanted, capacity);
  }
  std::uint64_t slab =
      internal::CheckedRoundUp(std::max<std::uint64_t>(sizing.slab_bytes, 1), granule)
          .value_or(capacity);
  if (slab > capacity) {
    explanation += fmt::format("; slab_size {} is above the capacity: slabs of {}",
                               sizing.slab_bytes, FormatPageSize(capacity));
    slab = capacity;
  }
  return CudaPoolPlan{.device = device,
                      .name = name,
                      .mechanism = mechanism,
                      .granularity_bytes = granule,
                      .capacity_bytes = capacity,
                      .slab_bytes = slab,
                      .first_segment_id = (std::uint64_t{device.ordinal} + 1) << 32,
                      .gpu_direct_rdma = gpu_direct_rdma,
                      .explanation = std::move(explanation)};
}

}  // namespace

Result<std::vector<CudaPoolPlan>> ChooseCudaPools(const std::vector<CudaDeviceFacts>& devices,
                                                  const CudaPoolSizing& sizing) {
  std::vector<CudaPoolPlan> plans;
  plans.reserve(devices.size());
  for (const CudaDeviceFacts& device : devices) {
    HURRAY_ASSIGN_OR_RETURN(CudaPoolPlan plan, PlanPool(device, sizing));
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::string DescribeCudaPoolPlan(const CudaPoolPlan& plan) {
  const CudaDeviceFacts& device = plan.device;
  return fmt::format(
      "pool {} on {}{} ({}, ordinal {}, {} of memory): capacity {}, slabs of {}, granularity "
      "{}; {}",
      plan.name, device.uuid,
      device.parent_uuid.empty() ? std::string() : fmt::format(" of {}", device.parent_uuid),
      device.name, device.ordinal, FormatPageSize(device.total_memory_bytes),
      FormatPageSize(plan.capacity_bytes), FormatPageSize(plan.slab_bytes),
      FormatPageSize(plan.granularity_bytes), plan.explanation);
}

#if HURRAY_HAVE_CUDA

namespace {

// `call` of device `ordinal` as an error, when it failed.
Status CheckDeviceCall(const cuda::DriverApi& api, std::uint32_t ordinal, std::string_view call,
                       CUresult result) {
  Status status = cuda::CheckCuda(api, call, result);
  if (!status)
    return std::unexpected(status.error().WithContext(fmt::format("device {}", ordinal)));
  return status;
}

Result<bool> DeviceFlag(const cuda::DriverApi& api, CUdevice device, std::uint32_t ordinal,
                        CUdevice_attribute attribute, std::string_view attribute_name) {
  int value = 0;
  HURRAY_RETURN_IF_ERROR(CheckDeviceCall(api, ordinal,
                                         fmt::format("cuDeviceGetAttribute {}", attribute_name),
                                         api.DeviceGetAttribute(&value, attribute, device)));
  return value != 0;
}

// The granularity of the slabs CudaSlabMemory creates on `device`; 0 when the driver refuses
// the query (then the device gets a legacy pool).
std::uint64_t ExportableGranularity(const cuda::DriverApi& api, CUdevice device,
                                    bool gpu_direct_rdma) {
  const CUmemAllocationProp properties = SlabAllocationProperties(device, gpu_direct_rdma);
  std::size_t granularity = 0;
  if (api.MemGetAllocationGranularity(&granularity, &properties,
                                      CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) {
    return 0;
  }
  return granularity;
}

Result<CudaDeviceFacts> ReadDevice(const cuda::DriverApi& api, std::uint32_t ordinal) {
  CudaDeviceFacts facts{.ordinal = ordinal};
  CUdevice device = 0;
  HURRAY_RETURN_IF_ERROR(CheckDeviceCall(api, ordinal, "cuDeviceGet",
                                         api.DeviceGet(&device, static_cast<int>(ordinal))));
  std::array<char, 256> name{};
  HURRAY_RETURN_IF_ERROR(
      CheckDeviceCall(api, ordinal, "cuDeviceGetName",
                      api.DeviceGetName(name.data(), static_cast<int>(name.size() - 1), device)));
  facts.name = name.data();
  Result<cuda::DeviceUuids> names = cuda::ReadDeviceUuids(api, device);
  if (!names) {
    return std::unexpected(names.error().WithContext(fmt::format("device {}", ordinal)));
  }
  facts.uuid = std::move(names->uuid);
  facts.parent_uuid = std::move(names->parent_uuid);
  std::size_t total = 0;
  HURRAY_RETURN_IF_ERROR(
      CheckDeviceCall(api, ordinal, "cuDeviceTotalMem", api.DeviceTotalMem(&total, device)));
  facts.total_memory_bytes = total;
  HURRAY_ASSIGN_OR_RETURN(
      facts.vmm_supported,
      DeviceFlag(api, device, ordinal, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                 "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"));
  HURRAY_ASSIGN_OR_RETURN(
      facts.posix_fd_supported,
      DeviceFlag(api, device, ordinal,
                 CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                 "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED"));
  HURRAY_ASSIGN_OR_RETURN(
      facts.gpu_direct_rdma_with_vmm,
      DeviceFlag(api, device, ordinal, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                 "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED"));
  if (facts.vmm_supported && facts.posix_fd_supported) {
    facts.granularity_bytes = ExportableGranularity(api, device, facts.gpu_direct_rdma_with_vmm);
  }
  facts.legacy_ipc_supported = api.IpcGetMemHandle != nullptr;
  HURRAY_ASSIGN_OR_RETURN(
      facts.stream_mem_ops_64,
      DeviceFlag(api, device, ordinal, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                 "CAN_USE_64_BIT_STREAM_MEM_OPS"));
  return facts;
}

}  // namespace

CUmemAllocationProp SlabAllocationProperties(CUdevice device, bool gpu_direct_rdma) {
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = device;
  properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  properties.allocFlags.gpuDirectRDMACapable = gpu_direct_rdma ? 1 : 0;
  return properties;
}

Result<std::vector<CudaDeviceFacts>> ReadCudaDevices(const cuda::DriverApi& api) {
  int count = 0;
  HURRAY_RETURN_IF_ERROR(cuda::CheckCuda(api, "cuDeviceGetCount", api.DeviceGetCount(&count)));
  std::vector<CudaDeviceFacts> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    HURRAY_ASSIGN_OR_RETURN(CudaDeviceFacts facts,
                            ReadDevice(api, static_cast<std::uint32_t>(ordinal)));
    devices.push_back(std::move(facts));
  }
  return devices;
}

#endif  // HURRAY_HAVE_CUDA

}  // namespace hurray::daemon
