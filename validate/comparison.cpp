#include "validate/comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>

#include "model/cluster_json.hpp"
#include "model/parallel_layout.hpp"
#include "model/wrapping.hpp"

namespace osdp::validate {
namespace {

double percent_error(double simulated, double measured) {
  return measured > 0 ? 100.0 * (simulated - measured) / measured : 0.0;
}

double median_abs(std::vector<double> values) {
  for (double& v : values) v = std::abs(v);
  return median_of(std::move(values));
}

std::string describe_plan(const Plan& plan) {
  // Counts of each distinct choice, e.g. "6x zdp, 2x dp+ckpt".
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& choice : plan.choices) {
    const std::string label = describe(choice);
    auto found = std::find_if(counts.begin(), counts.end(),
                              [&](const auto& entry) { return entry.first == label; });
    if (found == counts.end()) {
      counts.emplace_back(label, 1);
    } else {
      ++found->second;
    }
  }
  std::string text;
  for (const auto& [label, count] : counts) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{}x {}", count, label);
  }
  if (!plan.unit_sizes.empty()) text += "; " + describe_units(plan.unit_sizes);
  return text;
}

// "tp 2 x pp 2 x dp 1, 1f1b, 4 micro-batches of 2"; interleaved with its chunks per stage
// ("interleaved v2").
std::string describe_layout(const ParallelRun& run) {
  const std::string chunks = run.schedule == PipelineSchedule::interleaved
                                 ? fmt::format(" v{}", run.chunks_per_stage)
                                 : std::string();
  return fmt::format("tp {}{} x pp {} x dp {}{}, {}{}, {} micro-batch{} of {}{}",
                     run.degrees.tensor, run.sequence_parallel ? " (sp)" : "", run.degrees.pipeline,
                     run.degrees.data,
                     run.modes.empty() ? "" : fmt::format(" ({})", mode_name(run.modes.front())),
                     pipeline_schedule_name(run.schedule), chunks, run.micro_batches,
                     run.micro_batches > 1 ? "es" : "", run.micro_batch,
                     run.checkpointed_kinds.empty() ? "" : ", layers recomputed");
}

// A row's simulated figures of `stage` (none: zeros).
StageFigures simulated_stage(const ComparisonRow& row, std::size_t stage) {
  return stage < row.simulated_stages.size() ? row.simulated_stages[stage] : StageFigures{};
}

std::string mib(double bytes) { return fmt::format("{:.2f}", bytes / (1024.0 * 1024.0)); }

// The ranks that run the same passes, of those measured: a layout's stages in order (a stage's
// tensor and data-parallel ranks), or all of a plan's ranks as one group.
std::vector<std::vector<int>> same_pass_ranks(const PlanRun& plan,
                                              const PlanMeasurement& measurement) {
  const int measured = static_cast<int>(measurement.ranks.size());
  std::vector<std::vector<int>> groups;
  if (!plan.layout) {
    groups.emplace_back(measured);
    std::iota(groups.back().begin(), groups.back().end(), 0);
    return groups;
  }
  const ParallelLayout layout(plan.layout->degrees, plan.layout->order);
  for (int stage = 0; stage < plan.layout->degrees.pipeline; ++stage) {
    std::vector<int>& group = groups.emplace_back();
    for (const int rank : layout.stage_ranks(stage)) {
      if (rank < measured) group.push_back(rank);
    }
  }
  return groups;
}

// Per stage of the layout: the highest peak and the longest receive wait of its ranks (they run
// the same passes; the slowest one sets the pace).
std::vector<StageFigures> measured_stages(const PlanRun& plan, const PlanMeasurement& measurement) {
  std::vector<StageFigures> stages;
  for (const std::vector<int>& group : same_pass_ranks(plan, measurement)) {
    StageFigures& stage = stages.emplace_back();
    for (const int rank : group) {
      const RankFigures& figures = measurement.ranks[rank];
      stage.peak_memory_bytes = std::max(stage.peak_memory_bytes, figures.peak_memory_bytes);
      stage.bubble_s = std::max(stage.bubble_s, figures.pipeline_wait_s);
    }
  }
  return stages;
}

}  // namespace

