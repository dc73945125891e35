// The plan executed for real: the GPT split into model/'s operators, each running its mode with
// real collectives (DESIGN section 4). One concept per file, as PyTorch's FSDP and c10d are
// organised; this class composes them into a training step:
//   parameter_shards    the layout: units, their slices and what each rank holds of them
//                       (dp replicated; zdp, z2, hsdp a 1/N shard; z1 whole parameters and
//                       gradient, a 1/N of the optimizer states)
//   gather_schedule     when a slice is all-gathered and freed (prefetch, checkpointing)
//   gpt_operators       the operator maths, slice by slice (partial sums are added)
//   gradient_reduction  each mode's gradient reduction and accumulation over micro-batches
//   optimizer_step      the optimizer on the parameters this rank updates, and CPU offload
//   step_collectives    the issue order of collectives (the schedule) and the waits for them
// Checkpointed operators keep only their input and recompute forward before backward.
#pragma once

#include <memory>

#include "model/plan.hpp"
#include "model/prefetch_policy.hpp"
#include "validate/communicator.hpp"
#include "validate/gpt_parameters.hpp"
#include "validate/rank_device.hpp"
#include "validate/step_collectives.hpp"

namespace osdp::validate {

struct RuntimeOptions {
  AdamSettings adam;
  int prefetch_depth = 1;  // forward; 0: gather on demand
  BackwardPrefetch backward_prefetch = BackwardPrefetch::pre;
  int gpus_per_node = 1;       // the HSDP shard group
  int accumulation_steps = 1;  // micro-batches per optimizer step
  // The DP operators' gradients live in one flat bucket, all-reduced once after the last
  // backward (DDP with a bucket larger than the model); otherwise each operator's after its
  // own backward, overlapping the backward of the operators before it.
  bool dp_all_reduce_after_backward = false;
};

// One optimizer step of one rank.
struct StepMetrics {
  double start_s = 0;  // steady_seconds() at the step's start
  double iteration_time_s = 0;
  // Time the compute thread waited for collectives (gathers, gradient reductions before the
  // optimizer step).
  double exposed_communication_s = 0;
  double loss = 0;  // this rank's mean loss on its local batch (over its micro-batches)
  // High-water mark of the rank's device allocations during the step (the counting allocator on
  // the CPU: the whole process; the caching allocator's allocated bytes on CUDA).
  std::int64_t peak_memory_bytes = 0;
  // Compute of each operator (waits for collectives excluded): forward, and backward including
  // a checkpointed operator's recompute; seconds from the step's start for the trace.
  struct OperatorTiming {
    double forward_start_s = 0;
    double forward_s = 0;
    double backward_start_s = 0;
    double backward_s = 0;
    // Live bytes (as peak_memory_bytes) when the phase ended, and their high-water mark during
    // the phase (where in the step the peak is, for comparing with the model's).
    std::int64_t forward_end_live_bytes = 0;
    std::int64_t backward_end_live_bytes = 0;
    std::int64_t forward_peak_bytes = 0;
    std::int64_t backward_peak_bytes = 0;
  };
  // One per operator and micro-batch: micro-batch u's operator i at u x operators + i.
  std::vector<OperatorTiming> operators;
  double optimizer_step_s = 0;
  std::vector<ScheduleEntry> schedule;
  // Each time the compute thread blocked on a collective, seconds from the step's start (for
  // the trace: where in the step the exposed communication is); they add up to
  // exposed_communication_s.
  std::vector<CollectiveWait> waits;
};

class ShardedGpt {
 public:
  // Throws InputError (file "plan") for choices the runtime cannot execute (slice counts that do
  // not divide the operator, hsdp without whole nodes). Tensors live on `device` (its
  // communicator's backend must take them); without one, on the CPU.
  ShardedGpt(const GptShape& shape, const Plan& plan, Communicator& communicator,
             const NamedTensors& initial, RuntimeOptions options);
  ShardedGpt(const GptShape& shape, const Plan& plan, Communicator& communicator,
             const NamedTensors& initial, RuntimeOptions options, RankDevice& device);
  ~ShardedGpt();
  ShardedGpt(const ShardedGpt&) = delete;
  ShardedGpt& operator=(const ShardedGpt&) = delete;

  // Forward, backward and Adam step on this rank's rows of the global batch: with gradient
  // accumulation, its rows are the micro-batches one after another (their count must divide
  // the rows; throws InputError otherwise).
  StepMetrics train_step(const TokenBatch& local_batch);
  // The full parameters in canonical layout (a collective: every rank calls it).
  NamedTensors full_parameters();
  // Bytes this rank holds between steps (parameters, gradients, optimizer states).
  std::int64_t persistent_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace osdp::validate
