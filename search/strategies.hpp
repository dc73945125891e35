// Strategy baselines evaluated by the same cost model and batch-size scheduler: DDP (all DP),
// FSDP (all ZDP), ZeRO-2 (all Z2), ZeRO-1 (all Z1), each with and without checkpointing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "search/exact.hpp"

namespace osdp {

struct Strategy {
  std::string name;  // "ddp", "fsdp", "zero2", "ddp+ckpt", ...
  Mode mode = Mode::dp;
  Checkpoint checkpoint = Checkpoint::none;
};

// DDP, FSDP, ZeRO-2, the same with checkpointing (fused recompute gather for FSDP), then
// ZeRO-1 without and with.
std::vector<Strategy> standard_strategies();
std::optional<Strategy> strategy_from_name(const std::string& name);
// "ddp, fsdp, zero2, ...": every standard strategy's name, for messages.
std::string strategy_names();

// The strategy's plan at a batch size: every operator in the mode; operators that cannot be
// checkpointed stay without.
Plan strategy_plan(const CostModel& model, const Strategy& strategy, int batch);

struct StrategyResult {
  Strategy strategy;
  std::optional<ScheduledPlan> best;  // highest throughput over batch sizes; nullopt: OOM
};

StrategyResult schedule_strategy(const CostModel& model, const Strategy& strategy,
                                 std::optional<double> memory_limit_bytes = std::nullopt);

}  // namespace osdp
