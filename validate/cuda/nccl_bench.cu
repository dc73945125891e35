// The NCCL measurements of osdp_nccl_probe (CUDA, C++17: no osdp headers here).
#include "validate/cuda/nccl_bench.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace osdp::validate::cuda {
namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

void check_nccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(status));
}

__global__ void fill(float* data, size_t count, float value) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < count) data[i] = value;
}

struct Device {
  int id = 0;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  float* buffer = nullptr;  // the full buffer S
};

// Mean seconds of `kind` over S = `elements` floats on every device at once.
double run(std::vector<Device>& devices, NcclCollective kind, size_t elements, int repetitions) {
  const size_t n = devices.size();
  const size_t chunk = elements / n;
  auto issue = [&] {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (size_t r = 0; r < n; ++r) {
      Device& d = devices[r];
      switch (kind) {
        case NcclCollective::all_gather:
          check_nccl(ncclAllGather(d.buffer + r * chunk, d.buffer, chunk, ncclFloat, d.comm, d.stream),
                     "ncclAllGather");
          break;
        case NcclCollective::reduce_scatter:
          check_nccl(ncclReduceScatter(d.buffer, d.buffer + r * chunk, chunk, ncclFloat, ncclSum,
                                       d.comm, d.stream),
                     "ncclReduceScatter");
          break;
        case NcclCollective::all_reduce:
          check_nccl(ncclAllReduce(d.buffer, d.buffer, elements, ncclFloat, ncclSum, d.comm, d.stream),
                     "ncclAllReduce");
          break;
      }
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  };
  auto synchronize = [&] {
    for (Device& d : devices) {
      check_cuda(cudaSetDevice(d.id), "cudaSetDevice");
      check_cuda(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
    }
  };
  issue();  // warm-up (and the checked run when repetitions == 0)
  synchronize();
  if (repetitions == 0) return 0.0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repetitions; ++i) issue();
  synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repetitions;
}

}  // namespace

NcclProbeResult run_nccl_probe(int gpus, const std::vector<double>& sizes_bytes, int repetitions) {
  int visible = 0;
  check_cuda(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  const int n = gpus > 0 ? gpus : visible;
  if (n < 1 || n > visible) {
    throw std::invalid_argument(std::to_string(n) + " GPUs asked, " + std::to_string(visible) + " visible");
  }
  double largest = 0;
  for (double size : sizes_bytes) largest = size > largest ? size : largest;
  const size_t capacity = static_cast<size_t>(largest / sizeof(float)) + n;
  std::vector<Device> devices(n);
  std::vector<int> ids(n);
  for (int r = 0; r < n; ++r) ids[r] = r;
  std::vector<ncclComm_t> comms(n);
  check_nccl(ncclCommInitAll(comms.data(), n, ids.data()), "ncclCommInitAll");
  for (int r = 0; r < n; ++r) {
    devices[r].id = r;
    devices[r].comm = comms[r];
    check_cuda(cudaSetDevice(r), "cudaSetDevice");
    check_cuda(cudaStreamCreate(&devices[r].stream), "cudaStreamCreate");
    check_cuda(cudaMalloc(&devices[r].buffer, capacity * sizeof(float)), "cudaMalloc");
  }
  NcclProbeResult result;
  result.gpus = n;
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  result.gpu_name = properties.name;
  result.gpu_memory_bytes = static_cast<double>(properties.totalGlobalMem);

  // Check: an all-reduce of ones gives n everywhere.
  const size_t checked = 1 << 20;
  for (Device& d : devices) {
    check_cuda(cudaSetDevice(d.id), "cudaSetDevice");
    fill<<<(checked + 255) / 256, 256, 0, d.stream>>>(d.buffer, checked, 1.0f);
  }
  run(devices, NcclCollective::all_reduce, checked, 0);
  std::vector<float> host(checked);
  result.check_passed = true;
  for (Device& d : devices) {
    check_cuda(cudaSetDevice(d.id), "cudaSetDevice");
    check_cuda(cudaMemcpy(host.data(), d.buffer, checked * sizeof(float), cudaMemcpyDeviceToHost),
               "cudaMemcpy");
    for (float value : host) result.check_passed = result.check_passed && value == static_cast<float>(n);
  }

  for (NcclCollective kind : {NcclCollective::all_gather, NcclCollective::reduce_scatter,
                              NcclCollective::all_reduce}) {
    for (double bytes : sizes_bytes) {
      const size_t elements = static_cast<size_t>(bytes / sizeof(float)) / n * n;
      result.points.push_back({kind, elements * sizeof(float) * 1.0, run(devices, kind, elements, repetitions)});
    }
  }
  for (Device& d : devices) {
    cudaSetDevice(d.id);
    cudaFree(d.buffer);
    cudaStreamDestroy(d.stream);
    ncclCommDestroy(d.comm);
  }
  return result;
}

}  // namespace osdp::validate::cuda
