// Strategy baselines evaluated by the same cost model and batch-size scheduler: DDP (all DP),
// FSDP (all ZDP), ZeRO-2 (all Z2), ZeRO-1 (all Z1), each with and without checkpointing, and
// FSDP with checkpointing the way each FSDP library composes the two:
//   fsdp+ckpt            PyTorch FSDP, FSDP(checkpoint(op)): the checkpoint sits inside the FSDP
//                        unit, so the unit's pre-backward all-gather serves the recompute and the
//                        backward (2 all-gathers + 1 reduce-scatter; fused recompute).
//   fsdp+ckpt-fairscale  FairScale, checkpoint_wrapper(FSDP(op)): the recompute calls the FSDP
//                        module's forward again, which all-gathers the parameters again and frees
//                        them; backward gathers once more (3 all-gathers + 1 reduce-scatter;
//                        unfused). This is what the OSDP paper measured (fairscale 0.4.5).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/wrapping.hpp"
#include "search/exact.hpp"

namespace osdp {

struct Strategy {
  std::string name;  // "ddp", "fsdp", "zero2", "ddp+ckpt", ...
  Mode mode = Mode::dp;
  Checkpoint checkpoint = Checkpoint::none;
  std::string description;  // what the library it stands for does
  // How the model is wrapped into FSDP units (model/wrapping.hpp); per operator for all but
  // the *_block strategies and fsdp_min_params.
  WrappingRule units{};
  // CPU offload of every operator's states (model/mode.hpp: fsdp_offload, zero2_offload).
  bool offload = false;
};

// DDP, FSDP, ZeRO-2, then the same with checkpointing (PyTorch FSDP's fused recompute gather
// for fsdp+ckpt), FairScale's FSDP with checkpointing (unfused), ZeRO-1 without and with, then
// FSDP wrapped one unit per transformer block (fsdp_block; checkpointed, fsdp_block+ckpt; and
// SHARD_GRAD_OP, zero2_block and zero2_block+ckpt) and by PyTorch's size-based auto-wrap
// policy at `min_unit_parameters` (fsdp_min_params), then the CPU-offloaded FSDP
// (fsdp_offload: PyTorch FSDP CPUOffload) and ZeRO-2 (zero2_offload: DeepSpeed ZeRO-Offload).
std::vector<Strategy> standard_strategies(double min_unit_parameters = 1e8);
// A standard strategy by name; "fsdp+ckpt-pytorch" is another name for "fsdp+ckpt".
std::optional<Strategy> strategy_from_name(const std::string& name,
                                           double min_unit_parameters = 1e8);
// The names strategy_from_name accepts, for messages: "ddp, fsdp, ..., fsdp+ckpt-fairscale".
std::string strategy_names();

// The strategy's plan at a batch size for the scenario's `model`: every operator (every unit,
// the model wrapped as the strategy says, Plan::unit_sizes) in the mode; operators that cannot be
// checkpointed stay without.
Plan strategy_plan(const CostModel& model, const Strategy& strategy, int batch);

// The strategy's peak memory at a batch size (its units wrapped); nullopt when the cluster does
// not allow it (hsdp on one node).
std::optional<double> strategy_peak_bytes(const CostModel& model, const Strategy& strategy,
                                          int batch);

struct StrategyResult {
  Strategy strategy;
  std::optional<ScheduledPlan> best;  // highest throughput over batch sizes; nullopt: OOM
};

// The strategy's best plan by the batch-size scheduler. `model` is the scenario's (unwrapped);
// a strategy with units wraps the workload, and its plan records the unit sizes.
StrategyResult schedule_strategy(const CostModel& model, const Strategy& strategy,
                                 std::optional<double> memory_limit_bytes = std::nullopt);

}  // namespace osdp
