#include "cli/work_guard.hpp"

#include <fmt/format.h>

#include "model/input_error.hpp"
#include "search/options.hpp"

namespace osdp::cli {
namespace {

// Measured on the development machine: the exact search spends about 30 ns per option and
// batch size (scenarios/default.json: 1e6 in 31 ms); the simulator runs about 3e5 events/s.
constexpr double search_seconds_per_unit = 3e-8;
// Before the search, every operator's options are costed and the dominated ones dropped, a
// comparison per pair of its options (plus the strategy baselines beside it): linear in the
// operators, quadratic in their options. Measured: 2,000-layer tiny GPTs (4,002 operators) take
// 6.7 s to plan: 3.4e7 option pairs (about 92 options an operator), 0.2 us a pair.
constexpr double seconds_per_option_pair = 2e-7;
constexpr double simulator_events_per_second = 3e5;
constexpr int step_mode_max_ranks = 32;

}  // namespace

WorkEstimate planning_work(const Scenario& scenario, int repetitions) {
  const CostModel model = scenario.cost_model();
  double options = 0;
  double pairs = 0;
  const int operators = scenario.workload->size();
  // Identical operators cost the same to enumerate; sample a few to bound the time of the
  // estimate itself on huge models.
  const int sampled = std::min(operators, 64);
  for (int i = 0; i < sampled; ++i) {
    const double count = static_cast<double>(enumerate_choices(model, i, scenario.search).size());
    options += count;
    pairs += count * count;
  }
  options *= static_cast<double>(operators) / sampled;
  pairs *= static_cast<double>(operators) / sampled;
  const double batches = scenario.training.max_batch_size - scenario.training.min_batch_size + 1.0;
  WorkEstimate estimate;
  estimate.units = options * batches * repetitions;
  estimate.seconds =
      estimate.units * search_seconds_per_unit + pairs * seconds_per_option_pair * repetitions;
  estimate.description = fmt::format(
      "{:.2g} option evaluations ({} operators, {:.0f} options, {:.2g} option pairs to compare, "
      "{:.0f} batch sizes{})",
      estimate.units, operators, options, pairs, batches,
      repetitions > 1 ? fmt::format(", {} memory limits", repetitions) : std::string());
  return estimate;
}

WorkEstimate simulation_work(const Scenario& scenario, int plans) {
  const double ranks = scenario.cluster.ranks;
  const double steps = scenario.cluster.ranks <= step_mode_max_ranks ? ranks - 1.0 : 1.0;
  // Up to four collectives per operator (gathers for forward, recompute and backward, and the
  // gradient's), each a flow per rank per step, plus compute tasks.
  WorkEstimate estimate;
  estimate.units = plans * ranks * scenario.workload->size() * (4.0 * steps + 3.0);
  estimate.seconds = estimate.units / simulator_events_per_second;
  estimate.description =
      fmt::format("{:.2g} simulated events ({:.0f} ranks x {} operators{})", estimate.units, ranks,
                  scenario.workload->size(), plans > 1 ? fmt::format(" x {} plans", plans) : "");
  return estimate;
}

void refuse_unless_forced(const WorkEstimate& estimate, bool force, double limit_seconds) {
  if (force || estimate.seconds <= limit_seconds) return;
  throw InputError("command line", "--force", "a run of about " + estimate.description,
                   fmt::format("work that finishes in minutes (this would take about {:.0f} s); "
                               "pass --force to run it anyway",
                               estimate.seconds));
}

}  // namespace osdp::cli
