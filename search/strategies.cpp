#include "search/strategies.hpp"

#include "search/options.hpp"

namespace osdp {

std::vector<Strategy> standard_strategies() {
  // Without a recompute gather (DP, Z2) fused and unfused checkpointing cost the same; the
  // plain form is used. FSDP gets the fused form, FSDP(checkpoint(op)).
  return {
      {"ddp", Mode::dp, Checkpoint::none},         {"fsdp", Mode::zdp, Checkpoint::none},
      {"zero2", Mode::z2, Checkpoint::none},       {"ddp+ckpt", Mode::dp, Checkpoint::unfused},
      {"fsdp+ckpt", Mode::zdp, Checkpoint::fused}, {"zero2+ckpt", Mode::z2, Checkpoint::unfused},
      {"zero1", Mode::z1, Checkpoint::none},       {"zero1+ckpt", Mode::z1, Checkpoint::unfused},
  };
}

std::optional<Strategy> strategy_from_name(const std::string& name) {
  for (const Strategy& strategy : standard_strategies()) {
    if (strategy.name == name) return strategy;
  }
  return std::nullopt;
}

std::string strategy_names() {
  std::string names;
  for (const Strategy& strategy : standard_strategies()) {
    names += (names.empty() ? "" : ", ") + strategy.name;
  }
  return names;
}

namespace {

bool checkpointable(const Operator& op) { return op.input_activation_bytes_per_sample.has_value(); }

// Whether every operator accepts the strategy's choice (e.g. HSDP needs several nodes).
bool strategy_valid(const CostModel& model, const Plan& plan) {
  for (int i = 0; i < static_cast<int>(plan.choices.size()); ++i) {
    if (!model.valid(i, plan.choices[i])) return false;
  }
  return true;
}

}  // namespace

Plan strategy_plan(const CostModel& model, const Strategy& strategy, int batch) {
  Plan plan;
  plan.batch_size = batch;
  const Workload& workload = model.workload();
  plan.choices.reserve(workload.size());
  for (const Operator& op : workload.operators()) {
    const Checkpoint checkpoint = checkpointable(op) ? strategy.checkpoint : Checkpoint::none;
    plan.choices.push_back(OperatorChoice::whole(strategy.mode, checkpoint));
  }
  return plan;
}

StrategyResult schedule_strategy(const CostModel& model, const Strategy& strategy,
                                 std::optional<double> memory_limit_bytes) {
  StrategyResult result{strategy, std::nullopt};
  const double limit_bytes = memory_limit_bytes.value_or(model.memory_limit_bytes());
  const Training& training = model.training();
  if (!strategy_valid(model, strategy_plan(model, strategy, training.min_batch_size))) {
    return result;
  }
  for (int batch = training.min_batch_size; batch <= training.max_batch_size; ++batch) {
    Plan plan = strategy_plan(model, strategy, batch);
    PlanCost cost = model.plan_cost(plan);
    // Memory grows with the batch size: once it no longer fits, no larger one does.
    if (!fits(cost.peak_memory_bytes, limit_bytes)) break;
    if (!result.best ||
        cost.throughput_samples_per_s > result.best->cost.throughput_samples_per_s) {
      result.best = ScheduledPlan{std::move(plan), cost};
    }
  }
  return result;
}

}  // namespace osdp
