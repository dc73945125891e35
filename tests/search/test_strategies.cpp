// Strategy baselines (DDP, FSDP, ZeRO-2, each with and without checkpointing): their plans are
// what they claim, their scheduler keeps the best batch size, and the OSDP search is never worse.
#include <algorithm>
#include <catch2/catch.hpp>

#include "instances.hpp"
#include "search/exact.hpp"
#include "search/strategies.hpp"

namespace osdp::testing {
namespace {

bool spec_allows(const SearchSpec& spec, const Strategy& strategy) {
  const bool mode =
      std::find(spec.modes.begin(), spec.modes.end(), strategy.mode) != spec.modes.end();
  const bool checkpoint = strategy.checkpoint == Checkpoint::none
                              ? spec.checkpoint != SearchSpec::CheckpointPolicy::on
                              : spec.checkpoint != SearchSpec::CheckpointPolicy::off;
  // A search of one unit per operator holds no wrapped strategy (fsdp_block, fsdp_min_params).
  const bool units = strategy.units.kind == WrappingRule::Kind::per_operator ||
                     spec.units != SearchSpec::UnitsPolicy::off;
  // Offloaded strategies only where the search may offload; under --offload on, the search
  // offloads every mode that can.
  const bool offload = strategy.offload ? spec.offload != SearchSpec::OffloadPolicy::off
                                        : spec.offload != SearchSpec::OffloadPolicy::on ||
                                              !describe_mode(strategy.mode).offload;
  return mode && checkpoint && units && offload;
}

// Throughput of OSDP against every strategy its spec allows.
void check_never_worse(const Instance& instance, const SearchSpec& given, int& compared) {
  SearchSpec spec = given;
  spec.time_limit_s = 1e9;  // the property is about finished searches, on any machine
  const SearchResult osdp = search(instance.model, spec);
  for (const Strategy& strategy : standard_strategies()) {
    if (!spec_allows(spec, strategy)) continue;
    INFO("strategy " << strategy.name);
    const StrategyResult baseline = schedule_strategy(instance.model, strategy);
    if (!baseline.best) continue;
    REQUIRE(osdp.best);
    // The search stops within its optimality gap of the optimum, which a strategy's plan is not
    // better than.
    CHECK(osdp.best->cost.throughput_samples_per_s >=
          baseline.best->cost.throughput_samples_per_s * (1 - spec.optimality_gap - 1e-9));
    ++compared;
  }
}

}  // namespace

TEST_CASE("standard strategies and their names", "[search][strategies]") {
  const auto strategies = standard_strategies();
  std::vector<std::string> names;
  for (const auto& strategy : strategies) names.push_back(strategy.name);
  CHECK(names == std::vector<std::string>{"ddp", "fsdp", "zero2", "ddp+ckpt", "fsdp+ckpt",
                                          "zero2+ckpt", "fsdp+ckpt-fairscale", "zero1",
                                          "zero1+ckpt", "fsdp_block", "fsdp_block+ckpt",
                                          "zero2_block", "zero2_block+ckpt", "fsdp_min_params",
                                          "fsdp_offload", "zero2_offload"});
  for (const auto& strategy : strategies) {
    const auto parsed = strategy_from_name(strategy.name);
    REQUIRE(parsed);
    CHECK(parsed->mode == strategy.mode);
    CHECK(parsed->checkpoint == strategy.checkpoint);
  }
  CHECK(strategy_from_name("fsdp")->mode == Mode::zdp);
  CHECK(strategy_from_name("zero2")->mode == Mode::z2);
  CHECK(strategy_from_name("fsdp+ckpt")->checkpoint == Checkpoint::fused);
  // PyTorch FSDP(checkpoint(op)) is fused; FairScale's checkpoint_wrapper(FSDP(op)) re-gathers.
  CHECK(strategy_from_name("fsdp+ckpt-pytorch")->name == "fsdp+ckpt");
  CHECK(strategy_from_name("fsdp+ckpt-fairscale")->mode == Mode::zdp);
  CHECK(strategy_from_name("fsdp+ckpt-fairscale")->checkpoint == Checkpoint::unfused);
  CHECK(strategy_names().find("fsdp+ckpt-fairscale") != std::string::npos);
  for (const auto& strategy : strategies) CHECK_FALSE(strategy.description.empty());
  CHECK(strategy_from_name("ddp+ckpt")->checkpoint != Checkpoint::none);
  CHECK_FALSE(strategy_from_name("zero3"));
  CHECK_FALSE(strategy_from_name(""));
}

TEST_CASE("strategy plans are what they claim", "[search][strategies]") {
  auto instance = random_instance(11, 30, option_kinds()[0], CostModelKind::extended, 2);
  bool some_uncheckpointable = false;
  for (const Strategy& strategy : standard_strategies()) {
    INFO("strategy " << strategy.name);
    const Plan plan = strategy_plan(instance->model, strategy, 3);
    CHECK(plan.batch_size == 3);
    // A wrapped strategy's plan has a choice per unit (test_units_search.cpp covers the units).
    const Workload workload = strategy.units.kind == WrappingRule::Kind::per_operator
                                  ? instance->workload
                                  : wrap_workload(instance->workload, plan.unit_sizes);
    const CostModel model(workload, instance->cluster, instance->training,
                          instance->model.settings());
    REQUIRE(plan.choices.size() == workload.operators().size());
    for (int op = 0; op < workload.size(); ++op) {
      const OperatorChoice& choice = plan.choices[op];
      const bool checkpointable = workload.op(op).input_activation_bytes_per_sample.has_value();
      some_uncheckpointable = some_uncheckpointable || !checkpointable;
      CHECK(choice.mode == strategy.mode);
      CHECK(choice.slices == 1);
      CHECK(choice.sharded_slices == (strategy.mode == Mode::dp ? 0 : 1));
      CHECK(choice.checkpoint == (checkpointable ? strategy.checkpoint : Checkpoint::none));
      CHECK(model.valid(op, choice));
    }
  }
  CHECK(some_uncheckpointable);
}

TEST_CASE("FairScale's checkpointed FSDP gathers once more than PyTorch's",
          "[search][strategies]") {
  auto instance = paper_instance(nd_gpt(48), 8 * kGiB, CostModelKind::extended);
  const CostModel& model = instance->model;
  const Plan pytorch = strategy_plan(model, *strategy_from_name("fsdp+ckpt"), 4);
  const Plan fairscale = strategy_plan(model, *strategy_from_name("fsdp+ckpt-fairscale"), 4);
  const PlanCost fused = model.plan_cost(pytorch);
  const PlanCost unfused = model.plan_cost(fairscale);
  // One more all-gather of every operator's parameters per iteration.
  double gathers_s = 0;
  for (int op = 0; op < instance->workload.size(); ++op) {
    gathers_s += instance->cluster.world.time_s(CollectiveKind::all_gather,
                                                instance->workload.op(op).parameter_bytes,
                                                instance->cluster.ranks);
  }
  CHECK(unfused.communication_s - fused.communication_s == Approx(gathers_s).epsilon(1e-9));
  // Same states and saved inputs; the fused recompute holds its gather through the backward,
  // so its peak is no lower.
  CHECK(unfused.peak.model_state_bytes == Approx(fused.peak.model_state_bytes));
  CHECK(unfused.peak.activation_bytes == Approx(fused.peak.activation_bytes));
  CHECK(unfused.peak_memory_bytes <= fused.peak_memory_bytes * (1 + 1e-12));
  CHECK(unfused.throughput_samples_per_s < fused.throughput_samples_per_s);
}

TEST_CASE("strategy scheduler keeps the highest-throughput batch size", "[search][strategies]") {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto instance = random_instance(seed, 40, option_kinds()[1], CostModelKind::extended, 6);
    const double limit = *instance->training.memory_limit_bytes;
    for (const Strategy& strategy : standard_strategies()) {
      INFO("seed " << seed << ", strategy " << strategy.name);
      // Every batch size in the range, independently of the scheduler's early stop.
      std::optional<PlanCost> expected;
      // A wrapped strategy's plans are costed on the model of its units.
      const std::vector<int> sizes = unit_sizes(instance->workload, strategy.units);
      const Workload wrapped = wrap_workload(instance->workload, sizes);
      CostSettings whole = instance->model.settings();
      whole.finest_split = 1;
      const CostModel model(
          strategy.units.kind == WrappingRule::Kind::per_operator ? instance->workload : wrapped,
          instance->cluster, instance->training, whole);
      for (int b = instance->training.min_batch_size; b <= instance->training.max_batch_size; ++b) {
        const PlanCost cost = model.plan_cost(strategy_plan(instance->model, strategy, b));
        if (!fits(cost.peak_memory_bytes, limit)) continue;
        if (!expected || cost.throughput_samples_per_s > expected->throughput_samples_per_s) {
          expected = cost;
        }
      }
      const StrategyResult result = schedule_strategy(instance->model, strategy);
      CHECK(result.strategy.name == strategy.name);
      REQUIRE(result.best.has_value() == expected.has_value());
      if (!expected) continue;
      CHECK(result.best->plan.batch_size == expected->batch_size);
      CHECK(result.best->cost.throughput_samples_per_s ==
            Approx(expected->throughput_samples_per_s));
      CHECK(fits(result.best->cost.peak_memory_bytes, limit));
    }
  }
}

