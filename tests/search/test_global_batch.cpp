// A fixed global batch: the scheduler chooses the micro-batch b and the accumulation steps m
// with b x m x ranks = global batch. Checked against the brute force over every such b (each
// searched alone with its own m), for the OSDP search and for a strategy baseline.
#include <catch2/catch.hpp>

#include "model/scenario.hpp"
#include "search/exact.hpp"
#include "search/strategies.hpp"

using namespace osdp;

namespace {

Scenario default_with_global_batch(int global_batch) {
  Scenario scenario = load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/default.json");
  scenario.training.global_batch_size = global_batch;
  scenario.training.max_batch_size = 32;
  scenario.search.granularities = {1, 2};  // keeps the brute force below quick
  return scenario;
}

// The best plan at micro-batch b when the accumulation is fixed to m.
std::optional<ScheduledPlan> best_at(const Scenario& scenario, int batch, int steps) {
  Scenario fixed = scenario;
  fixed.training.global_batch_size.reset();
  fixed.training.accumulation_steps = steps;
  const CostModel model = fixed.cost_model();
  return solve_batch(model, fixed.search, batch, model.memory_limit_bytes());
}

}  // namespace

TEST_CASE("a global batch: the scheduler's (b, m) is the best over every b that reaches it",
          "[search][global-batch]") {
  const int global_batch = 128;  // 8 ranks: b = 1, 2, 4, 8, 16 with m = 16 .. 1
  const Scenario scenario = default_with_global_batch(global_batch);
  const CostModel model = scenario.cost_model();
  const SearchResult result = search(model, scenario.search);
  REQUIRE(result.best);
  const Plan& plan = result.best->plan;
  CHECK(plan.batch_size * plan.accumulation_steps * model.ranks() == global_batch);
  CHECK(result.per_batch.size() == 5);

  double brute_force = 0;
  int tried = 0;
  for (int b = 1; b <= 32; ++b) {
    if (global_batch % (b * model.ranks()) != 0) continue;
    ++tried;
    const auto best = best_at(scenario, b, global_batch / (b * model.ranks()));
    if (best) brute_force = std::max(brute_force, best->cost.throughput_samples_per_s);
  }
  CHECK(tried == 5);
  CHECK(result.best->cost.throughput_samples_per_s == Approx(brute_force).epsilon(1e-3));
  // Throughput counts every sample of the global batch.
  CHECK(result.best->cost.throughput_samples_per_s ==
        Approx(global_batch / result.best->cost.iteration_time_s).epsilon(1e-12));
  // The memory is one micro-batch's: the plan fits the limit at its b.
  CHECK(result.best->cost.peak_memory_bytes <= model.memory_limit_bytes());
}

TEST_CASE("a global batch: a strategy baseline takes the best micro-batch that reaches it",
          "[search][global-batch]") {
  const int global_batch = 64;
  const Scenario scenario = default_with_global_batch(global_batch);
  const CostModel model = scenario.cost_model();
  const Strategy fsdp_ckpt = *strategy_from_name("fsdp+ckpt");
  const StrategyResult result = schedule_strategy(model, fsdp_ckpt);
  REQUIRE(result.best);
  const Plan& plan = result.best->plan;
  CHECK(plan.batch_size * plan.accumulation_steps * model.ranks() == global_batch);

  double brute_force = 0;
  CostSettings settings = model.settings();
  settings.finest_split = 1;  // as schedule_strategy evaluates baselines
  for (int b = 1; b <= 8; ++b) {
    if (global_batch % (b * model.ranks()) != 0) continue;
    Training training = scenario.training;
    training.global_batch_size.reset();
    training.accumulation_steps = global_batch / (b * model.ranks());
    const CostModel fixed(*scenario.workload, scenario.cluster, training, settings);
    const PlanCost cost = fixed.plan_cost(strategy_plan(fixed, fsdp_ckpt, b));
    if (cost.peak_memory_bytes <= fixed.memory_limit_bytes()) {
      brute_force = std::max(brute_force, cost.throughput_samples_per_s);
    }
  }
  CHECK(result.best->cost.throughput_samples_per_s == Approx(brute_force).epsilon(1e-12));
}

TEST_CASE("a plan records its accumulation steps and the scenario for it applies them",
          "[search][global-batch]") {
  const Scenario scenario = default_with_global_batch(128);
  const CostModel model = scenario.cost_model();
  const SearchResult result = search(model, scenario.search);
  REQUIRE(result.best);
  const Json document = plan_to_json(result.best->plan, *scenario.workload);
  const Plan read = load_plan(JsonReader(document, "plan.json"), *scenario.workload, model);
  CHECK(read.accumulation_steps == result.best->plan.accumulation_steps);
  CHECK(read.choices == result.best->plan.choices);
  const Scenario planned = scenario.for_plan(read);
  CHECK_FALSE(planned.training.global_batch_size);
  CHECK(planned.training.accumulation_steps == read.accumulation_steps);
  // The plan's figures come back from the scenario for it.
  CHECK(planned.cost_model().plan_cost(read).iteration_time_s ==
        Approx(result.best->cost.iteration_time_s).epsilon(1e-12));
}