std::string describe_plan_run(const PlanRun& plan) {
  return plan.layout ? describe_layout(*plan.layout) : describe_plan(plan.plan);
}

double ComparisonRow::time_error_percent() const {
  return percent_error(simulated_iteration_time_s, measured_iteration_time_s);
}

double ComparisonRow::memory_error_percent() const {
  return percent_error(simulated_peak_memory_bytes, measured_peak_memory_bytes);
}

namespace {

// The critical rank's figure each step: of each group of ranks running the same passes the one
// that waited least, of the groups the largest.
std::vector<double> critical_steps(
    const std::vector<std::vector<int>>& groups, const PlanMeasurement& measurement,
    std::size_t steps, const std::function<double(const RankFigures&, std::size_t)>& wait_of) {
  std::vector<double> critical_steps_s;
  for (std::size_t step = 0; step < steps; ++step) {
    double critical_s = 0;
    for (const std::vector<int>& group : groups) {
      if (group.empty()) continue;
      double least_s = std::numeric_limits<double>::infinity();
      for (const int rank : group) {
        least_s = std::min(least_s, wait_of(measurement.ranks[rank], step));
      }
      critical_s = std::max(critical_s, least_s);
    }
    critical_steps_s.push_back(critical_s);
  }
  return critical_steps_s;
}

}  // namespace

// ComparisonRow::measured_exposed_communication_s: in each measured iteration, per group of
// ranks that run the same passes the least wait (a rank that computed slower made the others
// wait for it: their extra wait is its compute, not communication), the most over the groups
// (a layout's stages); then the median (and middle half) over the iterations. From the ranks'
// medians alone when they did not report every iteration.
Spread critical_exposed_communication(const PlanRun& plan, const PlanMeasurement& measurement) {
  const std::vector<std::vector<int>> groups = same_pass_ranks(plan, measurement);
  const std::size_t steps = measurement.ranks.empty()
                                ? 0
                                : measurement.ranks.front().exposed_communication_steps_s.size();
  const bool per_step =
      steps > 0 && std::all_of(measurement.ranks.begin(), measurement.ranks.end(),
                               [&](const RankFigures& figures) {
                                 return figures.exposed_communication_steps_s.size() == steps;
                               });
  if (!per_step) {
    // The ranks' medians only: the critical rank's median as if it were one step.
    const double critical_s =
        critical_steps(groups, measurement, 1, [](const RankFigures& figures, std::size_t) {
          return figures.exposed_communication_s;
        }).front();
    return {critical_s, critical_s, critical_s, critical_s};
  }
  return spread_of(
      critical_steps(groups, measurement, steps, [](const RankFigures& figures, std::size_t step) {
        return figures.exposed_communication_steps_s[step];
      }));
}

// The same, step by step, of each rank's wait less its peer waits.
std::optional<Spread> critical_exposed_without_peer_waits(const PlanRun& plan,
                                                          const PlanMeasurement& measurement) {
  if (measurement.ranks.empty()) return std::nullopt;
  const std::size_t steps = measurement.ranks.front().exposed_communication_steps_s.size();
  for (const RankFigures& figures : measurement.ranks) {
    if (steps == 0 || figures.exposed_communication_steps_s.size() != steps ||
        figures.peer_wait_steps_s.size() != steps) {
      return std::nullopt;
    }
  }
  return spread_of(critical_steps(same_pass_ranks(plan, measurement), measurement, steps,
                                  [](const RankFigures& figures, std::size_t step) {
                                    return std::max(0.0,
                                                    figures.exposed_communication_steps_s[step] -
                                                        figures.peer_wait_steps_s[step]);
                                  }));
}

bool exposed_within_target(double figure_s, double measured_s) {
  const double difference_s = std::abs(figure_s - measured_s);
  return difference_s <= 0.005 || difference_s <= 0.3 * measured_s;
}

