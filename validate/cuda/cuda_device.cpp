#include "validate/cuda/cuda_device.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

namespace osdp::validate {
namespace {

namespace allocator = c10::cuda::CUDACachingAllocator;

class CudaDevice final : public RankDevice {
 public:
  explicit CudaDevice(int index) : index_(static_cast<c10::DeviceIndex>(index)) {
    TORCH_CHECK(index >= 0 && index < c10::cuda::device_count(), "cuda:", index,
                " does not exist (", static_cast<int>(c10::cuda::device_count()),
                " CUDA devices visible)");
    c10::cuda::set_device(index_);
  }

  c10::Device device() const override { return c10::Device(c10::DeviceType::CUDA, index_); }

  void synchronize() const override { c10::cuda::device_synchronize(); }

  // The caching allocator's allocated bytes: what tensors hold, as the counting allocator
  // reports on the CPU (its reserved-but-free cache is left out, as the model leaves it out).
  MemoryCounts memory_counts() const override {
    const allocator::DeviceStats stats = allocator::getDeviceStats(index_);
    // Index 0 is StatType::AGGREGATE (all pools), which PyTorch 2.x moved to another namespace.
    constexpr std::size_t aggregate = 0;
    const auto& allocated = stats.allocated_bytes[aggregate];
    return {allocated.current, allocated.peak};
  }

  void reset_peak_memory() override { allocator::resetPeakStats(index_); }

  CommBackend backend() const override { return CommBackend::nccl; }

  std::string name() const override { return properties().name; }

  std::optional<double> memory_capacity_bytes() const override {
    return static_cast<double>(properties().totalGlobalMem);
  }

 private:
  cudaDeviceProp properties() const {
    cudaDeviceProp properties{};
    C10_CUDA_CHECK(cudaGetDeviceProperties(&properties, index_));
    return properties;
  }

  c10::DeviceIndex index_;
};

}  // namespace

std::unique_ptr<RankDevice> make_cuda_device(int device_index) {
  return std::make_unique<CudaDevice>(device_index);
}

}  // namespace osdp::validate
