// What a plan says for each operator: its parallel mode, how it is split into slices, how many
// slices are sharded, and whether it is checkpointed. Plans are values; JSON I/O in plan_io.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace osdp {

// Parallel modes (DESIGN section 1).
//   dp   - replicated parameters, gradients and optimizer states; gradient all-reduce
//   zdp  - ZeRO-3 / FSDP FULL_SHARD: everything sharded; gather for forward and backward
//   z2   - ZeRO-2 / FSDP SHARD_GRAD_OP: gather once in forward, keep until backward
//   z1   - ZeRO-1 (DeepSpeed stage 1): optimizer states sharded; gradients reduce-scattered,
//          updated parameter shards all-gathered after the step
//   hsdp - hybrid: shard inside a node, replicate across nodes
// What each one does is described once, in model/mode.hpp (names included).
enum class Mode { dp, zdp, z2, z1, hsdp };

// Activation checkpointing of one operator.
//   none     - keep all activations for backward
//   unfused  - checkpoint(FSDP(op)): recompute re-gathers parameters (an extra all-gather)
//   fused    - FSDP(checkpoint(op)): the recompute gather is kept for backward
enum class Checkpoint { none, unfused, fused };

std::string_view checkpoint_name(Checkpoint checkpoint);
std::optional<Checkpoint> checkpoint_from_name(std::string_view name);

// The choice for one operator. `slices` is the split granularity k; `sharded_slices` (j) of
// them run in `mode` and the other k - j in DP. mode == dp exactly when sharded_slices == 0.
// `offload`: the sharded slices' states live in host memory and their optimizer step runs on
// the CPU, as the mode's offload description says (model/mode.hpp: FSDP CPUOffload for the
// modes that gather each use, ZeRO-Offload for z2 and z1).
struct OperatorChoice {
  Mode mode = Mode::dp;
  int slices = 1;
  int sharded_slices = 0;
  Checkpoint checkpoint = Checkpoint::none;
  bool offload = false;

  static OperatorChoice whole(Mode mode, Checkpoint checkpoint = Checkpoint::none,
                              bool offload = false) {
    return {mode, 1, mode == Mode::dp ? 0 : 1, checkpoint, offload};
  }
  bool operator==(const OperatorChoice&) const = default;
};

// Short label for tables: "zdp", "zdp 2/4", "dp+ckpt", "zdp+fused".
std::string describe(const OperatorChoice& choice);

// A plan: one choice per operator (indexed like Workload::operators) and the batch size per rank.
struct Plan {
  int batch_size = 1;  // one micro-batch per rank
  std::vector<OperatorChoice> choices;
  // Micro-batches per rank per iteration when the scheduler chose them for a global batch
  // (training.global_batch_size); 0: the training's accumulation_steps.
  int accumulation_steps = 0;
  // FSDP units (model/wrapping.hpp): operators per unit in execution order; `choices` then has
  // one entry per unit. Empty: one unit per operator, a choice per operator.
  std::vector<int> unit_sizes;
};

// The most slices any operator of the plan has (at least 1). A plan is costed with its
// neighbours' slices assumed this fine (CostSettings::finest_split): what the plan itself does
// at most, so that its cost does not depend on the options the search had.
int finest_split(const Plan& plan);

}  // namespace osdp