bool ComparisonRow::exposed_within_target() const {
  return validate::exposed_within_target(simulated_exposed_communication_s,
                                         measured_exposed_communication_s);
}

bool ComparisonRow::exposed_without_peer_waits_within_target() const {
  return measured_exposed_without_peer_waits_s &&
         validate::exposed_within_target(simulated_exposed_communication_s,
                                         *measured_exposed_without_peer_waits_s);
}

double Comparison::median_abs_time_error_percent() const {
  std::vector<double> errors;
  for (const auto& row : rows) errors.push_back(row.time_error_percent());
  return median_abs(errors);
}

double Comparison::max_abs_time_error_percent() const {
  double largest = 0;
  for (const auto& row : rows) largest = std::max(largest, std::abs(row.time_error_percent()));
  return largest;
}

double Comparison::median_abs_memory_error_percent() const {
  std::vector<double> errors;
  for (const auto& row : rows) errors.push_back(row.memory_error_percent());
  return median_abs(errors);
}

int Comparison::plans_with_exposed_within_target() const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const ComparisonRow& row) {
    return row.exposed_within_target();
  }));
}

int Comparison::plans_with_peer_waits() const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const ComparisonRow& row) {
    return row.measured_exposed_without_peer_waits_s.has_value();
  }));
}

int Comparison::plans_with_exposed_without_peer_waits_within_target() const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const ComparisonRow& row) {
    return row.exposed_without_peer_waits_within_target();
  }));
}

Comparison compare(const Scenario& scenario, const std::vector<PlanRun>& plans,
                   const std::vector<PlanMeasurement>& measurements,
                   const std::vector<SimulatedFigures>& simulated, const std::string& simulator) {
  Comparison comparison;
  comparison.simulator = simulator;
  comparison.ranks = scenario.cluster.ranks;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    ComparisonRow row;
    row.name = plans[i].name;
    row.plan = describe_plan_run(plans[i]);
    row.batch_size = plans[i].plan.batch_size;
    row.measured_iteration_time_s = measurements.at(i).iteration_time_s();
    row.measured_spread = measurements.at(i).iteration_time_spread();
    row.measured_exposed_spread = critical_exposed_communication(plans[i], measurements.at(i));
    row.measured_exposed_communication_s = row.measured_exposed_spread.median_s;
    row.measured_longest_exposed_communication_s = measurements.at(i).exposed_communication_s();
    if (const auto without = critical_exposed_without_peer_waits(plans[i], measurements.at(i))) {
      row.measured_exposed_without_peer_waits_s = without->median_s;
    }
    row.measured_peak_memory_bytes = measurements.at(i).peak_memory_bytes();
    row.simulated_iteration_time_s = simulated.at(i).iteration_time_s;
    row.simulated_exposed_communication_s = simulated.at(i).exposed_communication_s;
    row.simulated_peak_memory_bytes = simulated.at(i).peak_memory_bytes;
    if (plans[i].layout) {
      row.measured_stages = measured_stages(plans[i], measurements.at(i));
      row.simulated_stages = simulated.at(i).stages;
    }
    comparison.rows.push_back(row);
  }
  const auto& rows = comparison.rows;
  for (std::size_t a = 0; a < rows.size(); ++a) {
    for (std::size_t b = a + 1; b < rows.size(); ++b) {
      ++comparison.pairs;
      const double measured = rows[a].measured_iteration_time_s - rows[b].measured_iteration_time_s;
      const double simulated =
          rows[a].simulated_iteration_time_s - rows[b].simulated_iteration_time_s;
      // A tie on either side (e.g. two plans the simulator cannot tell apart) orders nothing.
      const bool alike = measured == 0 || simulated == 0 || (measured < 0) == (simulated < 0);
      if (!alike) {
        const double faster =
            std::min(rows[a].measured_iteration_time_s, rows[b].measured_iteration_time_s);
        comparison.widest_discordant_gap_percent =
            std::max(comparison.widest_discordant_gap_percent, 100.0 * std::abs(measured) / faster);
      }
      // Plans whose measured middle halves overlap are ties the runs cannot order.
      if (rows[a].measured_spread.overlaps(rows[b].measured_spread)) continue;
      ++comparison.separated_pairs;
      if (alike) ++comparison.concordant_pairs;
    }
  }
  return comparison;
}

