// Where a rank's tensors live, how its clocks are read and its memory measured.
//   cpu:  host memory; the counting allocator (live bytes and their high-water mark); Gloo.
//   cuda: cuda:LOCAL_RANK; the CUDA caching allocator's statistics; the device synchronised
//         before every clock reading (kernels run asynchronously); NCCL. Built only with
//         -DOSDP_WITH_CUDA=ON against a CUDA libtorch: its code is in validate/cuda/, which the
//         CPU build never compiles.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>

#include "validate/communicator.hpp"
#include "validate/counting_allocator.hpp"
#include "validate/device_kind.hpp"

namespace osdp::validate {

class RankDevice {
 public:
  virtual ~RankDevice() = default;
  virtual c10::Device device() const = 0;
  // Blocks until the work queued on the device is done, so that a clock read next sees it (a
  // no-op on the CPU, where work is done when queued).
  virtual void synchronize() const = 0;
  // Bytes allocated on the device now and their high-water mark since reset_peak_memory().
  virtual MemoryCounts memory_counts() const = 0;
  virtual void reset_peak_memory() = 0;
  // The c10d backend whose collectives take this device's tensors.
  virtual CommBackend backend() const = 0;
  // What a calibrated cluster calls the device, and its memory (nullopt on the CPU, whose
  // ranks share the host's).
  virtual std::string name() const = 0;
  virtual std::optional<double> memory_capacity_bytes() const = 0;
};

// The CPU (installs the counting allocator) or cuda:`local_rank`. Throws InputError (file
// `file`, path "$.validation.device") for cuda in a build without the device path.
std::unique_ptr<RankDevice> make_rank_device(DeviceKind kind, int local_rank,
                                             const std::string& file = "scenario");

}  // namespace osdp::validate
