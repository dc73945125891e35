#include "cli/plan_evaluation.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "cli/format.hpp"
#include "model/input_error.hpp"
#include "model/units.hpp"
#include "search/options.hpp"

#ifdef OSDP_WITH_SIM
#include "search/split_cuts.hpp"
#include "sim/simulate.hpp"
#endif

namespace osdp::cli {

SimulatedRanking rank_by_simulation(const Scenario& scenario, const CostModel& model,
                                    const Comparison& comparison, int top) {
#ifndef OSDP_WITH_SIM
  (void)scenario;
  (void)model;
  (void)comparison;
  (void)top;
  throw InputError("", "--evaluate", "sim", "\"analytic\": this osdp was built without sim/");
#else
  SimulatedRanking ranking;
  // The best plan of every batch size that fits, so the top K are distinct candidates.
  const SearchResult every_batch =
      search_split_cuts(model, scenario.search, comparison.memory_limit_bytes,
                        /*solve_every_batch=*/true)
          .result;
  int rank = 1;
  for (const ScheduledPlan& plan : top_plans(every_batch, top)) {
    ranking.candidates.push_back(
        {fmt::format("osdp #{} (b={})", rank++, plan.plan.batch_size), plan});
  }
  for (const BaselineOutcome& baseline : comparison.baselines) {
    if (baseline.best) {
      EvaluatedCandidate candidate{baseline.strategy.name, *baseline.best};
      candidate.in_search_space = baseline.in_search_space;
      ranking.candidates.push_back(std::move(candidate));
    }
  }
  std::vector<Plan> plans;
  for (const auto& candidate : ranking.candidates) plans.push_back(candidate.analytic.plan);
  const sim::SimOptions options =
      sim::read_sim_options(scenario.simulation, scenario.file, "$.simulation");
  const std::vector<sim::SimulationResult> results = sim::simulate_plans(scenario, plans, options);
  for (std::size_t i = 0; i < results.size(); ++i) {
    EvaluatedCandidate& candidate = ranking.candidates[i];
    candidate.simulated_iteration_time_s = results[i].iteration_time_s;
    candidate.simulated_throughput_samples_per_s = results[i].throughput_samples_per_s;
    candidate.simulated_peak_memory_bytes = results[i].peak_memory_bytes;
    candidate.simulated_exposed_comm_s = results[i].exposed_comm_total_s();
    candidate.fits = fits(results[i].peak_memory_bytes, comparison.memory_limit_bytes);
  }
  std::stable_sort(ranking.candidates.begin(), ranking.candidates.end(),
                   [](const EvaluatedCandidate& a, const EvaluatedCandidate& b) {
                     return a.simulated_throughput_samples_per_s >
                            b.simulated_throughput_samples_per_s;
                   });
  // Best first: the first that fits within the search space is chosen; an outside one that fits
  // and comes before it is worth saying.
  for (std::size_t i = 0; i < ranking.candidates.size(); ++i) {
    const EvaluatedCandidate& candidate = ranking.candidates[i];
    if (!candidate.fits) continue;
    if (candidate.in_search_space) {
      ranking.chosen = static_cast<int>(i);
      break;
    }
    if (ranking.better_outside < 0) ranking.better_outside = static_cast<int>(i);
  }
  return ranking;
#endif
}

std::string render_ranking(const SimulatedRanking& ranking, double memory_limit_bytes) {
  Table table({{"candidate"},
               {"batch", Table::Align::right},
               {"analytic", Table::Align::right},
               {"simulated", Table::Align::right},
               {"sim/analytic", Table::Align::right},
               {"exposed comm", Table::Align::right},
               {"analytic peak", Table::Align::right},
               {"simulated peak", Table::Align::right}});
  for (std::size_t i = 0; i < ranking.candidates.size(); ++i) {
    const EvaluatedCandidate& c = ranking.candidates[i];
    const PlanCost& analytic = c.analytic.cost;
    std::string name = c.name + (c.in_search_space ? "" : " *");
    if (static_cast<int>(i) == ranking.chosen) name = "> " + name;
    table.add_row({name, std::to_string(analytic.batch_size),
                   format_throughput(analytic.throughput_samples_per_s),
                   format_throughput(c.simulated_throughput_samples_per_s),
                   fmt::format("{:.2f}x", c.simulated_throughput_samples_per_s /
                                              analytic.throughput_samples_per_s),
                   units::format_seconds(c.simulated_exposed_comm_s),
                   units::format_bytes(analytic.peak_memory_bytes),
                   units::format_bytes(c.simulated_peak_memory_bytes) + (c.fits ? "" : " (over)")});
  }
  std::string text =
      fmt::format("\nRe-ranked by simulated throughput (the simulator is the referee; limit {}):\n",
                  units::format_bytes(memory_limit_bytes));
  text += table.render();
  const bool any_outside =
      std::any_of(ranking.candidates.begin(), ranking.candidates.end(),
                  [](const EvaluatedCandidate& c) { return !c.in_search_space; });
  if (any_outside) {
    text += "  * outside this search space: shown for comparison, never chosen\n";
  }
  if (ranking.chosen < 0) {
    text += "  no candidate the search options allow fits in the simulated memory timeline\n";
  } else {
    text += fmt::format("  chosen by simulation: {}\n", ranking.candidates[ranking.chosen].name);
  }
  if (ranking.better_outside >= 0) {
    text += fmt::format(
        "  {} (outside the search options) fits and simulates faster: widen the options "
        "(--modes, --checkpoint) to let the search consider it\n",
        ranking.candidates[ranking.better_outside].name);
  }
  return text;
}

Json ranking_json(const SimulatedRanking& ranking) {
  Json candidates = Json::array();
  for (const auto& c : ranking.candidates) {
    candidates.push_back(
        {{"name", c.name},
         {"batch_size", c.analytic.cost.batch_size},
         {"analytic_iteration_time_s", c.analytic.cost.iteration_time_s},
         {"analytic_throughput_samples_per_s", c.analytic.cost.throughput_samples_per_s},
         {"analytic_peak_memory_bytes", c.analytic.cost.peak_memory_bytes},
         {"simulated_iteration_time_s", c.simulated_iteration_time_s},
         {"simulated_throughput_samples_per_s", c.simulated_throughput_samples_per_s},
         {"simulated_peak_memory_bytes", c.simulated_peak_memory_bytes},
         {"simulated_exposed_comm_s", c.simulated_exposed_comm_s},
         {"fits", c.fits},
         {"in_search_space", c.in_search_space}});
  }
  return candidates;
}

}  // namespace osdp::cli
