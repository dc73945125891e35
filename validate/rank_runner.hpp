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
#include "validate/launch.hpp"
#include "validate/measurement.hpp"
#include "validate/rank_device.hpp"
#include "validate/validation_options.hpp"

namespace osdp::validate {

// Sets one compute thread and runs every plan on this rank, its tensors on `device` (whose
// backend `communicator` must be). With `compute_check` on a CPU device, the compute of each
// operator kind alone is timed at the first plan's batch size before and after. When
// `trace_directory` is not empty, writes this rank's last measured iteration there as
// "<plan>.rank<r>.json" (Chrome trace events: operators on the compute track, collectives on
// the communication track).
std::vector<PlanMeasurement> measure_plans(const GptShape& shape, const std::vector<PlanRun>& plans,
                                           Communicator& communicator, RankDevice& device,
                                           const ValidationOptions& options, int gpus_per_node,
                                           const std::string& trace_directory = "",
                                           std::vector<ComputeCheck>* compute_check = nullptr);

// Merges the ranks' event files of `plan` in `directory` into one Chrome trace (one process per
// rank) at `path`; ranks without a file are left out. Returns the ranks merged.
int merge_measured_trace(const std::string& directory, const std::string& plan, int ranks,
                         const std::string& path);

// Runs the plans on all ranks: under torchrun-style variables (rank_from_environment) this
// process is one rank and rendezvous goes through a TCP store at MASTER_ADDR:MASTER_PORT;
// otherwise `local_ranks` processes are forked here over a file store. Each rank runs on
// options.device: the CPU over Gloo, or cuda:LOCAL_RANK over NCCL (a forked rank's LOCAL_RANK
// is its rank). Returns the measurements
// where they are reported (the launching process, or rank 0 under torchrun) and nullopt on the
// other ranks. Throws RunFailure naming the ranks that died or failed.
// With `trace_directory`, the measured traces are written there as "<plan>.measured.json".
// With `compute_check` (CPU ranks), each operator kind's compute alone is timed before and after
// the plans run (see ComputeCheck) and returned there, where the measurements are.
std::optional<std::vector<PlanMeasurement>> run_measurements(
    const GptShape& shape, const std::vector<PlanRun>& plans, int local_ranks,
    const ValidationOptions& options, int gpus_per_node, const std::string& trace_directory = "",
    std::vector<ComputeCheck>* compute_check = nullptr);

}  // namespace osdp::validate
