// The software devices: how many, their UUIDs, names, memory and attributes, all decided at
// cuInit from the environment:
//   HURRAY_SOFTCUDA_DEVICES          number of physical devices (default 1)
//   HURRAY_SOFTCUDA_DEVICE_MEMORY    bytes of each device (default 1 GiB)
//   HURRAY_SOFTCUDA_ATTR_<NAME>      the value of CU_DEVICE_ATTRIBUTE_<NAME>, for every device
//   CUDA_VISIBLE_DEVICES             as the real driver reads it (ordinals, GPU-<uuid> prefixes)
//
// Immutable once built; thread-safe to read.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace softcuda {

struct SoftDevice {
  int physical_index = 0;  // Before CUDA_VISIBLE_DEVICES picked and ordered the devices.
  CUuuid uuid{};
  std::string name;  // "hurray software CUDA device <physical_index>".
  std::size_t total_memory = 0;
};

// "GPU-" and the UUID's 32 hex digits in groups of 8-4-4-4-12, as nvidia-smi prints it.
std::string FormatUuid(const CUuuid& uuid);

// The UUID of physical device `index`: deterministic, distinct for every index.
CUuuid DeviceUuid(int index);

// The physical devices CUDA_VISIBLE_DEVICES=`spec` makes visible, in its order, as the real
// driver reads it: entries separated by commas, each a decimal ordinal or a prefix of a
// device's "GPU-..." UUID; the list ends at the first entry that names no device or one
// already named. No `spec`: every device. Pure.
std::vector<int> SelectVisibleDevices(std::optional<std::string_view> spec,
                                      const std::vector<std::string>& uuids);

class DeviceTable {
 public:
  // Reads the environment (see the top of this file).
  static DeviceTable FromEnvironment();

  [[nodiscard]] int count() const { return static_cast<int>(devices_.size()); }
  [[nodiscard]] bool Valid(CUdevice device) const { return device >= 0 && device < count(); }
  // `device` must be Valid.
  [[nodiscard]] const SoftDevice& at(CUdevice device) const {
    return devices_[static_cast<std::size_t>(device)];
  }
  // The attribute's value on every device; nullopt for a value outside CUdevice_attribute.
  [[nodiscard]] std::optional<int> Attribute(CUdevice_attribute attribute) const;

 private:
  std::vector<SoftDevice> devices_;
  std::map<int, int> attributes_;  // Those that are not 0.
};

}  // namespace softcuda
