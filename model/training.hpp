// The training setup: precision, optimizer, memory limit and batch-size range.
#pragma once

#include <optional>
#include <string_view>

namespace osdp {

// fp32: everything in 4-byte floats. mixed: 2-byte parameters, gradients and activations with
// an fp32 master copy held by the optimizer (the usual AMP / DeepSpeed fp16 setup).
enum class Precision { fp32, mixed };
// adam: two fp32 moments. sgd: SGD with one fp32 momentum buffer.
enum class Optimizer { adam, sgd };

std::string_view precision_name(Precision precision);
std::string_view optimizer_name(Optimizer optimizer);

// Bytes each parameter costs in model states.
struct BytesPerParameter {
  double parameter = 4;
  double gradient = 4;
  double optimizer = 8;  // moments, plus the fp32 master copy in mixed precision
  double total() const { return parameter + gradient + optimizer; }
};

BytesPerParameter bytes_per_parameter(Precision precision, Optimizer optimizer);
// Bytes per activation element (4 in fp32, 2 in mixed precision).
double activation_element_bytes(Precision precision);

// How gradients are summed across data-parallel ranks: in the parameters' dtype (what DDP and
// Megatron do by default with fp16) or in fp32 (Megatron's --accumulate-allreduce-grads-in-fp32).
enum class ReducePrecision { parameters, fp32, fp16 };
std::string_view reduce_precision_name(ReducePrecision precision);
// Bytes per gradient element the all-reduce and reduce-scatter move.
double reduce_element_bytes(Precision precision, ReducePrecision reduce);

struct Training {
  Precision precision = Precision::fp32;
  Optimizer optimizer = Optimizer::adam;
  // Per-GPU memory limit; when unset the GPU's memory is the limit.
  std::optional<double> memory_limit_bytes;
  // Micro-batch sizes per rank the scheduler tries (a plan's batch_size is one micro-batch).
  int min_batch_size = 1;
  int max_batch_size = 64;
  // Gradient accumulation: micro-batches per rank per iteration, each a forward and backward;
  // the optimizer steps once. Global batch = micro-batch x accumulation_steps x data-parallel
  // ranks.
  int accumulation_steps = 1;
  ReducePrecision gradient_reduce = ReducePrecision::parameters;

  // Samples one rank processes per iteration at micro-batch b.
  int samples_per_rank(int micro_batch) const { return micro_batch * accumulation_steps; }
};

}  // namespace osdp
