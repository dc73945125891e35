// The CUDA device of a rank (validate/rank_device.hpp), compiled only with OSDP_WITH_CUDA. This
// header names no CUDA type, so the CPU-side factory can include it.
#pragma once

#include <memory>

#include "validate/rank_device.hpp"

namespace osdp::validate {

// cuda:`device_index`, made the calling thread's current device.
std::unique_ptr<RankDevice> make_cuda_device(int device_index);

}  // namespace osdp::validate