std::string comparison_table(const Comparison& comparison) {
  std::size_t name_width = 14;  // the plan column fits the longest name (fsdp_min_params)
  for (const auto& row : comparison.rows) name_width = std::max(name_width, row.name.size());
  std::ostringstream out;
  // Exposed communication: the time a rank's compute waited for collectives, which shows
  // whether a plan's time splits into compute and communication as simulated.
  out << fmt::format(
      "{:<{}} {:>9} {:>10} {:>15} {:>10} {:>8} {:>11} {:>13} {:>11} {:>11} {:>11} {:>8}  {}\n",
      "plan", name_width, "batch", "measured", "middle half", "simulated", "error", "measured",
      "middle half", "simulated", "measured", "simulated", "error", "operators");
  out << fmt::format(
      "{:<{}} {:>9} {:>10} {:>15} {:>10} {:>8} {:>11} {:>13} {:>11} {:>11} {:>11} {:>8}\n", "",
      name_width, "per rank", "time ms", "ms", "time ms", "%", "exposed ms", "ms", "exposed ms",
      "peak MiB", "peak MiB", "%");
  for (const auto& row : comparison.rows) {
    out << fmt::format(
        "{:<{}} {:>9} {:>10.2f} {:>15} {:>10.2f} {:>+8.1f} {:>11.1f} {:>13} {:>11.1f} {:>11} "
        "{:>11} {:>+8.1f}  {}\n",
        row.name, name_width, row.batch_size, 1e3 * row.measured_iteration_time_s,
        fmt::format("{:.1f}-{:.1f}", 1e3 * row.measured_spread.first_quartile_s,
                    1e3 * row.measured_spread.third_quartile_s),
        1e3 * row.simulated_iteration_time_s, row.time_error_percent(),
        1e3 * row.measured_exposed_communication_s,
        fmt::format("{:.1f}-{:.1f}", 1e3 * row.measured_exposed_spread.first_quartile_s,
                    1e3 * row.measured_exposed_spread.third_quartile_s),
        1e3 * row.simulated_exposed_communication_s, mib(row.measured_peak_memory_bytes),
        mib(row.simulated_peak_memory_bytes), row.memory_error_percent(), row.plan);
  }
  const int ties = comparison.pairs - comparison.separated_pairs;
  const std::string tied =
      ties == 0 ? std::string()
                : fmt::format("; {} pair{} within each other's middle half, not ordered", ties,
                              ties == 1 ? "" : "s");
  out << fmt::format(
      "ranking by time: {} ({} of {} pairs whose measured middle halves do not overlap ordered "
      "alike{}); median |error|: time {:.1f} %, peak memory {:.1f} %; simulated by: {}\n",
      comparison.ranking_agrees() ? "agrees" : "differs", comparison.concordant_pairs,
      comparison.separated_pairs, tied, comparison.median_abs_time_error_percent(),
      comparison.median_abs_memory_error_percent(),
      comparison.simulator == "simgrid" ? "SimGrid simulator"
                                        : "analytic cost model (osdp built without the simulator)");
  out << fmt::format(
      "exposed communication (the critical rank's wait a step): simulated within 30 % or 5 ms of "
      "the measured median in {} of {} plans\n",
      comparison.plans_with_exposed_within_target(), comparison.rows.size());
  if (const int split = comparison.plans_with_peer_waits(); split > 0) {
    out << fmt::format(
        "  less each rank's waits for a peer not yet at the collective (ranks out of pace, which "
        "the simulated ranks are not): within 30 % or 5 ms in {} of {} plans\n",
        comparison.plans_with_exposed_without_peer_waits_within_target(), split);
  }
  return out.str();
}

