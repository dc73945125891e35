// Measured against simulated: per plan the error in iteration time and peak memory, and whether
// the simulator ranks the plans as the measurements do. The caller simulates (the front end
// composes validate/ and sim/): with SimGrid ("simgrid") or, in a build without it, the
// analytic extended cost model ("analytic"); `simulator` says which.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/scenario.hpp"
#include "validate/measurement.hpp"

namespace osdp::validate {

// One pipeline stage of a tensor x pipeline x data layout: its peak memory (the highest of its
// ranks) and its bubble, the time it waited for the neighbouring stages in an iteration.
struct StageFigures {
  double peak_memory_bytes = 0;
  double bubble_s = 0;
};

struct SimulatedFigures {
  double iteration_time_s = 0;
  double peak_memory_bytes = 0;
  double exposed_communication_s = 0;
  std::vector<StageFigures> stages;  // layouts only, in stage order
};

struct ComparisonRow {
  std::string name;
  std::string plan;  // short description
  int batch_size = 0;
  double measured_iteration_time_s = 0;
  Spread measured_spread;  // the measured iterations' middle half
  double simulated_iteration_time_s = 0;
  // The time the critical rank's compute waited for communication in a step: of ranks that run
  // the same passes (all of a plan's, a layout stage's) the one that waited least, i.e. computed
  // longest; of a layout's stages the one that waited most. The model's ranks are that rank
  // (alike, at the slowest one's pace), so this is the figure comparable with the simulated one;
  // the faster ranks also wait for the slowest one to arrive.
  double measured_exposed_communication_s = 0;
  // That critical wait's middle half over the measured steps: how far it moves from step to
  // step (the median above is its median).
  Spread measured_exposed_spread;
  double measured_longest_exposed_communication_s = 0;  // the rank that waited longest
  // The same critical wait once each rank's waits for a peer that had not yet started the
  // collective are taken out (validate/peer_waits): what is left when the ranks keep one pace,
  // as the simulated ranks do. Its median over the steps; none where the measurement has no
  // split (layouts, HSDP's groups, --against files of older runs).
  std::optional<double> measured_exposed_without_peer_waits_s;
  double simulated_exposed_communication_s = 0;
  double measured_peak_memory_bytes = 0;
  double simulated_peak_memory_bytes = 0;
  // Layouts: per pipeline stage (one for pp 1); measured from the ranks of each stage (the
  // highest peak, the longest wait in receives), simulated as SimulatedFigures::stages.
  std::vector<StageFigures> measured_stages;
  std::vector<StageFigures> simulated_stages;
  // (simulated - measured) / measured, in percent.
  double time_error_percent() const;
  double memory_error_percent() const;
  // The simulated exposed communication within 30 % or 5 ms of the measured median (the
  // validation's target for the split of a step into compute and communication).
  bool exposed_within_target() const;
  // The same target for measured_exposed_without_peer_waits_s (false where there is none).
  bool exposed_without_peer_waits_within_target() const;
};

struct Comparison {
  std::string simulator;
  int ranks = 0;
  std::vector<ComparisonRow> rows;
  // Pairs of plans the simulator orders as the measurements do (by iteration time), among the
  // pairs whose measured middle halves do not overlap (`separated_pairs`): the runs cannot
  // order the others, which count as ties. `pairs` counts every pair.
  int concordant_pairs = 0;
  int separated_pairs = 0;
  int pairs = 0;
  // Of all pairs the simulator orders otherwise than the medians, the widest measured gap
  // (percent of the faster plan's time), separated or not.
  double widest_discordant_gap_percent = 0;
  bool ranking_agrees() const { return concordant_pairs == separated_pairs; }
  double median_abs_time_error_percent() const;
  double max_abs_time_error_percent() const;
  double median_abs_memory_error_percent() const;
  // Rows whose simulated exposed communication is within the target (exposed_within_target).
  int plans_with_exposed_within_target() const;
  // Rows with measured_exposed_without_peer_waits_s, and those of them within the target.
  int plans_with_peer_waits() const;
  int plans_with_exposed_without_peer_waits_within_target() const;
};

// ComparisonRow::measured_exposed_communication_s of one plan's measurement, with its middle
// half over the steps.
Spread critical_exposed_communication(const PlanRun& plan, const PlanMeasurement& measurement);
// The same of each step's waits less their peer waits (RankFigures::peer_wait_steps_s); none
// unless every rank reported them.
std::optional<Spread> critical_exposed_without_peer_waits(const PlanRun& plan,
                                                          const PlanMeasurement& measurement);

// The validation's target for exposed communication: `figure_s` within 30 % or 5 ms of
// `measured_s`.
bool exposed_within_target(double figure_s, double measured_s);

// The summary of a plan each row (and comparison_json's "plan") carries: "6x zdp, 2x dp+ckpt",
// or a layout's "tp 2 x pp 2 x dp 1, 1f1b, 4 micro-batches of 2".
std::string describe_plan_run(const PlanRun& plan);

Comparison compare(const Scenario& scenario, const std::vector<PlanRun>& plans,
                   const std::vector<PlanMeasurement>& measurements,
                   const std::vector<SimulatedFigures>& simulated, const std::string& simulator);

// Runs plots/predicted_vs_measured.py (python3 + matplotlib) on the CSV; returns what happened
// ("plot written to ...", or why not), never throws.
std::string plot_predicted_vs_measured(const std::string& csv_path, const std::string& png_path);

std::string comparison_table(const Comparison& comparison);
// The layouts' stages, one line each: measured and simulated peak memory and bubble (empty when
// no plan is a layout).
std::string stage_table(const Comparison& comparison);
std::string comparison_csv(const Comparison& comparison);
Json comparison_json(const Comparison& comparison);

// The compute check (ComputeCheck) against the cluster's laws: per kind the time measured alone
// before and after the runs over what the laws give for the same calls.
struct ComputeAgainstLaws {
  Json json = Json::array();
  double before_ratio = 0;  // all kinds: measured / laws
  double after_ratio = 0;
  std::string line;  // for the table's foot; empty without a check
};
ComputeAgainstLaws compare_compute(const std::vector<ComputeCheck>& checks, const CostModel& model);

// The speed reference (model/cluster.hpp SpeedReference): the cluster's probe timed before and
// after the runs over its time when the cluster was calibrated. A factor of 0.85 says this
// machine now computes the probe in 85 % of the time its laws were fitted at.
struct SpeedDrift {
  double calibrated_s = 0;
  double before_s = 0;
  double after_s = 0;
  double factor() const { return (before_s + after_s) / (2 * calibrated_s); }
};
// nullopt when the cluster has no reference or the checks did not time it.
std::optional<SpeedDrift> speed_drift(const std::vector<ComputeCheck>& checks,
                                      const std::optional<SpeedReference>& reference);
// The same plans against a simulation with the laws rescaled by the drift (a second reading of
// the run, beside the comparison as calibrated): JSON, and the line under the table.
Json speed_drift_json(const SpeedDrift& drift, const SpeedReference& reference,
                      const Comparison& rescaled);
std::string speed_drift_line(const SpeedDrift& drift, const SpeedReference& reference,
                             const Comparison& as_calibrated, const Comparison& rescaled);

}  // namespace osdp::validate
