// Faithful baselines of earlier planners, for comparison and benchmarks.
#pragma once

#include <chrono>
#include <optional>

#include "model/cost_model.hpp"
#include "search/exact.hpp"

namespace osdp {

struct BaselineResult {
  std::optional<ScheduledPlan> best;  // least-time plan found at this batch size
  bool timed_out = false;             // the time cap was hit; `best` is the incumbent
  long long nodes = 0;
};

// The paper's depth-first search (OSDP, Algorithm 1) over the operators in execution order with
// its two prunings: a branch whose memory already exceeds the limit, and a branch whose time
// already reaches the best found so far.
BaselineResult paper_dfs(const CostModel& model, const SearchSpec& spec, int batch,
                         double memory_limit_bytes,
                         std::chrono::duration<double> time_cap = std::chrono::seconds(60));

// The reference code's dynamic program: memory rounded to whole MB, budget = device memory -
// 800 MB, minimise time over (operator, MB used).
BaselineResult integer_mb_knapsack(const CostModel& model, const SearchSpec& spec, int batch,
                                   double device_memory_bytes);

}  // namespace osdp