std::string stage_table(const Comparison& comparison) {
  std::size_t name_width = 14;
  bool any = false;
  for (const auto& row : comparison.rows) {
    name_width = std::max(name_width, row.name.size());
    any = any || !row.measured_stages.empty();
  }
  if (!any) return "";
  std::ostringstream out;
  out << "per pipeline stage: peak memory (the stage's highest rank) and bubble (time a rank of "
         "the stage waited for its neighbouring stages in an iteration, the longest of the "
         "stage's ranks)\n";
  out << fmt::format("{:<{}} {:>5} {:>11} {:>11} {:>8} {:>11} {:>11}\n", "plan", name_width,
                     "stage", "measured", "simulated", "error", "measured", "simulated");
  out << fmt::format("{:<{}} {:>5} {:>11} {:>11} {:>8} {:>11} {:>11}\n", "", name_width, "",
                     "peak MiB", "peak MiB", "%", "bubble ms", "bubble ms");
  std::vector<double> memory_errors;
  for (const auto& row : comparison.rows) {
    for (std::size_t stage = 0; stage < row.measured_stages.size(); ++stage) {
      const StageFigures& measured = row.measured_stages[stage];
      const StageFigures simulated = simulated_stage(row, stage);
      const double memory_error =
          percent_error(simulated.peak_memory_bytes, measured.peak_memory_bytes);
      memory_errors.push_back(memory_error);
      out << fmt::format("{:<{}} {:>5} {:>11} {:>11} {:>+8.1f} {:>11.1f} {:>11.1f}\n",
                         stage == 0 ? row.name : "", name_width, stage,
                         mib(measured.peak_memory_bytes), mib(simulated.peak_memory_bytes),
                         memory_error, 1e3 * measured.bubble_s, 1e3 * simulated.bubble_s);
    }
  }
  out << fmt::format("stages: {}, median |peak memory error| {:.1f} %\n", memory_errors.size(),
                     median_abs(memory_errors));
  return out.str();
}

std::string comparison_csv(const Comparison& comparison) {
  std::ostringstream out;
  out << "plan,batch_size,measured_iteration_time_s,simulated_iteration_time_s,time_error_percent,"
         "measured_exposed_communication_s,simulated_exposed_communication_s,"
         "measured_peak_memory_bytes,simulated_peak_memory_bytes,memory_error_percent,"
         "measured_iteration_time_q1_s,measured_iteration_time_q3_s,"
         "measured_exposed_communication_q1_s,measured_exposed_communication_q3_s,"
         "exposed_within_target\n";
  for (const auto& row : comparison.rows) {
    out << fmt::format(
        "{},{},{:.9g},{:.9g},{:.4f},{:.9g},{:.9g},{:.0f},{:.0f},{:.4f},{:.9g},{:.9g},{:.9g},{:.9g},"
        "{:d}\n",
        row.name, row.batch_size, row.measured_iteration_time_s, row.simulated_iteration_time_s,
        row.time_error_percent(), row.measured_exposed_communication_s,
        row.simulated_exposed_communication_s, row.measured_peak_memory_bytes,
        row.simulated_peak_memory_bytes, row.memory_error_percent(),
        row.measured_spread.first_quartile_s, row.measured_spread.third_quartile_s,
        row.measured_exposed_spread.first_quartile_s, row.measured_exposed_spread.third_quartile_s,
        row.exposed_within_target() ? 1 : 0);
  }
  return out.str();
}

