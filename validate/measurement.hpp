// What a validation run measures, as plain values: the plans it runs and each rank's figures.
// Torch-free, so the `osdp` front end reads what the libtorch runtime (osdp-runtime) reports.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/json_reader.hpp"
#include "model/parallel_iteration.hpp"
#include "model/plan.hpp"

namespace osdp::validate {

struct PlanRun {
  std::string name;
  Plan plan;
  // A tensor x pipeline x data layout (validate/parallel_gpt): then `plan` holds only the
  // micro-batch size, and the layout's degrees, schedule, micro-batches and layer split say the
  // rest (every operator replicated in its data-parallel group).
  std::optional<ParallelRun> layout = std::nullopt;
};

struct RankFigures {
  double iteration_time_s = 0;            // median over the measured iterations
  double exposed_communication_s = 0;     // median
  double peak_memory_bytes = 0;           // highest over the measured iterations
  double loss = 0;                        // after the last iteration
  std::vector<double> iteration_times_s;  // every measured iteration, in the order measured
  // Median of the exposed communication's part spent receiving from neighbouring pipeline
  // stages: the bubble as this rank saw it (layouts only; 0 otherwise).
  double pipeline_wait_s = 0;
  // Every measured iteration's exposed communication, in the order measured (empty when the
  // rank did not report them).
  std::vector<double> exposed_communication_steps_s = {};
  // Of each measured iteration's exposed communication, the part spent waiting for a peer that
  // had not yet started the collective (validate/peer_waits), in the same order; empty where the
  // runtime could not tell (layouts, groups other than the world, ranks on several machines).
  std::vector<double> peer_wait_steps_s = {};
};

// The middle half of a set of times: its quartiles (linear interpolation between ranks).
struct Spread {
  double first_quartile_s = 0;
  double median_s = 0;
  double third_quartile_s = 0;
  // The mean: what a law fitted to mean times (the calibration's, which keeps the tail of
  // slow wake-ups) predicts.
  double mean_s = 0;
  // Whether the two middle halves share any time: then the runs cannot order the two plans.
  bool overlaps(const Spread& other) const {
    return first_quartile_s <= other.third_quartile_s && other.first_quartile_s <= third_quartile_s;
  }
};
Spread spread_of(std::vector<double> times_s);
// The median (the mean of the middle two of an even count); 0 when there is none.
double median_of(std::vector<double> values);

struct PlanMeasurement {
  std::string name;
  std::vector<RankFigures> ranks;
  // Per measured iteration the slowest rank's time (ranks synchronise every iteration); empty
  // when the ranks did not report their iterations.
  std::vector<double> slowest_iteration_times_s() const;
  // Their median (else the slowest rank's median) and spread, the highest peak.
  double iteration_time_s() const;
  Spread iteration_time_spread() const;
  double exposed_communication_s() const;
  double peak_memory_bytes() const;
};

// The compute of one operator kind, timed alone (every rank at once, each on a communicator of
// its own, as `osdp calibrate` times it) at the validated batch size, just before the plans run
// and just after: set against the cluster's compute laws, it shows how far this machine's speed
// now is from the speed it had when calibrated.
struct ComputeCheck {
  std::string kind;    // "attention", "mlp", ...
  int batch_size = 0;  // rows per rank and call
  int calls = 0;       // operators of the kind; the times are their sum, forward + backward
  double before_s = 0;
  double after_s = 0;
  // The cluster's speed reference probe (ValidationOptions::speed_probe) rather than the
  // validated model.
  bool speed_reference = false;
};

Json compute_check_to_json(const std::vector<ComputeCheck>& checks);
std::vector<ComputeCheck> compute_check_from_json(const JsonReader& reader, const std::string& key);

Json measurements_to_json(const std::vector<PlanMeasurement>& measurements);
// Throws InputError naming `file` and the JSON path on a malformed document.
std::vector<PlanMeasurement> measurements_from_json(const Json& json,
                                                    const std::string& file = "<measurements>");

// A plan's choices without a workload (the runtime rebuilds the GPT from its shape).
Json plan_runs_to_json(const std::vector<PlanRun>& plans);
std::vector<PlanRun> plan_runs_from_json(const JsonReader& reader);

}  // namespace osdp::validate
