// One rank's part of a validation run: each plan trained for warm-up + measured iterations,
// then every rank's figures gathered on all ranks (the same collectives, so a missing rank is
// reported here too).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/json_reader.hpp"
#include "model/plan.hpp"
#include "validate/communicator.hpp"
#include "validate/gpt_shape.hpp"
#include "validate/rank_device.hpp"
#include "validate/validation_options.hpp"

namespace osdp::validate {

struct PlanRun {
  std::string name;
  Plan plan;
};

struct RankFigures {
  double iteration_time_s = 0;         // median over the measured iterations
  double exposed_communication_s = 0;  // median
  double peak_memory_bytes = 0;        // highest over the measured iterations
  double loss = 0;                     // after the last iteration
};

struct PlanMeasurement {
  std::string name;
  std::vector<RankFigures> ranks;
  // The slowest rank's median (ranks synchronise every iteration) and the highest peak.
  double iteration_time_s() const;
  double exposed_communication_s() const;
  double peak_memory_bytes() const;
};

// Sets one compute thread and runs every plan on this rank, its tensors on `device` (whose
// backend `communicator` must be). When
// `trace_directory` is not empty, writes this rank's last measured iteration there as
// "<plan>.rank<r>.json" (Chrome trace events: operators on the compute track, collectives on
// the communication track).
std::vector<PlanMeasurement> measure_plans(const GptShape& shape, const std::vector<PlanRun>& plans,
                                           Communicator& communicator, RankDevice& device,
                                           const ValidationOptions& options, int gpus_per_node,
                                           const std::string& trace_directory = "");

// Merges the ranks' event files of `plan` in `directory` into one Chrome trace (one process per
// rank) at `path`; ranks without a file are left out. Returns the ranks merged.
int merge_measured_trace(const std::string& directory, const std::string& plan, int ranks,
                         const std::string& path);

// A run failed: a rank died, hung or reported an error. The message names the ranks.
class RunFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs the plans on all ranks: under torchrun-style variables (rank_from_environment) this
// process is one rank and rendezvous goes through a TCP store at MASTER_ADDR:MASTER_PORT;
// otherwise `local_ranks` processes are forked here over a file store. Each rank runs on
// options.device: the CPU over Gloo, or cuda:LOCAL_RANK over NCCL (a forked rank's LOCAL_RANK
// is its rank). Returns the measurements
// where they are reported (the launching process, or rank 0 under torchrun) and nullopt on the
// other ranks. Throws RunFailure naming the ranks that died or failed.
// With `trace_directory`, the measured traces are written there as "<plan>.measured.json".
std::optional<std::vector<PlanMeasurement>> run_measurements(
    const GptShape& shape, const std::vector<PlanRun>& plans, int local_ranks,
    const ValidationOptions& options, int gpus_per_node, const std::string& trace_directory = "");

Json measurements_to_json(const std::vector<PlanMeasurement>& measurements);
std::vector<PlanMeasurement> measurements_from_json(const Json& json);

}  // namespace osdp::validate
