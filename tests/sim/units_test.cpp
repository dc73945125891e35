// FSDP units in the simulator: a unit runs one all-gather before its forward, one before its
// backward and one reduce-scatter after it, whatever its size (so the collectives a plan issues
// are proportional to its units), and the cost model's figures for a wrapped plan agree with
// its simulation as for any plan (peak 3 %, time 5 %).
#include <catch2/catch.hpp>

#include "model/scenario.hpp"
#include "model/wrapping.hpp"
#include "search/exact.hpp"
#include "search/strategies.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;

namespace {

Scenario gpt_on_titans(int layers) {
  const Json document = {{"name", "units"},
                         {"model",
                          {{"family", "gpt"},
                           {"layers", layers},
                           {"hidden", 1024},
                           {"heads", 16},
                           {"sequence_length", 256},
                           {"vocabulary", 16384}}},
                         {"cluster", "clusters/titan-rtx-8x-pcie3.json"},
                         {"training",
                          {{"precision", "fp32"},
                           {"optimizer", "adam"},
                           {"memory_limit", "8GiB"},
                           {"max_batch_size", 16}}},
                         {"cost_model", "extended"},
                         {"search",
                          {{"modes", {"dp", "zdp", "z2"}},
                           {"checkpoint", "auto"},
                           {"units", "auto"},
                           {"min_unit_parameters", 3e7}}}};
  return scenario_from_json(document, std::string(OSDP_SOURCE_DIR) + "/scenarios/units.json");
}

}  // namespace

TEST_CASE("a unit issues its collectives once, whatever its size", "[sim][units]") {
  const int layers = 6;
  const Scenario scenario = gpt_on_titans(layers);
  const CostModel model = scenario.cost_model();
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  const Plan per_operator = strategy_plan(model, *strategy_from_name("fsdp"), 2);
  const Plan per_block = strategy_plan(model, *strategy_from_name("fsdp_block"), 2);
  REQUIRE(per_block.unit_sizes.size() == static_cast<std::size_t>(layers + 2));
  const SimulationResult operators = simulate_plan(scenario, per_operator, options);
  const SimulationResult blocks = simulate_plan(scenario, per_block, options);
  // Three collectives per unit (gather for forward and for backward, reduce-scatter).
  CHECK(operators.collectives * (layers + 2) == blocks.collectives * (2 * layers + 2));
  // The same kernels; the simulator's launch gap is per compute item, of which a unit is one.
  CHECK(blocks.compute_s <= operators.compute_s);
  CHECK(blocks.compute_s == Approx(operators.compute_s).epsilon(0.01));
  // The same bytes in fewer collectives; the block's gather buffer is larger.
  CHECK(blocks.peak_memory_bytes > operators.peak_memory_bytes);
}

TEST_CASE("a plan of units: analytic figures agree with its simulation", "[sim][units]") {
  const Scenario scenario = gpt_on_titans(6);
  const CostModel model = scenario.cost_model();
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  std::vector<std::pair<std::string, ScheduledPlan>> plans;
  for (const std::string name : {"fsdp_block", "fsdp_min_params"}) {
    const StrategyResult result =
        schedule_strategy(model, *strategy_from_name(name, scenario.search.min_unit_parameters));
    REQUIRE(result.best);
    plans.emplace_back(name, *result.best);
  }
  const SearchResult searched = search(model, scenario.search);
  REQUIRE(searched.best);
  plans.emplace_back("osdp --units auto", *searched.best);
  for (const auto& [name, plan] : plans) {
    INFO(name << ": " << describe_units(plan.plan.unit_sizes));
    const SimulationResult simulated = simulate_plan(scenario, plan.plan, options);
    INFO("analytic " << plan.cost.iteration_time_s << " s, " << plan.cost.peak_memory_bytes
                     << " B; simulated " << simulated.iteration_time_s << " s, "
                     << simulated.peak_memory_bytes << " B");
    CHECK(std::abs(plan.cost.peak_memory_bytes / simulated.peak_memory_bytes - 1.0) <= 0.03);
    CHECK(std::abs(plan.cost.iteration_time_s / simulated.iteration_time_s - 1.0) <= 0.05);
  }
}
