// NCCL collectives timed on this machine's GPUs: one process, one communicator per GPU, every
// GPU running the collective at once (nccl-tests style). Plain C++17 so that nvcc compiles it.
#pragma once

#include <string>
#include <vector>

namespace osdp::validate::cuda {

enum class NcclCollective { all_gather, reduce_scatter, all_reduce };

struct NcclPoint {
  NcclCollective kind = NcclCollective::all_gather;
  double bytes = 0;   // the full buffer S
  double time_s = 0;  // mean over the repetitions
};

struct NcclProbeResult {
  int gpus = 0;
  std::string gpu_name;
  double gpu_memory_bytes = 0;
  bool check_passed = false;  // an all-reduce of ones summed to the GPU count everywhere
  std::vector<NcclPoint> points;
};

// gpus <= 0: every visible GPU. Throws std::runtime_error on CUDA or NCCL errors.
NcclProbeResult run_nccl_probe(int gpus, const std::vector<double>& sizes_bytes, int repetitions);

}  // namespace osdp::validate::cuda
