#include "search/strategies.hpp"

#include <optional>

#include "search/options.hpp"

namespace osdp {

std::vector<Strategy> standard_strategies(double min_unit_parameters) {
  const WrappingRule per_block{WrappingRule::Kind::per_block};
  const WrappingRule by_size{WrappingRule::Kind::min_parameters, 1, min_unit_parameters};
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
      {"fsdp_block", Mode::zdp, Checkpoint::none,
       "FSDP FULL_SHARD wrapped per transformer block (transformer_auto_wrap_policy): one "
       "all-gather and one reduce-scatter per block",
       per_block},
      {"fsdp_block+ckpt", Mode::zdp, Checkpoint::fused,
       "FSDP FULL_SHARD per transformer block, each unit checkpointed inside FSDP (the recompute "
       "uses the backward's gather): what MPT and torchtitan run",
       per_block},
      {"zero2_block", Mode::z2, Checkpoint::none,
       "FSDP SHARD_GRAD_OP per transformer block: a block's parameters gathered once, kept from "
       "forward to backward",
       per_block},
      {"zero2_block+ckpt", Mode::z2, Checkpoint::unfused,
       "FSDP SHARD_GRAD_OP per transformer block with each block checkpointed", per_block},
      {"fsdp_min_params", Mode::zdp, Checkpoint::none,
       "FSDP FULL_SHARD wrapped by size (size_based_auto_wrap_policy, " + by_size.describe() + ")",
       by_size},
      {"fsdp_offload",
       Mode::zdp,
       Checkpoint::none,
       "PyTorch FSDP FULL_SHARD with CPUOffload(offload_params=True): parameter, gradient and "
       "optimizer-state shards in host memory, copied in before each gather, the step on the CPU",
       {},
       true},
      {"zero2_offload",
       Mode::z2,
       Checkpoint::none,
       "DeepSpeed ZeRO-Offload on ZeRO-2: gradient shards to the host, the optimizer states and "
       "step on the CPU, updated parameter shards back",
       {},
       true},
  };
}

std::optional<Strategy> strategy_from_name(const std::string& name, double min_unit_parameters) {
  const std::string wanted = name == "fsdp+ckpt-pytorch" ? "fsdp+ckpt" : name;
  for (const Strategy& strategy : standard_strategies(min_unit_parameters)) {
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

// The cost model a strategy is scored with: its units wrapped, no split neighbours.
struct StrategyModel {
  std::vector<int> unit_sizes;  // empty: one unit per operator
  std::optional<Workload> wrapped;
  CostModel model;

  StrategyModel(const CostModel& search_model, const Strategy& strategy)
      : unit_sizes(strategy.units.kind == WrappingRule::Kind::per_operator
                       ? std::vector<int>{}
                       : osdp::unit_sizes(search_model.workload(), strategy.units)),
        wrapped(unit_sizes.empty()
                    ? std::nullopt
                    : std::optional<Workload>(wrap_workload(search_model.workload(), unit_sizes))),
        model(wrapped ? *wrapped : search_model.workload(), search_model.cluster(),
              search_model.training(), whole_neighbours(search_model.settings())) {}
  StrategyModel(const StrategyModel&) = delete;  // `model` refers to `wrapped`

  // A strategy splits no operator: its neighbours' slices are whole (CostSettings).
  static CostSettings whole_neighbours(CostSettings settings) {
    settings.finest_split = 1;
    return settings;
  }
};

// The strategy's plan on its (wrapped) model, recording the unit sizes.
Plan plan_on(const StrategyModel& strategy_model, const Strategy& strategy, int batch);

}  // namespace

std::optional<double> strategy_peak_bytes(const CostModel& model, const Strategy& strategy,
                                          int batch) {
  const StrategyModel strategy_model(model, strategy);
  const Plan plan = plan_on(strategy_model, strategy, batch);
  if (!strategy_valid(strategy_model.model, plan)) return std::nullopt;
  return strategy_model.model.plan_cost(plan).peak_memory_bytes;
}

Plan strategy_plan(const CostModel& model, const Strategy& strategy, int batch) {
  return plan_on(StrategyModel(model, strategy), strategy, batch);
}

namespace {

Plan plan_on(const StrategyModel& strategy_model, const Strategy& strategy, int batch) {
  const CostModel& model = strategy_model.model;
  Plan plan;
  plan.unit_sizes = strategy_model.unit_sizes;
  plan.batch_size = batch;
  const Workload& workload = model.workload();
  plan.choices.reserve(workload.size());
  for (const Operator& op : workload.operators()) {
    const Checkpoint checkpoint = checkpointable(op) ? strategy.checkpoint : Checkpoint::none;
    plan.choices.push_back(OperatorChoice::whole(strategy.mode, checkpoint, strategy.offload));
  }
  return plan;
}

}  // namespace

StrategyResult schedule_strategy(const CostModel& search_model, const Strategy& strategy,
                                 std::optional<double> memory_limit_bytes) {
  StrategyResult result{strategy, std::nullopt};
  const StrategyModel strategy_model(search_model, strategy);
  const CostModel& model = strategy_model.model;
  const CostSettings& settings = model.settings();
  const double limit_bytes = memory_limit_bytes.value_or(model.memory_limit_bytes());
  const Training& training = model.training();
  const Plan smallest = plan_on(strategy_model, strategy, training.min_batch_size);
  if (!strategy_valid(model, smallest)) return result;
  // Offloaded states do not grow with the batch: a host too small for them fits no batch size.
  if (!model.host_memory_fits(model.plan_cost(smallest).host_memory_bytes)) return result;
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
    Plan plan = plan_on(strategy_model, strategy, batch);
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
