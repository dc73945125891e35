// `osdp plan --evaluate sim`: the simulator is the referee (contention, the real schedule), so
// the K best analytic plans (one per batch size) and the strategy baselines are re-ranked by
// simulated throughput. Both figures are reported side by side.
#pragma once

#include <string>
#include <vector>

#include "cli/comparison.hpp"
#include "model/scenario.hpp"

namespace osdp::cli {

struct EvaluatedCandidate {
  std::string name;  // "osdp #1 (b=42)", "fsdp+ckpt"
  ScheduledPlan analytic;
  double simulated_iteration_time_s = 0;
  double simulated_throughput_samples_per_s = 0;
  double simulated_peak_memory_bytes = 0;
  double simulated_exposed_comm_s = 0;
  bool fits = true;  // simulated peak within the memory limit
  // The search options allow it (every OSDP plan; a baseline whose modes and checkpointing they
  // allow). Only these can be chosen; the others are shown for comparison.
  bool in_search_space = true;
};

struct SimulatedRanking {
  std::vector<EvaluatedCandidate> candidates;  // best simulated throughput first
  // Index of the best candidate within the search space that fits in simulation; -1 if none.
  int chosen = -1;
  // The best candidate outside the search space that fits, when it beats `chosen` (or there is
  // none); -1 otherwise. Reported, never chosen.
  int better_outside = -1;
};

// Throws InputError when the build has no simulator.
SimulatedRanking rank_by_simulation(const Scenario& scenario, const CostModel& model,
                                    const Comparison& comparison, int top);

std::string render_ranking(const SimulatedRanking& ranking, double memory_limit_bytes);
Json ranking_json(const SimulatedRanking& ranking);

}  // namespace osdp::cli