TEST_CASE("strategy scheduler honours an explicit memory limit", "[search][strategies]") {
  auto instance = paper_instance(nd_gpt(48), 8 * kGiB, CostModelKind::extended);
  const Strategy ddp = *strategy_from_name("ddp");
  const Strategy fsdp = *strategy_from_name("fsdp+ckpt");
  // 48 layers of hidden 1536 in fp32 + Adam: ~22 GiB of model states, so DDP is OOM at 8 GiB.
  CHECK_FALSE(schedule_strategy(instance->model, ddp).best);
  const auto fsdp_8 = schedule_strategy(instance->model, fsdp);
  REQUIRE(fsdp_8.best);
  CHECK(fsdp_8.best->cost.peak_memory_bytes <= 8 * kGiB);
  const auto fsdp_16 = schedule_strategy(instance->model, fsdp, 16 * kGiB);
  REQUIRE(fsdp_16.best);
  CHECK(fsdp_16.best->plan.batch_size > fsdp_8.best->plan.batch_size);
  CHECK(fsdp_16.best->cost.peak_memory_bytes > 8 * kGiB);
  CHECK(fsdp_16.best->cost.peak_memory_bytes <= 16 * kGiB);
  CHECK_FALSE(schedule_strategy(instance->model, fsdp, 1 * kGiB).best);
}

