#include "device_table.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "refusal.h"

namespace softcuda {
namespace {

struct AttributeDefault {
  const char* name;  // After "CU_DEVICE_ATTRIBUTE_".
  CUdevice_attribute attribute;
  int value;
};

// An H100-like device on an x86 host. Attributes not listed are 0 unless overridden.
// READ_ONLY_HOST_REGISTER_SUPPORTED is 0 as measured on x86 hosts (docs/gpu.md, "Waiting for
// a fence: the consumer's relay").
constexpr std::array kAttributeDefaults{
    AttributeDefault{"MAX_THREADS_PER_BLOCK", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    AttributeDefault{"WARP_SIZE", CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    AttributeDefault{"MULTIPROCESSOR_COUNT", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1},
    AttributeDefault{"INTEGRATED", CU_DEVICE_ATTRIBUTE_INTEGRATED, 0},
    AttributeDefault{"CAN_MAP_HOST_MEMORY", CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    AttributeDefault{"UNIFIED_ADDRESSING", CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    AttributeDefault{"COMPUTE_CAPABILITY_MAJOR", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
    AttributeDefault{"COMPUTE_CAPABILITY_MINOR", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
    AttributeDefault{"PAGEABLE_MEMORY_ACCESS", CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0},
    AttributeDefault{"PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES",
                     CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0},
    AttributeDefault{"CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM",
                     CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1},
    AttributeDefault{"HOST_REGISTER_SUPPORTED", CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1},
    AttributeDefault{"READ_ONLY_HOST_REGISTER_SUPPORTED",
                     CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, 0},
    AttributeDefault{"CAN_USE_64_BIT_STREAM_MEM_OPS",
                     CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 1},
    AttributeDefault{"CAN_USE_STREAM_WAIT_VALUE_NOR",
                     CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, 1},
    AttributeDefault{"VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",
                     CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
    AttributeDefault{"HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED",
                     CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1},
    AttributeDefault{"IPC_EVENT_SUPPORTED", CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 1},
    AttributeDefault{"GPU_DIRECT_RDMA_SUPPORTED", CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0},
    AttributeDefault{"GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED",
                     CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 1},
    AttributeDefault{"MEMORY_POOLS_SUPPORTED", CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0},
};

constexpr std::size_t kDefaultDeviceMemory = std::size_t{1} << 30;

// The physical device an entry of CUDA_VISIBLE_DEVICES names, if any.
std::optional<int> DeviceNamedBy(std::string_view entry, const std::vector<std::string>& uuids) {
  if (entry.starts_with("GPU-")) {
    std::optional<int> found;
    for (std::size_t i = 0; i < uuids.size(); ++i) {
      if (!uuids[i].starts_with(entry)) continue;
      if (found) return std::nullopt;  // An ambiguous prefix names no device.
      found = static_cast<int>(i);
    }
    return found;
  }
  int ordinal = -1;
  const auto [stop, error] = std::from_chars(entry.data(), entry.data() + entry.size(), ordinal);
  if (error != std::errc() || stop != entry.data() + entry.size()) return std::nullopt;
  if (ordinal < 0 || ordinal >= static_cast<int>(uuids.size())) return std::nullopt;
  return ordinal;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

}  // namespace

std::string FormatUuid(const CUuuid& uuid) {
  std::string text = "GPU-";
  for (std::size_t i = 0; i < sizeof uuid.bytes; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    std::array<char, 3> hex{};
    (void)std::snprintf(hex.data(), hex.size(), "%02x",
                        static_cast<unsigned>(static_cast<unsigned char>(uuid.bytes[i])));
    text += hex.data();
  }
  return text;
}

CUuuid DeviceUuid(int index) {
  // "50f7cada-..." (softcuda), a version-4 layout, the index in the last four bytes.
  constexpr std::array<unsigned char, 12> kPrefix{0x50, 0xf7, 0xca, 0xda, 0x4e, 0x11,
                                                  0x4a, 0x7e, 0x8b, 0x0c, 0x00, 0x00};
  CUuuid uuid{};
  std::ranges::copy(kPrefix, uuid.bytes);
  const auto bits = static_cast<std::uint32_t>(index);
  for (std::size_t i = 0; i < 4; ++i) {
    uuid.bytes[12 + i] = static_cast<char>((bits >> (8 * (3 - i))) & 0xff);
  }
  return uuid;
}

std::vector<int> SelectVisibleDevices(std::optional<std::string_view> spec,
                                      const std::vector<std::string>& uuids) {
  std::vector<int> visible;
  if (!spec) {
    for (std::size_t i = 0; i < uuids.size(); ++i) visible.push_back(static_cast<int>(i));
    return visible;
  }
  std::string_view rest = *spec;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view entry = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::optional<int> device = DeviceNamedBy(entry, uuids);
    if (!device || std::ranges::find(visible, *device) != visible.end()) break;
    visible.push_back(*device);
  }
  return visible;
}

DeviceTable DeviceTable::FromEnvironment() {
  DeviceTable table;
  const std::uint64_t physical = EnvironmentNumber("HURRAY_SOFTCUDA_DEVICES", 1);
  const std::uint64_t memory =
      EnvironmentNumber("HURRAY_SOFTCUDA_DEVICE_MEMORY", kDefaultDeviceMemory);
  std::vector<std::string> uuids;
  for (std::uint64_t i = 0; i < std::min<std::uint64_t>(physical, 64); ++i) {
    uuids.push_back(FormatUuid(DeviceUuid(static_cast<int>(i))));
  }
  const std::optional<std::string> spec = Environment("CUDA_VISIBLE_DEVICES");
  const std::vector<int> visible =
      SelectVisibleDevices(spec ? std::optional<std::string_view>(*spec) : std::nullopt, uuids);
  for (const int index : visible) {
    table.devices_.push_back(SoftDevice{
        .physical_index = index,
        .uuid = DeviceUuid(index),
        .name = "hurray software CUDA device " + std::to_string(index),
        .total_memory = static_cast<std::size_t>(memory),
    });
  }
  for (const AttributeDefault& entry : kAttributeDefaults) {
    const std::string variable = std::string("HURRAY_SOFTCUDA_ATTR_") + entry.name;
    const std::uint64_t value =
        EnvironmentNumber(variable.c_str(), static_cast<std::uint64_t>(entry.value));
    if (value != 0) table.attributes_[entry.attribute] = static_cast<int>(value);
  }
  return table;
}

std::optional<int> DeviceTable::Attribute(CUdevice_attribute attribute) const {
  if (attribute <= 0 || attribute >= CU_DEVICE_ATTRIBUTE_MAX) return std::nullopt;
  const auto found = attributes_.find(attribute);
  return found == attributes_.end() ? 0 : found->second;
}

}  // namespace softcuda
