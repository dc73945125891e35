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
  // Samples per iteration over all ranks, when fixed: the scheduler then chooses the
  // micro-batch b and the accumulation steps m with b x m x ranks = global_batch_size (memory
  // is per micro-batch), and accumulation_steps above is what a plan's m is evaluated with.
  std::optional<int> global_batch_size;
  ReducePrecision gradient_reduce = ReducePrecision::parameters;

  // Samples one rank processes per iteration at micro-batch b.
  int samples_per_rank(int micro_batch) const { return micro_batch * accumulation_steps; }
  // Accumulation steps that make micro-batch b reach the global batch on `ranks` ranks; nullopt
  // when b x ranks does not divide it (or no global batch is fixed).
  std::optional<int> accumulation_for(int micro_batch, int ranks) const {
    if (!global_batch_size) return std::nullopt;
    const long long per_step = static_cast<long long>(micro_batch) * ranks;
    if (per_step <= 0 || *global_batch_size % per_step != 0) return std::nullopt;
    return static_cast<int>(*global_batch_size / per_step);
  }
  // The training a plan of micro-batch b runs with: its accumulation steps set for the global
  // batch (or the plan's recorded ones); unchanged when neither applies.
  Training for_micro_batch(int micro_batch, int ranks, int plan_accumulation_steps = 0) const {
    Training training = *this;
    if (plan_accumulation_steps > 0) {
      training.accumulation_steps = plan_accumulation_steps;
    } else if (const auto steps = accumulation_for(micro_batch, ranks)) {
      training.accumulation_steps = *steps;
    }
    return training;
  }
};

}  // namespace osdp