TEST_CASE("strategies on a one-rank cluster", "[search][strategies]") {
  Random random(3);
  Cluster cluster = random_cluster(random, 1);
  Training training;
  training.memory_limit_bytes = 64 * kGiB;
  training.max_batch_size = 8;
  Instance instance(Workload::chain("one", random_operators(random, 12)), cluster, training,
                    CostModelKind::extended);
  const auto ddp = schedule_strategy(instance.model, *strategy_from_name("ddp"));
  REQUIRE(ddp.best);
  for (const Strategy& strategy : standard_strategies()) {
    INFO("strategy " << strategy.name);
    const StrategyResult result = schedule_strategy(instance.model, strategy);
    REQUIRE(result.best);
    // Nothing to communicate with one rank but an offload's copies to and from the host.
    CHECK(result.best->cost.communication_s == result.best->cost.host_copy_s);
    CHECK((result.best->cost.host_copy_s > 0) == strategy.offload);
  }
}

TEST_CASE("OSDP is never worse than a strategy on the paper's scenarios", "[search][strategies]") {
  using Policy = SearchSpec::CheckpointPolicy;
  const std::vector<std::pair<std::string, SearchSpec>> specs{
      {"paper", {{Mode::dp, Mode::zdp}, {1}, Policy::off}},
      {"full", {{Mode::dp, Mode::zdp, Mode::z2}, {1, 4}, Policy::automatic}},
  };
  int compared = 0;
  for (const GptSpec& gpt : {nd_gpt(48), ws_gpt(4), ic_gpt()}) {
    for (double limit : {8 * kGiB, 16 * kGiB}) {
      for (CostModelKind cost : {CostModelKind::paper, CostModelKind::extended}) {
        auto instance = paper_instance(gpt, limit, cost);
        for (const auto& [name, spec] : specs) {
          INFO(gpt.name << " " << gpt.layers << " layers, " << limit / kGiB << " GiB, "
                        << cost_model_name(cost) << ", spec " << name);
          check_never_worse(*instance, spec, compared);
        }
      }
    }
  }
  CHECK(compared >= 20);
}

TEST_CASE("OSDP is never worse than a strategy on random instances", "[search][strategies]") {
  int compared = 0;
  for (const OptionKind& kind : option_kinds()) {
    for (CostModelKind cost : {CostModelKind::paper, CostModelKind::extended}) {
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        auto instance = random_instance(seed * 31 + 5, 25, kind, cost, 4);
        INFO("kind " << kind.name << ", cost " << cost_model_name(cost) << ", seed " << seed);
        check_never_worse(*instance, kind.spec, compared);
      }
    }
  }
  CHECK(compared >= 30);
}

}  // namespace osdp::testing
