// Which device a rank's tensors live on (validate/rank_device.hpp has the device itself).
#pragma once

#include <string_view>

namespace osdp::validate {

enum class DeviceKind { cpu, cuda };

constexpr std::string_view device_kind_name(DeviceKind kind) {
  return kind == DeviceKind::cuda ? "cuda" : "cpu";
}

// Whether osdp-runtime was built with the CUDA + NCCL device path (-DOSDP_WITH_CUDA=ON).
bool cuda_device_path_built();

}  // namespace osdp::validate
