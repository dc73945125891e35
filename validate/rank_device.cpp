#include "validate/rank_device.hpp"

#include "model/input_error.hpp"
#ifdef OSDP_WITH_CUDA_DEVICE
#include "validate/cuda/cuda_device.hpp"
#endif

namespace osdp::validate {
namespace {

class CpuDevice final : public RankDevice {
 public:
  CpuDevice() { install_counting_allocator(); }
  c10::Device device() const override { return c10::Device(c10::DeviceType::CPU); }
  void synchronize() const override {}
  MemoryCounts memory_counts() const override { return validate::memory_counts(); }
  void reset_peak_memory() override { validate::reset_peak_memory(); }
  CommBackend backend() const override { return CommBackend::gloo; }
  std::string name() const override { return "cpu"; }
  std::optional<double> memory_capacity_bytes() const override { return std::nullopt; }
};

}  // namespace

std::unique_ptr<RankDevice> make_rank_device(DeviceKind kind, int local_rank,
                                             const std::string& file) {
  if (kind == DeviceKind::cpu) return std::make_unique<CpuDevice>();
#ifdef OSDP_WITH_CUDA_DEVICE
  return make_cuda_device(local_rank);
#else
  (void)local_rank;
  throw InputError(file, "$.validation.device", "cuda",
                   "cpu (this osdp was built without the CUDA + NCCL device path: configure "
                   "with -DOSDP_WITH_CUDA=ON and CMAKE_PREFIX_PATH pointing at a CUDA libtorch)");
#endif
}

}  // namespace osdp::validate