Json comparison_json(const Comparison& comparison) {
  Json plans = Json::array();
  for (const auto& row : comparison.rows) {
    Json stages = Json::array();
    for (std::size_t stage = 0; stage < row.measured_stages.size(); ++stage) {
      const StageFigures simulated = simulated_stage(row, stage);
      stages.push_back(
          {{"stage", stage},
           {"measured_peak_memory_bytes", row.measured_stages[stage].peak_memory_bytes},
           {"simulated_peak_memory_bytes", simulated.peak_memory_bytes},
           {"measured_bubble_s", row.measured_stages[stage].bubble_s},
           {"simulated_bubble_s", simulated.bubble_s}});
    }
    plans.push_back(
        {{"name", row.name},
         {"plan", row.plan},
         {"batch_size", row.batch_size},
         {"measured_iteration_time_s", row.measured_iteration_time_s},
         {"simulated_iteration_time_s", row.simulated_iteration_time_s},
         {"time_error_percent", row.time_error_percent()},
         {"measured_exposed_communication_s", row.measured_exposed_communication_s},
         {"measured_longest_exposed_communication_s", row.measured_longest_exposed_communication_s},
         {"simulated_exposed_communication_s", row.simulated_exposed_communication_s},
         {"measured_peak_memory_bytes", row.measured_peak_memory_bytes},
         {"simulated_peak_memory_bytes", row.simulated_peak_memory_bytes},
         {"memory_error_percent", row.memory_error_percent()},
         {"measured_iteration_time_q1_s", row.measured_spread.first_quartile_s},
         {"measured_iteration_time_q3_s", row.measured_spread.third_quartile_s},
         {"measured_exposed_communication_q1_s", row.measured_exposed_spread.first_quartile_s},
         {"measured_exposed_communication_q3_s", row.measured_exposed_spread.third_quartile_s},
         {"measured_exposed_communication_mean_s", row.measured_exposed_spread.mean_s},
         {"exposed_within_target", row.exposed_within_target()},
         {"stages", std::move(stages)}});
    if (row.measured_exposed_without_peer_waits_s) {
      plans.back()["measured_exposed_without_peer_waits_s"] =
          *row.measured_exposed_without_peer_waits_s;
      plans.back()["exposed_without_peer_waits_within_target"] =
          row.exposed_without_peer_waits_within_target();
    }
  }
  return {{"simulator", comparison.simulator},
          {"ranks", comparison.ranks},
          {"plans", std::move(plans)},
          {"ranking_agrees", comparison.ranking_agrees()},
          {"concordant_pairs", comparison.concordant_pairs},
          {"separated_pairs", comparison.separated_pairs},
          {"pairs", comparison.pairs},
          {"widest_discordant_gap_percent", comparison.widest_discordant_gap_percent},
          {"median_abs_time_error_percent", comparison.median_abs_time_error_percent()},
          {"max_abs_time_error_percent", comparison.max_abs_time_error_percent()},
          {"median_abs_memory_error_percent", comparison.median_abs_memory_error_percent()}};
}

std::string plot_predicted_vs_measured(const std::string& csv_path, const std::string& png_path) {
  const std::filesystem::path script =
      std::filesystem::path(OSDP_SOURCE_DIR) / "plots" / "predicted_vs_measured.py";
  if (!std::filesystem::exists(script)) return "no plot: " + script.string() + " not found";
  // Debian's python3-matplotlib lives with the system interpreter; a pyenv or venv python3
  // first on PATH may lack it.
  for (const char* python : {"/usr/bin/python3", "python3"}) {
    const std::string command = fmt::format("'{}' '{}' '{}' '{}' >/dev/null 2>&1", python,
                                            script.string(), csv_path, png_path);
    if (std::system(command.c_str()) == 0) return "plot " + png_path;
  }
  return "no plot: python3 with matplotlib failed on " + script.string();
}

