// FSDP units as a search decision: the candidates are the family search/units_search.hpp names,
// the search over them is the best of each candidate's exact search (so never worse than one
// unit per operator), and the fsdp_block / fsdp_min_params baselines are the plans a search
// restricted to their wrapping and to ZDP finds.
#include <algorithm>
#include <catch2/catch.hpp>

#include "instances.hpp"
#include "model/input_error.hpp"
#include "search/strategies.hpp"
#include "search/units_search.hpp"

namespace osdp::testing {
namespace {

SearchSpec units_spec(SearchSpec::UnitsPolicy units) {
  SearchSpec spec;
  spec.modes = {Mode::dp, Mode::zdp, Mode::z2};
  spec.checkpoint = SearchSpec::CheckpointPolicy::automatic;
  spec.units = units;
  spec.time_limit_s = 1e9;  // properties of finished searches, on any machine
  return spec;
}

double throughput(const SearchResult& result) {
  return result.best ? result.best->cost.throughput_samples_per_s : 0.0;
}

}  // namespace

TEST_CASE("the wrappings the units search tries", "[search][units]") {
  const auto instance = paper_instance(nd_gpt(8), 8 * kGiB, CostModelKind::extended);
  const Workload& gpt = instance->workload;  // 10 blocks: embedding, 8 layers, head
  CHECK(candidate_wrappings(gpt, units_spec(SearchSpec::UnitsPolicy::off)).size() == 1);
  const auto block = candidate_wrappings(gpt, units_spec(SearchSpec::UnitsPolicy::block));
  REQUIRE(block.size() == 1);
  CHECK(block[0].unit_sizes == std::vector<int>{1, 2, 2, 2, 2, 2, 2, 2, 2, 1});
  const auto automatic = candidate_wrappings(gpt, units_spec(SearchSpec::UnitsPolicy::automatic));
  // Per operator, 1, 2, 4 and 8 blocks a unit, and by size; no two alike.
  REQUIRE(automatic.size() >= 5);
  CHECK(automatic[0].rule.kind == WrappingRule::Kind::per_operator);
  for (std::size_t a = 0; a < automatic.size(); ++a) {
    CHECK(valid_unit_sizes(gpt, automatic[a].unit_sizes));
    for (std::size_t b = a + 1; b < automatic.size(); ++b) {
      CHECK(automatic[a].unit_sizes != automatic[b].unit_sizes);
    }
  }
}

TEST_CASE("the units search is the best of its candidates' exact searches", "[search][units]") {
  // A tight limit and a loose one: units cost memory (a larger gather buffer) and save latency.
  for (double limit : {3.0 * kGiB, 12.0 * kGiB}) {
    INFO("limit " << limit / kGiB << " GiB");
    const auto instance = paper_instance(nd_gpt(8), limit, CostModelKind::extended);
    std::vector<WrappingOutcome> outcomes;
    const SearchResult merged =
        search_over_units(instance->model, units_spec(SearchSpec::UnitsPolicy::automatic),
                          std::nullopt, false, &outcomes);
    const SearchResult per_operator =
        search(instance->model, units_spec(SearchSpec::UnitsPolicy::off));
    REQUIRE(per_operator.best);
    REQUIRE(merged.best);
    CHECK(throughput(merged) >= throughput(per_operator));
    double best = 0;
    for (const WrappingOutcome& outcome : outcomes) {
      best = std::max(best, throughput(outcome.result));
      if (!outcome.result.best) continue;
      // Each candidate's plan carries its units and costs what its search said.
      const Plan& plan = outcome.result.best->plan;
      if (outcome.candidate.rule.kind == WrappingRule::Kind::per_operator) {
        CHECK(plan.unit_sizes.empty());
        continue;
      }
      CHECK(plan.unit_sizes == outcome.candidate.unit_sizes);
      const Workload wrapped = wrap_workload(instance->workload, plan.unit_sizes);
      const CostModel model(wrapped, instance->cluster, instance->training,
                            instance->model.settings());
      CHECK(model.plan_cost(plan).iteration_time_s ==
            Approx(outcome.result.best->cost.iteration_time_s).epsilon(1e-9));
    }
    CHECK(throughput(merged) == Approx(best).epsilon(1e-12));
    // search() dispatches on the spec's units.
    CHECK(throughput(search(instance->model, units_spec(SearchSpec::UnitsPolicy::automatic))) ==
          Approx(throughput(merged)).epsilon(1e-12));
  }
}

TEST_CASE("fsdp_block and fsdp_min_params are ZDP plans of their wrapping", "[search][units]") {
  const auto instance = paper_instance(nd_gpt(8), 8 * kGiB, CostModelKind::extended);
  const double min_parameters = 60e6;
  for (const std::string name : {"fsdp_block", "fsdp_min_params"}) {
    INFO(name);
    const auto strategy = strategy_from_name(name, min_parameters);
    REQUIRE(strategy);
    CHECK(strategy->mode == Mode::zdp);
    const StrategyResult result = schedule_strategy(instance->model, *strategy);
    REQUIRE(result.best);
    const std::vector<int> sizes = unit_sizes(instance->workload, strategy->units);
    CHECK(result.best->plan.unit_sizes == sizes);
    CHECK(result.best->plan.choices.size() == sizes.size());
    for (const OperatorChoice& choice : result.best->plan.choices) {
      CHECK(choice == OperatorChoice::whole(Mode::zdp));
    }
    // The exact search over ZDP alone on the same wrapping finds the same plan.
    SearchSpec spec;
    spec.modes = {Mode::zdp};
    spec.time_limit_s = 1e9;
    const Workload wrapped = wrap_workload(instance->workload, sizes);
    const CostModel model(wrapped, instance->cluster, instance->training,
                          instance->model.settings());
    const SearchResult searched = search(model, spec);
    REQUIRE(searched.best);
    CHECK(searched.best->cost.throughput_samples_per_s ==
          Approx(result.best->cost.throughput_samples_per_s).epsilon(1e-4));
    // Its peak at the smallest batch is that plan's.
    CHECK(strategy_peak_bytes(instance->model, *strategy, 1).value() ==
          Approx(model.plan_cost(strategy_plan(instance->model, *strategy, 1)).peak_memory_bytes));
  }
  // fsdp_block: fewer, larger gathers than per-operator FSDP: more memory, less latency.
  const StrategyResult fsdp = schedule_strategy(instance->model, *strategy_from_name("fsdp"));
  const StrategyResult block =
      schedule_strategy(instance->model, *strategy_from_name("fsdp_block"));
  REQUIRE(fsdp.best);
  REQUIRE(block.best);
  const Plan fsdp_at_1 = strategy_plan(instance->model, *strategy_from_name("fsdp"), 1);
  const Plan block_at_1 = strategy_plan(instance->model, *strategy_from_name("fsdp_block"), 1);
  const Workload blocks = wrap_workload(instance->workload, block_at_1.unit_sizes);
  const CostModel block_model(blocks, instance->cluster, instance->training,
                              instance->model.settings());
  const PlanCost per_operator_cost = instance->model.plan_cost(fsdp_at_1);
  const PlanCost block_cost = block_model.plan_cost(block_at_1);
  CHECK(block_cost.peak_memory_bytes >= per_operator_cost.peak_memory_bytes);
  CHECK(block_cost.communication_s < per_operator_cost.communication_s);
  CHECK(block_cost.compute_s == Approx(per_operator_cost.compute_s).epsilon(1e-9));
  // The unwrapped model refuses a plan of units instead of misreading it.
  CHECK_THROWS_AS(instance->model.plan_cost(block_at_1), InputError);
}

}  // namespace osdp::testing
