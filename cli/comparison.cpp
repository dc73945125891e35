#include "cli/comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "model/input_error.hpp"
#include "model/units.hpp"
#include "search/split_cuts.hpp"

namespace osdp::cli {

bool strategy_in_search_space(const Strategy& strategy, const SearchSpec& spec) {
  const bool mode_allowed =
      std::find(spec.modes.begin(), spec.modes.end(), strategy.mode) != spec.modes.end();
  const bool checkpoint_allowed = strategy.checkpoint == Checkpoint::none
                                      ? spec.checkpoint != SearchSpec::CheckpointPolicy::on
                                      : spec.checkpoint != SearchSpec::CheckpointPolicy::off;
  // The wrappings the search tries (search/units_search.hpp).
  bool units_allowed = false;
  switch (strategy.units.kind) {
    case WrappingRule::Kind::per_operator:
      units_allowed = spec.units != SearchSpec::UnitsPolicy::block;
      break;
    case WrappingRule::Kind::per_block:
      units_allowed =
          strategy.units.blocks_per_unit == 1 && spec.units != SearchSpec::UnitsPolicy::off;
      break;
    case WrappingRule::Kind::min_parameters:
      units_allowed = spec.units == SearchSpec::UnitsPolicy::automatic &&
                      strategy.units.min_parameters == spec.min_unit_parameters;
      break;
  }
  const bool offload_allowed = strategy.offload ? spec.offload != SearchSpec::OffloadPolicy::off
                                                : spec.offload != SearchSpec::OffloadPolicy::on ||
                                                      !describe_mode(strategy.mode).offload;
  return mode_allowed && checkpoint_allowed && units_allowed && offload_allowed;
}

Comparison compare_with_baselines(const CostModel& model, const SearchSpec& spec,
                                  double memory_limit_bytes) {
  Comparison comparison;
  comparison.memory_limit_bytes = memory_limit_bytes;
  const auto start = std::chrono::steady_clock::now();
  SplitCutResult searched = search_split_cuts(model, spec, memory_limit_bytes);
  comparison.osdp = std::move(searched.result);
  if (searched.taken_from_split > 0) {
    comparison.osdp_taken_from =
        fmt::format("the search with slices of at most {}", searched.taken_from_split);
  }
  comparison.search_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int min_batch = model.training().min_batch_size;
  for (const Strategy& strategy : standard_strategies(spec.min_unit_parameters)) {
    BaselineOutcome outcome;
    outcome.strategy = strategy;
    outcome.best = schedule_strategy(model, strategy, memory_limit_bytes).best;
    outcome.in_search_space = strategy_in_search_space(strategy, spec);
    outcome.min_batch_peak_bytes = strategy_peak_bytes(model, strategy, min_batch).value_or(0.0);
    comparison.baselines.push_back(std::move(outcome));
  }
  // The search scores each operator's exposed gathers with its neighbours split as finely as
  // the options allow (CostSettings::finest_split: the time must stay a sum over operators),
  // which over-counts them for a plan that splits nothing; a strategy is scored with its true,
  // whole neighbours. Where a strategy the options allow then scores better, it is OSDP's plan:
  // OSDP is never slower than a plan it could have chosen.
  for (const BaselineOutcome& outcome : comparison.baselines) {
    if (!outcome.in_search_space || !outcome.best) continue;
    if (!comparison.osdp.best || outcome.best->cost.throughput_samples_per_s >
                                     comparison.osdp.best->cost.throughput_samples_per_s) {
      comparison.osdp.best = outcome.best;
      comparison.osdp_taken_from = outcome.strategy.name;
    }
  }
  return comparison;
}

void require_search_answer(const SearchResult& result, const Scenario& scenario) {
  const double needed = result.min_memory_needed_bytes;
  if (result.best || (std::isfinite(needed) && needed > 0.0)) return;
  throw InputError(scenario.file, "$.search.time_limit (or --time-limit)",
                   units::format_seconds(scenario.search.time_limit_s),
                   "a time limit long enough for the search to find a first plan (it stopped "
                   "before any; the default is 10 s)");
}

std::optional<PlanCost> least_memory_plan_cost(const CostModel& model, const SearchSpec& spec,
                                               double min_memory_needed_bytes) {
  if (min_memory_needed_bytes <= 0) return std::nullopt;
  const auto plan =
      solve_batch(model, spec, model.training().min_batch_size, min_memory_needed_bytes);
  if (!plan) return std::nullopt;
  return plan->cost;
}

}  // namespace osdp::cli
