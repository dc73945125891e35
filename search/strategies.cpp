#include "search/strategies.hpp"

#include "search/options.hpp"

namespace osdp {

std::vector<Strategy> standard_strategies() {
  // Without a recompute gather (DP, Z2) fused and unfused checkpointing cost the same; the
  // plain form is used.
  return {
      {"ddp", Mode::dp, Checkpoint::none,
       "PyTorch DDP: parameters replicated, gradients all-reduced"},
      {"fsdp", Mode::zdp, Checkpoint::none,
       "FSDP FULL_SHARD (ZeRO-3): all-gather before forward and backward, reduce-scatter"},
      {"zero2", Mode::z2, Checkpoint::none,
       "FSDP SHARD_GRAD_OP (ZeRO-2): parameters gathered once, kept from forward to backward"},
      {"ddp+ckpt", Mode::dp, Checkpoint::unfused, "DDP with activation checkpointing"},
      {"fsdp+ckpt", Mode::zdp, Checkpoint::fused,
       "PyTorch FSDP(checkpoint(op)): the recompute uses the backward's gather (2 all-gathers)"},
      {"zero2+ckpt", Mode::z2, Checkpoint::unfused, "ZeRO-2 with activation checkpointing"},
      {"fsdp+ckpt-fairscale", Mode::zdp, Checkpoint::unfused,
       "FairScale checkpoint_wrapper(FSDP(op)): the recompute gathers again (3 all-gathers); "
       "what the OSDP paper measured"},
      {"zero1", Mode::z1, Checkpoint::none,
       "DeepSpeed ZeRO-1: optimizer states sharded; reduce-scatter, all-gather after the step"},
      {"zero1+ckpt", Mode::z1, Checkpoint::unfused, "ZeRO-1 with activation checkpointing"},
  };
}

std::optional<Strategy> strategy_from_name(const std::string& name) {
  const std::string wanted = name == "fsdp+ckpt-pytorch" ? "fsdp+ckpt" : name;
  for (const Strategy& strategy : standard_strategies()) {
    if (strategy.name == wanted) return strategy;
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

StrategyResult schedule_strategy(const CostModel& search_model, const Strategy& strategy,
                                 std::optional<double> memory_limit_bytes) {
  StrategyResult result{strategy, std::nullopt};
  // A strategy splits no operator: its neighbours' slices are whole (CostSettings).
  CostSettings settings = search_model.settings();
  settings.finest_split = 1;
  const CostModel model(search_model.workload(), search_model.cluster(), search_model.training(),
                        settings);
  const double limit_bytes = memory_limit_bytes.value_or(model.memory_limit_bytes());
  const Training& training = model.training();
  if (!strategy_valid(model, strategy_plan(model, strategy, training.min_batch_size))) {
    return result;
  }
  for (int batch = training.min_batch_size; batch <= training.max_batch_size; ++batch) {
    // A fixed global batch: only the micro-batches that reach it, each evaluated with its own
    // steps (a model of its own); otherwise the one model serves every batch size.
    Training micro_training = training;  // outlives `micro`, which refers to it
    std::optional<CostModel> micro;
    if (training.global_batch_size) {
      const std::optional<int> steps = training.accumulation_for(batch, model.ranks());
      if (!steps) continue;
      micro_training.accumulation_steps = *steps;
      micro.emplace(model.workload(), model.cluster(), micro_training, settings);
    }
    const CostModel& batch_model = micro ? *micro : model;
    Plan plan = strategy_plan(batch_model, strategy, batch);
    if (micro) plan.accumulation_steps = micro_training.accumulation_steps;
    PlanCost cost = batch_model.plan_cost(plan);
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
