// The exact plan search: for one batch size, the plan of least iteration time whose peak memory
// (sum of persistent terms plus the largest transient term) fits the limit; and the batch-size
// scheduler that tries b = min..max and keeps the plan of highest throughput.
//
// Method: a multiple-choice knapsack solved by branch and bound over operators grouped into
// equivalence classes (identical operators: only counts matter), with Lagrangian / LP bounds
// from each class's lower convex hull; the max-term of peak memory is handled exactly by
// enumerating its value (each candidate threshold restricts options and lowers the budget).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/scenario.hpp"
#include "search/options.hpp"

namespace osdp {

struct SolveStats {
  long long nodes = 0;         // branch-and-bound nodes visited
  long long thresholds = 0;    // max-term thresholds solved (not pruned by bound)
  bool stopped_early = false;  // the spec's time limit ran out before the search finished
};

// A plan and its cost at one batch size.
struct ScheduledPlan {
  Plan plan;
  PlanCost cost;
};

// Least-time plan for batch size `batch` under `memory_limit_bytes` (to within the spec's
// optimality gap, unless its time limit runs out: see stats->stopped_early); nullopt if none
// fits.
std::optional<ScheduledPlan> solve_batch(const CostModel& model, const SearchSpec& spec, int batch,
                                         double memory_limit_bytes, SolveStats* stats = nullptr);

struct BatchPoint {
  int batch_size = 0;
  std::optional<ScheduledPlan> best;  // nullopt: nothing fits, or pruned
  // Not solved: even the fastest plan at this b could not beat the best throughput found.
  bool pruned_by_bound = false;
  // The time limit ran out before this b was searched to the end (`best`: the best found).
  bool stopped_early = false;
};

struct SearchResult {
  std::optional<ScheduledPlan> best;  // highest throughput over all batch sizes
  std::vector<BatchPoint> per_batch;  // every b tried, in order
  // When nothing fits: the least peak memory any plan needs at the smallest batch size.
  double min_memory_needed_bytes = 0;
  SolveStats stats;
  // Proven relative distance of `best`'s throughput from the optimum: at most the spec's
  // optimality gap when the search finished, larger when the time limit stopped it (1 when it
  // stopped before finding any plan).
  double proven_gap = 0;
  // Set when the best plan offloaded more than the host's memory holds: the search does not
  // trade host memory against time, so it fell back to no offload and says so here.
  std::string host_memory_note;
};

// The batch-size scheduler over b = training.min_batch_size .. max_batch_size (those at which a
// plan fits); returns the (plan, b) of highest throughput, the smallest b on a tie. It solves the
// largest b first, so that the best throughput found prunes the smaller ones.
// With `solve_every_batch`, no batch size is skipped by the throughput bound, so per_batch holds
// the best plan of every b that fits (candidates for re-ranking by simulation).
// With spec.units other than off the model's wrapping into FSDP units is searched too
// (search/units_search.hpp): the plans then carry their unit sizes.
SearchResult search(const CostModel& model, const SearchSpec& spec,
                    std::optional<double> memory_limit_bytes = std::nullopt,
                    bool solve_every_batch = false);

// The K best plans of a search by analytic throughput, one per batch size, best first.
std::vector<ScheduledPlan> top_plans(const SearchResult& result, int count);

// Least peak memory of any plan at this batch size (ignoring time).
double min_peak_memory_bytes(const CostModel& model, const SearchSpec& spec, int batch);

}  // namespace osdp
