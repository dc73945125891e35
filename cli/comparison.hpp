// OSDP's search against the strategy baselines (DDP, FSDP, ZeRO-2, each with and without
// checkpointing), all evaluated by the same cost model at one memory limit. Shared by `plan`
// and `sweep`.
#pragma once

#include <optional>
#include <vector>

#include "model/scenario.hpp"
#include "search/exact.hpp"
#include "search/strategies.hpp"

namespace osdp::cli {

struct BaselineOutcome {
  Strategy strategy;
  std::optional<ScheduledPlan> best;  // nullopt: out of memory at every batch size
  // Peak memory of the strategy at the smallest batch size: what it would need.
  double min_batch_peak_bytes = 0;
  // Whether the search space contains the strategy's plans (then OSDP is never worse).
  bool in_search_space = false;
};

struct Comparison {
  double memory_limit_bytes = 0;
  SearchResult osdp;
  double search_time_s = 0;  // wall-clock time of the OSDP search over all batch sizes
  std::vector<BaselineOutcome> baselines;
  // The strategy whose plan OSDP took, when one the search options allow scored better than
  // the search's own best ("" otherwise); see compare_with_baselines.
  std::string osdp_taken_from;
};

bool strategy_in_search_space(const Strategy& strategy, const SearchSpec& spec);

Comparison compare_with_baselines(const CostModel& model, const SearchSpec& spec,
                                  double memory_limit_bytes);

// A search without a plan must have a finite, positive least memory need (then nothing fits:
// exit 3). One that stopped at its time limit before any plan did not answer: InputError naming
// the time limit of `scenario` (exit 2), never "nothing fits ... 0 B".
void require_search_answer(const SearchResult& result, const Scenario& scenario);

// The peak-memory breakdown of a plan that needs the least memory at the smallest batch size
// (for "nothing fits" messages); nullopt if the solver cannot reproduce it.
std::optional<PlanCost> least_memory_plan_cost(const CostModel& model, const SearchSpec& spec,
                                               double min_memory_needed_bytes);

}  // namespace osdp::cli