ComputeAgainstLaws compare_compute(const std::vector<ComputeCheck>& checks,
                                   const CostModel& model) {
  ComputeAgainstLaws result;
  double law_total = 0, before_total = 0, after_total = 0;
  std::string kinds;
  for (const ComputeCheck& check : checks) {
    if (check.speed_reference) continue;
    double law_s = 0;
    for (int op = 0; op < model.workload().size(); ++op) {
      if (operator_kind_name(model.workload().op(op).kind) != check.kind) continue;
      law_s += model.forward_compute_s(op).at(check.batch_size) +
               model.backward_compute_s(op).at(check.batch_size);
    }
    if (law_s <= 0) continue;
    law_total += law_s;
    before_total += check.before_s;
    after_total += check.after_s;
    result.json.push_back({{"kind", check.kind},
                           {"batch_size", check.batch_size},
                           {"calls", check.calls},
                           {"measured_before_s", check.before_s},
                           {"measured_after_s", check.after_s},
                           {"cluster_law_s", law_s}});
    kinds += fmt::format("{}{} {:.2f}x / {:.2f}x", kinds.empty() ? "" : ", ", check.kind,
                         check.before_s / law_s, check.after_s / law_s);
  }
  if (law_total <= 0) return result;
  result.before_ratio = before_total / law_total;
  result.after_ratio = after_total / law_total;
  result.line = fmt::format(
      "compute alone against the cluster's laws (measured / law, before / after the runs): {}; "
      "all {:.2f}x / {:.2f}x{}",
      kinds, result.before_ratio, result.after_ratio,
      std::abs(result.before_ratio - 1) > 0.1 || std::abs(result.after_ratio - 1) > 0.1
          ? " (this machine computes at another speed than when the cluster was calibrated: "
            "every time error above moves with it)"
          : "");
  return result;
}

std::optional<SpeedDrift> speed_drift(const std::vector<ComputeCheck>& checks,
                                      const std::optional<SpeedReference>& reference) {
  if (!reference || reference->compute_s <= 0) return std::nullopt;
  SpeedDrift drift;
  drift.calibrated_s = reference->compute_s;
  for (const ComputeCheck& check : checks) {
    if (!check.speed_reference) continue;
    drift.before_s += check.before_s;
    drift.after_s += check.after_s;
  }
  if (drift.before_s <= 0 || drift.after_s <= 0) return std::nullopt;
  return drift;
}

Json speed_drift_json(const SpeedDrift& drift, const SpeedReference& reference,
                      const Comparison& rescaled) {
  Json plans = Json::array();
  for (const ComparisonRow& row : rescaled.rows) {
    plans.push_back({{"name", row.name},
                     {"simulated_iteration_time_s", row.simulated_iteration_time_s},
                     {"time_error_percent", row.time_error_percent()},
                     {"simulated_exposed_communication_s", row.simulated_exposed_communication_s}});
  }
  return {{"probe", probe_shape_json(reference.probe)},
          {"batch_size", reference.batch_size},
          {"calibrated_s", drift.calibrated_s},
          {"before_s", drift.before_s},
          {"after_s", drift.after_s},
          {"factor", drift.factor()},
          {"rescaled",
           {{"plans", std::move(plans)},
            {"median_abs_time_error_percent", rescaled.median_abs_time_error_percent()},
            {"max_abs_time_error_percent", rescaled.max_abs_time_error_percent()},
            {"concordant_pairs", rescaled.concordant_pairs},
            {"separated_pairs", rescaled.separated_pairs}}}};
}

std::string speed_drift_line(const SpeedDrift& drift, const SpeedReference& reference,
                             const Comparison& as_calibrated, const Comparison& rescaled) {
  return fmt::format(
      "speed reference (the calibration's probe, {} x {}, sequence {}, batch {}): {:.2f}x / "
      "{:.2f}x its calibrated time before / after the runs; with every compute law rescaled by "
      "{:.3f}: median |time error| {:.1f} % (largest {:.1f} %), as calibrated {:.1f} % ({:.1f} %)",
      reference.probe.layers, reference.probe.hidden, reference.probe.sequence_length,
      reference.batch_size, drift.before_s / drift.calibrated_s, drift.after_s / drift.calibrated_s,
      drift.factor(), rescaled.median_abs_time_error_percent(),
      rescaled.max_abs_time_error_percent(), as_calibrated.median_abs_time_error_percent(),
      as_calibrated.max_abs_time_error_percent());
}

}  // namespace osdp::validate
